package timerwheel_test

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/timerwheel"
)

// A poller keeps one deadline per in-flight read: it schedules the first
// when the read is sent, re-sends and schedules the next from inside the
// fire callback, cancels when the answer comes, and advances the wheel
// with its own clock. With a 3 s budget and 2 retries, x = 500 ms and the
// attempts go out at 0, 500 ms and 1.5 s, giving up at 3 s (SPEC R6).
func Example() {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := timerwheel.New(timerwheel.Config{Tick: time.Millisecond, Start: start})
	if err != nil {
		panic(err)
	}
	const x = 500 * time.Millisecond
	type read struct {
		sent    time.Time
		segment int // k of the segment running, 1..3
		timer   timerwheel.Handle
	}
	reads := map[uint64]*read{}
	now := start

	fire := func(id uint64) {
		r := reads[id]
		if r.segment == 3 {
			fmt.Printf("%v: read %d gives up\n", now.Sub(r.sent), id)
			delete(reads, id)
			return
		}
		r.segment++
		fmt.Printf("%v: read %d re-sent\n", now.Sub(r.sent), id)
		// Segment k lasts k·x from now.
		r.timer, err = w.Schedule(now.Add(time.Duration(r.segment)*x), id)
		if err != nil {
			panic(err)
		}
	}

	for id := uint64(1); id <= 2; id++ {
		r := &read{sent: now, segment: 1}
		if r.timer, err = w.Schedule(now.Add(x), id); err != nil {
			panic(err)
		}
		reads[id] = r
		now = now.Add(time.Millisecond)
	}
	for now.Before(start.Add(4 * time.Second)) {
		now = now.Add(time.Millisecond)
		w.Advance(now, fire)
		if now.Sub(start) == 700*time.Millisecond {
			fmt.Println("700ms: read 2 answered, cancelled:", w.Cancel(reads[2].timer))
			delete(reads, 2)
		}
	}
	fmt.Println("pending:", w.Len())
	// Output:
	// 500ms: read 1 re-sent
	// 500ms: read 2 re-sent
	// 700ms: read 2 answered, cancelled: true
	// 1.5s: read 1 re-sent
	// 3s: read 1 gives up
	// pending: 0
}

// The engine keeps every time as a time.Duration since its epoch and makes
// that epoch the wheel's Start, so it schedules and advances with the
// Offset methods (offsets since Start) and never builds a time.Time per
// read.
func ExampleWheel_ScheduleOffset() {
	epoch := time.Now()
	w, err := timerwheel.New(timerwheel.Config{Tick: timerwheel.DefaultTick, Start: epoch})
	if err != nil {
		panic(err)
	}
	budget := 3 * time.Second
	sent := 40 * time.Millisecond // when the read went out, since epoch
	h, err := w.ScheduleOffset(sent+budget/3, 7)
	if err != nil {
		panic(err)
	}
	// At or before the deadline: the start of the slot it waits in.
	next, _ := w.NextDeadlineOffset()
	fmt.Println("next deadline by 1.04s:", next <= sent+budget/3)
	fmt.Println("fired by 1s:", w.AdvanceOffset(time.Second, func(uint64) {}))
	fmt.Println("fired by 1.04s:", w.AdvanceOffset(1040*time.Millisecond, func(id uint64) { fmt.Println("  timer", id) }))
	fmt.Println("cancel after fire:", w.Cancel(h))
	// Output:
	// next deadline by 1.04s: true
	// fired by 1s: 0
	//   timer 7
	// fired by 1.04s: 1
	// cancel after fire: false
}
