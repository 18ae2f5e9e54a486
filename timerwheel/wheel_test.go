package timerwheel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newWheel(t testing.TB) *Wheel {
	t.Helper()
	w, err := New(Config{Tick: time.Millisecond, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// limited returns a wheel for c whose shards hold at most perShard timers
// each (a multiple of 64) instead of MaxCapacity, so that a test reaches
// ErrFull without 2^26 timers; 0 leaves the wheel as New made it. It sets
// the one number grow reads, nothing else: the wheel keeps its one path.
func limited(t testing.TB, c Config, perShard int) *Wheel {
	t.Helper()
	if perShard%blockSize != 0 {
		t.Fatalf("limit %d is not a multiple of %d", perShard, blockSize)
	}
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.shards {
		if perShard > 0 {
			w.shards[i].capacity = uint32(perShard)
		}
	}
	return w
}

// laneSlack is how many timers lanes may hold claimed but unused: 64 per
// lane (see ErrFull).
func laneSlack(w *Wheel) int {
	n := 0
	for i := range w.shards {
		n += blockSize * len(w.shards[i].lanes)
	}
	return n
}

func mustSchedule(t testing.TB, w *Wheel, deadline time.Time, id uint64) Handle {
	t.Helper()
	h, err := w.Schedule(deadline, id)
	if err != nil {
		t.Fatalf("Schedule(%v, %d): %v", deadline.Sub(w.Start()), id, err)
	}
	if h == 0 {
		t.Fatal("Schedule returned the zero Handle")
	}
	return h
}

// collectIDs returns a fire callback that appends to *ids.
func collectIDs(ids *[]uint64) func(uint64) {
	return func(id uint64) { *ids = append(*ids, id) }
}

func TestConfigErrors(t *testing.T) {
	bad := []Config{
		{Tick: 0},
		{Tick: -time.Millisecond},
		{Tick: time.Millisecond, Shards: 3},
		{Tick: time.Millisecond, Shards: -1},
		{Tick: time.Millisecond, Shards: 2 * MaxShards},
	}
	for _, c := range bad {
		if w, err := New(c); !errors.Is(err, ErrInvalidConfig) || w != nil {
			t.Errorf("New(%+v) = %v, %v; want nil, ErrInvalidConfig", c, w, err)
		}
	}
	if _, err := NewDriver(nil, time.Millisecond, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewDriver(nil wheel): %v", err)
	}
	w := newWheel(t)
	if _, err := NewDriver(w, 0, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewDriver(interval 0): %v", err)
	}
	w, err := New(Config{Tick: time.Millisecond, Shards: MaxShards})
	if err != nil || len(w.shards) != MaxShards {
		t.Fatalf("most shards: %v", err)
	}
	if w.Tick() != time.Millisecond || !w.Start().IsZero() {
		t.Fatalf("Tick %v Start %v", w.Tick(), w.Start())
	}
}

// TestFull: Schedule fails with ErrFull when the shards' slabs are full,
// changes nothing, and the wheel fills as far again once its timers are
// gone; a sharded wheel spills into other shards so ErrFull means the
// whole wheel is full. Timers claimed by lanes may make ErrFull come
// early, by at most 64 a lane (the ErrFull contract); with one P and one
// shard the one lane hands its block back before the locked path gives
// up, so ErrFull comes exactly at the limit.
func TestFull(t *testing.T) {
	const perShard = 4096 + 2*blockSize // chunk 0 (64), one full chunk, one block of the next
	for _, c := range []struct {
		procs, shards int
		exact         bool
	}{{1, 1, true}, {0, 1, false}, {0, 4, false}, {1, 4, false}} {
		t.Run(fmt.Sprintf("procs%d/shards%d", c.procs, c.shards), func(t *testing.T) {
			if c.procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			}
			w := limited(t, Config{Tick: time.Millisecond, Start: t0, Shards: c.shards}, perShard)
			limit, slack := perShard*c.shards, laneSlack(w)
			for round := range 2 {
				at := t0.Add(time.Duration(round+1) * time.Second)
				n := 0
				for ; n <= limit; n++ {
					_, err := w.Schedule(at, uint64(n)*8)
					if errors.Is(err, ErrFull) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case n > limit:
					t.Fatalf("round %d: %d timers pending, past the limit %d, and no ErrFull", round, n, limit)
				case c.exact && n != limit:
					t.Fatalf("round %d: ErrFull at %d pending, want exactly %d", round, n, limit)
				case n < limit-slack:
					t.Fatalf("round %d: ErrFull at %d pending, more than %d (64 a lane) before the limit %d", round, n, slack, limit)
				}
				if w.Len() != n {
					t.Fatalf("round %d: Len %d after a failed Schedule, want %d", round, w.Len(), n)
				}
				seen := make([]bool, n)
				fired := w.Advance(at, func(id uint64) {
					if id%8 != 0 || id/8 >= uint64(n) || seen[id/8] {
						t.Fatalf("round %d: fired id %d: not scheduled or twice", round, id)
					}
					seen[id/8] = true
				})
				if fired != n || w.Len() != 0 {
					t.Fatalf("round %d: Advance fired %d, want %d; Len %d", round, fired, n, w.Len())
				}
			}
		})
	}
}

func TestDeadlineRange(t *testing.T) {
	w := newWheel(t)
	far := t0.Add(math.MaxInt64).Add(time.Hour)
	if _, err := w.Schedule(far, 1); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Schedule 292+ years out: %v, want ErrDeadline", err)
	}
	h := mustSchedule(t, w, t0.Add(time.Millisecond), 1)
	if w.Reset(h, far) {
		t.Fatal("Reset to an out-of-range deadline = true")
	}
	var ids []uint64
	if w.Advance(t0.Add(time.Millisecond), collectIDs(&ids)); len(ids) != 1 {
		t.Fatalf("the timer whose Reset failed did not fire at its old deadline: %v", ids)
	}
}

// TestNeverEarlyAtMostOneTickLate uses a deadline inside a tick: it is
// rounded up, so it fires neither before the deadline nor later than the
// first Advance one tick past it.
func TestNeverEarlyAtMostOneTickLate(t *testing.T) {
	w := newWheel(t)
	deadline := t0.Add(10*time.Millisecond + 300*time.Microsecond)
	mustSchedule(t, w, deadline, 7)
	for _, now := range []time.Duration{10 * time.Millisecond, 10*time.Millisecond + 299*time.Microsecond, 10*time.Millisecond + 999*time.Microsecond} {
		if n := w.Advance(t0.Add(now), func(uint64) {}); n != 0 {
			t.Fatalf("fired early at %v (deadline 10.3ms)", now)
		}
	}
	if n := w.Advance(t0.Add(11*time.Millisecond), func(uint64) {}); n != 1 {
		t.Fatalf("not fired at 11ms, one tick after the 10.3ms deadline")
	}
}

// TestLevelBoundaries: deadlines exactly on a level or wheel boundary and
// one tick either side, from a current tick at and off a boundary, fire in
// exactly their tick.
func TestLevelBoundaries(t *testing.T) {
	for _, startTick := range []int64{0, 1, 63, 64, 4095, 4096, 1<<farBits - 1, 5 << 18} {
		w, err := New(Config{Tick: time.Nanosecond, Start: t0})
		if err != nil {
			t.Fatal(err)
		}
		w.Advance(t0.Add(time.Duration(startTick)), nil)
		want := map[uint64]int64{}
		id := uint64(0)
		for level := 1; level < levels; level++ { // up to 2^60 ticks
			b := int64(1) << (level * slotBits)
			for _, d := range []int64{b - 1, b, b + 1, (startTick/b+1)*b - 1, (startTick/b + 1) * b, (startTick/b+1)*b + 1} {
				if d <= startTick {
					continue
				}
				id++
				want[id] = d
				mustSchedule(t, w, t0.Add(time.Duration(d)), id)
			}
		}
		// Advance one tick before each deadline, then onto it.
		for len(want) > 0 {
			next := int64(math.MaxInt64)
			for _, d := range want {
				next = min(next, d)
			}
			w.Advance(t0.Add(time.Duration(next-1)), func(id uint64) {
				t.Fatalf("start %d: id %d (deadline %d) fired at %d", startTick, id, want[id], next-1)
			})
			w.Advance(t0.Add(time.Duration(next)), func(id uint64) {
				if want[id] != next {
					t.Fatalf("start %d: id %d (deadline %d) fired at %d", startTick, id, want[id], next)
				}
				delete(want, id)
			})
			for id, d := range want {
				if d == next {
					t.Fatalf("start %d: id %d not fired in its tick %d", startTick, id, d)
				}
			}
		}
	}
}

// TestIdleThenShortTimer: after hours without timers a 100 ms timer fires
// at 100 ms, not earlier and not a level's span later.
func TestIdleThenShortTimer(t *testing.T) {
	w := newWheel(t)
	now := t0.Add(5*time.Hour + 17*time.Millisecond)
	if n := w.Advance(now, nil); n != 0 {
		t.Fatalf("idle Advance fired %d", n)
	}
	mustSchedule(t, w, now.Add(100*time.Millisecond), 1)
	next, ok := w.NextDeadline()
	if !ok || next.After(now.Add(100*time.Millisecond)) {
		t.Fatalf("NextDeadline %v %v", next.Sub(now), ok)
	}
	if n := w.Advance(now.Add(99*time.Millisecond), nil); n != 0 {
		t.Fatal("100 ms timer fired at 99 ms")
	}
	if n := w.Advance(now.Add(100*time.Millisecond), nil); n != 1 {
		t.Fatal("100 ms timer not fired at 100 ms")
	}
	if _, ok := w.NextDeadline(); ok {
		t.Fatal("NextDeadline reports a timer on an empty wheel")
	}
}

// TestJumpIsProportionalToTimers: one Advance over about 290 years of
// 1 ns ticks (2^63 ticks, every level of the wheel) fires every timer, in
// order. A wheel that stepped through ticks, or even through the slots of
// its upper levels, would not finish; this one visits only non-empty slots.
func TestJumpIsProportionalToTimers(t *testing.T) {
	w, err := New(Config{Tick: time.Nanosecond, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(10_000) {
		d := time.Duration((i*0x9E3779B97F4A7C15)>>2) % (290 * 365 * 24 * time.Hour)
		mustSchedule(t, w, t0.Add(d), uint64(d))
	}
	last := uint64(0)
	n := w.Advance(t0.Add(291*365*24*time.Hour), func(id uint64) {
		if id < last {
			t.Fatalf("deadline %d fired after %d", id, last)
		}
		last = id
	})
	if n != 10_000 || w.Len() != 0 {
		t.Fatalf("fired %d, %d left", n, w.Len())
	}
}

// TestFarDeadline: a deadline beyond the sixth level (2^36 ticks, 795 days
// at 1 ms) sits on the upper levels and still fires in exactly its tick.
func TestFarDeadline(t *testing.T) {
	w := newWheel(t)
	far := t0.Add(time.Duration(3<<farBits+12345) * time.Millisecond) // about 6.5 years
	mustSchedule(t, w, far, 9)
	mustSchedule(t, w, t0.Add(time.Second), 1)
	var ids []uint64
	w.Advance(t0.Add(time.Second), collectIDs(&ids))
	w.Advance(far.Add(-time.Millisecond), collectIDs(&ids))
	if len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("fired %v before the far deadline", ids)
	}
	next, ok := w.NextDeadline()
	if !ok || next.After(far) {
		t.Fatalf("NextDeadline %v after the pending deadline %v", next, far)
	}
	w.Advance(far, collectIDs(&ids))
	if len(ids) != 2 || ids[1] != 9 {
		t.Fatalf("far timer not fired on time: %v", ids)
	}
}

// TestPastDeadline: a deadline at or before the last Advance fires in the
// next Advance, even one that does not move time forward.
func TestPastDeadline(t *testing.T) {
	w := newWheel(t)
	now := t0.Add(time.Second)
	w.Advance(now, nil)
	mustSchedule(t, w, t0.Add(-time.Hour), 1) // before Start
	mustSchedule(t, w, now.Add(-time.Millisecond), 2)
	mustSchedule(t, w, now, 3)
	mustSchedule(t, w, now.Add(time.Millisecond), 4)
	var ids []uint64
	if n := w.Advance(now, collectIDs(&ids)); n != 3 {
		t.Fatalf("Advance at the same time fired %v, want the three past-due", ids)
	}
	if n := w.Advance(now.Add(-time.Minute), collectIDs(&ids)); n != 0 {
		t.Fatal("Advance backwards fired a future timer")
	}
	if n := w.Advance(now.Add(time.Millisecond), collectIDs(&ids)); n != 1 || ids[3] != 4 {
		t.Fatalf("fired %v", ids)
	}
}

// TestStaleHandle: a handle to a fired or cancelled timer is a no-op for
// Cancel and Reset even after its node is reused by a new timer.
func TestStaleHandle(t *testing.T) {
	w := newWheel(t) // one node: every Schedule reuses it
	h1 := mustSchedule(t, w, t0.Add(time.Millisecond), 1)
	if !w.Cancel(h1) || w.Cancel(h1) {
		t.Fatal("Cancel twice: want true then false")
	}
	h2 := mustSchedule(t, w, t0.Add(2*time.Millisecond), 2)
	if h2 == h1 {
		t.Fatal("a reused node gave the same Handle")
	}
	if w.Cancel(h1) || w.Reset(h1, t0.Add(time.Hour)) {
		t.Fatal("stale handle acted on the node's new timer")
	}
	var ids []uint64
	w.Advance(t0.Add(2*time.Millisecond), collectIDs(&ids))
	if len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("fired %v, want [2]", ids)
	}
	if w.Cancel(h2) || w.Reset(h2, t0.Add(time.Hour)) {
		t.Fatal("Cancel/Reset of a fired timer = true")
	}
	for _, h := range []Handle{0, ^Handle(0), makeHandle(1, 0, 5), makeHandle(1, 3, 0), h2 + 1<<genShift} {
		if w.Cancel(h) || w.Reset(h, t0) {
			t.Fatalf("forged handle %#x accepted", h)
		}
	}
	if w.Len() != 0 {
		t.Fatalf("Len %d", w.Len())
	}
}

func TestReset(t *testing.T) {
	w := newWheel(t)
	h := mustSchedule(t, w, t0.Add(time.Hour), 5)
	if !w.Reset(h, t0.Add(3*time.Millisecond)) {
		t.Fatal("Reset of a pending timer = false")
	}
	var ids []uint64
	w.Advance(t0.Add(2*time.Millisecond), collectIDs(&ids))
	if !w.Reset(h, t0.Add(10*time.Millisecond)) { // later again
		t.Fatal("second Reset = false")
	}
	w.Advance(t0.Add(9*time.Millisecond), collectIDs(&ids))
	if len(ids) != 0 {
		t.Fatalf("fired before the reset deadline: %v", ids)
	}
	w.Advance(t0.Add(10*time.Millisecond), collectIDs(&ids))
	if len(ids) != 1 || ids[0] != 5 {
		t.Fatalf("fired %v", ids)
	}
}

// TestSameTick: 500,000 timers due in one tick all fire once, in one
// Advance, and the slab is reused afterwards without growing.
func TestSameTick(t *testing.T) {
	w := newWheel(t)
	at := t0.Add(42 * time.Millisecond)
	for i := range uint64(sameTickCount) {
		mustSchedule(t, w, at, i)
	}
	seen := make([]bool, sameTickCount)
	n := w.Advance(at, func(id uint64) {
		if seen[id] {
			t.Fatalf("id %d fired twice", id)
		}
		seen[id] = true
	})
	if n != sameTickCount || w.Len() != 0 {
		t.Fatalf("fired %d of %d, %d left", n, sameTickCount, w.Len())
	}
	mustSchedule(t, w, at.Add(time.Millisecond), 1)
}

// TestSelfReschedule: a callback that schedules its own next deadline one
// tick later, a million times in one Advance, fires once per tick in order;
// one that reschedules itself at the tick being fired waits for the next
// Advance instead of spinning.
func TestSelfReschedule(t *testing.T) {
	w := newWheel(t)
	next := int64(1)
	mustSchedule(t, w, t0.Add(time.Millisecond), 1)
	n := w.Advance(t0.Add(selfResched*time.Millisecond), func(id uint64) {
		next++
		if next <= selfResched {
			if _, err := w.Schedule(t0.Add(time.Duration(next)*time.Millisecond), id); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n != selfResched || w.Len() != 0 {
		t.Fatalf("fired %d, want %d; %d left", n, selfResched, w.Len())
	}

	now := t0.Add(selfResched * time.Millisecond)
	mustSchedule(t, w, now, 2)
	for round := 1; round <= 3; round++ {
		n := w.Advance(now, func(id uint64) {
			if _, err := w.Schedule(now, id); err != nil {
				t.Fatal(err)
			}
		})
		if n != 1 {
			t.Fatalf("round %d: Advance fired %d, want exactly the one past-due timer", round, n)
		}
	}
}

// TestFireMayUseWheel: fire can Schedule, Reset and Cancel, and a nested
// Advance returns 0 instead of deadlocking.
func TestFireMayUseWheel(t *testing.T) {
	for _, cfg := range []struct{ limit, shards int }{{64, 1}, {64, 8}, {0, 1}, {0, 8}} {
		shards := cfg.shards
		w := limited(t, Config{Tick: time.Millisecond, Start: t0, Shards: shards}, cfg.limit)
		a := mustSchedule(t, w, t0.Add(5*time.Millisecond), 1)
		b := mustSchedule(t, w, t0.Add(5*time.Millisecond), 2)
		c := mustSchedule(t, w, t0.Add(6*time.Millisecond), 3)
		d := mustSchedule(t, w, t0.Add(50*time.Millisecond), 4)
		var got []uint64
		first := true
		w.Advance(t0.Add(10*time.Millisecond), func(id uint64) {
			got = append(got, id)
			if id == 1 || id == 2 {
				if w.Advance(t0.Add(time.Hour), nil) != 0 {
					t.Fatal("nested Advance ran")
				}
				// The timer being fired counts as fired.
				if own := map[uint64]Handle{1: a, 2: b}[id]; w.Cancel(own) || w.Reset(own, t0.Add(time.Hour)) {
					t.Fatal("Cancel or Reset of the timer being fired = true")
				}
				if w.Cancel(c) != first {
					t.Fatal("Cancel of a later timer from fire: want true once")
				}
				if first {
					w.Reset(d, t0.Add(7*time.Millisecond))
					mustSchedule(t, w, t0.Add(8*time.Millisecond), 5)
				}
				first = false
			}
		})
		if len(got) != 4 || got[2] != 4 || got[3] != 5 {
			t.Fatalf("limit %d shards %d: fired %v, want 1 and 2 then 4 (reset to 7ms) then 5 (8ms)", cfg.limit, shards, got)
		}
	}
}

// TestCancelRacesAdvance: Cancel from several goroutines while Advance
// fires the same timers: every timer has exactly one outcome.
func TestCancelRacesAdvance(t *testing.T) {
	const n = 20_000
	for _, shards := range []int{1, 4} {
		w, err := New(Config{Tick: time.Millisecond, Start: t0, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		hs := make([]Handle, n)
		for i := range hs {
			hs[i] = mustSchedule(t, w, t0.Add(time.Duration(1+i%200)*time.Millisecond), uint64(i))
		}
		var fired, cancelled [n]atomic.Int32
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += 3 {
					if w.Cancel(hs[i]) {
						cancelled[i].Add(1)
					}
				}
			}()
		}
		for ms := 1; ms <= 200; ms++ {
			w.Advance(t0.Add(time.Duration(ms)*time.Millisecond), func(id uint64) { fired[id].Add(1) })
		}
		wg.Wait()
		for i := range n {
			if f, cn := fired[i].Load(), cancelled[i].Load(); f+cn != 1 {
				t.Fatalf("shards %d: timer %d: fired %d times, cancelled %d times", shards, i, f, cn)
			}
		}
		if w.Len() != 0 {
			t.Fatalf("Len %d", w.Len())
		}
	}
}

// TestConcurrentUse: schedulers, cancellers and resetters on many
// goroutines while one poller advances; for the race detector and the
// exactly-once bookkeeping.
func TestConcurrentUse(t *testing.T) {
	const perG, goroutines = 5000, 4
	for _, shards := range []int{1, 4} {
		w, err := New(Config{Tick: time.Millisecond, Start: t0, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		var clock atomic.Int64 // ms since t0, moved by the poller
		var outcome [perG * goroutines]atomic.Int32
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range perG {
					id := uint64(g*perG + k)
					now := t0.Add(time.Duration(clock.Load()) * time.Millisecond)
					h, err := w.Schedule(now.Add(time.Duration(k%50)*time.Millisecond), id)
					if err != nil {
						t.Error(err)
						return
					}
					switch k % 3 {
					case 0:
						if w.Cancel(h) {
							outcome[id].Add(1)
						}
					case 1:
						w.Reset(h, now.Add(time.Duration(k%7)*time.Millisecond))
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		fire := func(id uint64) { outcome[id].Add(1) }
	poll:
		for {
			select {
			case <-done:
				break poll
			default:
				w.Advance(t0.Add(time.Duration(clock.Add(1))*time.Millisecond), fire)
			}
		}
		w.Advance(t0.Add(time.Duration(clock.Add(100))*time.Millisecond), fire)
		for i := range outcome {
			if o := outcome[i].Load(); o != 1 {
				t.Fatalf("shards %d: timer %d had %d outcomes", shards, i, o)
			}
		}
	}
}

// TestZeroAllocs: Schedule, Reset, Cancel and Advance allocate nothing at
// steady state (once the slab chunk exists).
func TestZeroAllocs(t *testing.T) {
	for _, shards := range []int{1, 4} {
		w, err := New(Config{Tick: time.Millisecond, Start: t0, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(512) {
			mustSchedule(t, w, t0.Add(time.Duration(i)*time.Second), i)
		}
		now := t0
		fire := func(uint64) {}
		allocs := testing.AllocsPerRun(1000, func() {
			h, err := w.Schedule(now.Add(30*time.Millisecond), 1)
			if err != nil {
				t.Fatal(err)
			}
			w.Reset(h, now.Add(40*time.Millisecond))
			w.Cancel(h)
			if _, err := w.Schedule(now.Add(2*time.Millisecond), 2); err != nil {
				t.Fatal(err)
			}
			h, err = w.ScheduleOffset(now.Sub(t0)+time.Second, 3)
			if err != nil {
				t.Fatal(err)
			}
			w.Cancel(h)
			now = now.Add(time.Millisecond)
			w.Advance(now, fire)
			w.NextDeadline()
		})
		if allocs != 0 {
			t.Fatalf("shards %d: %v allocations per Schedule+Reset+Cancel+Advance", shards, allocs)
		}
	}
}

// TestDriver: the driver fires timers in real time and Stop waits for its
// goroutine (goleak checks it is gone).
func TestDriver(t *testing.T) {
	defer goleak.VerifyNone(t)
	start := time.Now()
	w, err := New(Config{Tick: time.Millisecond, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	fired := make(chan uint64, 4)
	d, err := NewDriver(w, time.Millisecond, func(id uint64) { fired <- id })
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Millisecond)
	mustSchedule(t, w, deadline, 77)
	select {
	case id := <-fired:
		if id != 77 {
			t.Fatalf("fired %d", id)
		}
		if time.Now().Before(deadline) {
			t.Fatal("driver fired before the deadline")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("driver did not fire within 10 s")
	}
	d.Stop()
	d.Stop() // idempotent
	mustSchedule(t, w, time.Now(), 78)
	time.Sleep(5 * time.Millisecond)
	if w.Len() != 1 {
		t.Fatal("a stopped driver still advanced the wheel")
	}
}

// TestShardedNextDeadline: a shard whose clock lags the last Advance (the
// merge does not spend a lock on it) still gives a NextDeadline no earlier
// than that Advance, and its timers keep their order and tick.
func TestShardedNextDeadline(t *testing.T) {
	w, err := New(Config{Tick: time.Millisecond, Start: t0, Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	for id := range uint64(16) {
		mustSchedule(t, w, t0.Add(time.Duration(id+1)*time.Millisecond), id)
	}
	w.Advance(t0.Add(time.Hour), nil)
	mustSchedule(t, w, t0.Add(time.Minute), 100) // past: due in the next Advance
	mustSchedule(t, w, t0.Add(time.Hour+5*time.Millisecond), 101)
	next, ok := w.NextDeadline()
	if !ok || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("NextDeadline = %v, %v; want the last Advance (1h), a timer is past due", next.Sub(t0), ok)
	}
	var ids []uint64
	w.Advance(t0.Add(time.Hour), collectIDs(&ids))
	if len(ids) != 1 || ids[0] != 100 {
		t.Fatalf("fired %v, want [100]", ids)
	}
	next, ok = w.NextDeadline()
	if !ok || next.Before(t0.Add(time.Hour)) || next.After(t0.Add(time.Hour+5*time.Millisecond)) {
		t.Fatalf("NextDeadline = %v, want in [1h, 1h5ms]", next.Sub(t0))
	}
	w.Advance(t0.Add(time.Hour+4*time.Millisecond), collectIDs(&ids))
	w.Advance(t0.Add(time.Hour+5*time.Millisecond), collectIDs(&ids))
	if len(ids) != 2 || ids[1] != 101 {
		t.Fatalf("fired %v, want [100 101]", ids)
	}
}

// TestFarCancelAndClockBack: cancel a far timer, let time pass it, file
// another far one, then call Advance with a time before the last: the
// wheel's clock never goes back, so a deadline already passed stays past
// due, and everything fires in its tick. (This caught a stale lower bound
// in an earlier design that parked far timers on a list.)
func TestFarCancelAndClockBack(t *testing.T) {
	w, err := New(Config{Tick: time.Nanosecond, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	turn := time.Duration(1) << farBits
	h := mustSchedule(t, w, t0.Add(turn+5), 1)
	if !w.Cancel(h) {
		t.Fatal("Cancel = false")
	}
	now := t0.Add(3*turn + 7)
	w.Advance(now, nil)
	mustSchedule(t, w, now.Add(2*turn), 3)
	var ids []uint64
	// A time before the last Advance must not turn the wheel back.
	w.Advance(now.Add(-2*turn), collectIDs(&ids))
	mustSchedule(t, w, now.Add(-2), 2) // before the wheel's clock: past due
	w.Advance(now.Add(-2*turn), collectIDs(&ids))
	if len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("fired %v, want the past-due [2]", ids)
	}
	w.Advance(now.Add(2*turn-1), collectIDs(&ids))
	if len(ids) != 1 {
		t.Fatalf("fired %v early", ids)
	}
	w.Advance(now.Add(2*turn), collectIDs(&ids))
	if len(ids) != 2 || ids[1] != 3 {
		t.Fatalf("fired %v, want [2 3]", ids)
	}
}

// TestGenerationWrap: after 2^31 reuses of a timer its generation wraps
// to 0, and Schedule still never returns the zero Handle.
func TestGenerationWrap(t *testing.T) {
	w := newWheel(t)
	h := mustSchedule(t, w, t0.Add(time.Second), 1)
	b := w.shards[0].blocks[0]
	b.links[h.index()].state = genMask<<1 | stWheel // as if reused 2^31-1 times
	if !w.Cancel(makeHandle(genMask, h.shard(), h.index())) {
		t.Fatal("Cancel = false")
	}
	h2 := mustSchedule(t, w, t0.Add(time.Second), 2)
	if h2.gen() != 0 || h2 == 0 {
		t.Fatalf("after the wrap: handle %#x, generation %d; want generation 0, handle not 0", h2, h2.gen())
	}
	if !w.Cancel(h2) {
		t.Fatal("Cancel after the wrap = false")
	}
}

// TestFirePanics: a panic in fire propagates out of Advance; the wheel
// stays usable and the timers not yet taken out still fire.
func TestFirePanics(t *testing.T) {
	w := newWheel(t)
	mustSchedule(t, w, t0.Add(time.Millisecond), 1)
	mustSchedule(t, w, t0.Add(2*time.Millisecond), 2)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		w.Advance(t0.Add(2*time.Millisecond), func(id uint64) {
			if id == 1 {
				panic("boom")
			}
		})
	}()
	var ids []uint64
	if n := w.Advance(t0.Add(2*time.Millisecond), collectIDs(&ids)); n != 1 || ids[0] != 2 {
		t.Fatalf("after the panic fired %v", ids)
	}
}

// TestFreeSet: take always returns the lowest free index, across the
// levels of the bitmap hierarchy.
func TestFreeSet(t *testing.T) {
	for _, n := range []uint32{1, 63, 64, 65, 4096, 4097, 300_000} {
		var f freeSet
		f.init(n)
		free := map[uint32]bool{}
		r := rand.New(rand.NewPCG(uint64(n), 0))
		for range 2000 {
			if r.IntN(2) == 0 {
				i := r.Uint32N(n)
				if !free[i] {
					free[i] = true
					f.add(i)
				}
				continue
			}
			got, ok := f.take()
			want, wantOK := uint32(math.MaxUint32), false
			for i := range free {
				if i < want {
					want, wantOK = i, true
				}
			}
			if ok != wantOK || (ok && got != want) {
				t.Fatalf("n %d: take = %d, %v; want %d, %v", n, got, ok, want, wantOK)
			}
			delete(free, got)
		}
	}
}

// TestCancelBetweenBatches: a slot larger than Advance's batch is handed
// out in several batches; fire may cancel the timers still waiting in it
// (and past-due ones on the due list), and each timer has exactly one
// outcome.
func TestCancelBetweenBatches(t *testing.T) {
	for _, past := range []bool{false, true} {
		const n = 3*batchSize + 7
		w := newWheel(t)
		at := t0.Add(5 * time.Millisecond)
		if past {
			w.Advance(at, nil)
		}
		hs := make([]Handle, n)
		for i := range hs {
			hs[i] = mustSchedule(t, w, at, uint64(i))
		}
		fired := make([]int, n)
		cancelled := make([]int, n)
		calls := 0
		w.Advance(at, func(id uint64) {
			fired[id]++
			if calls++; calls == batchSize/2 {
				// Half of this batch is still to be called; the next
				// batches are still in the slot.
				for k := range hs {
					if w.Cancel(hs[k]) {
						cancelled[k]++
					}
				}
			}
		})
		total := 0
		for i := range n {
			if fired[i]+cancelled[i] != 1 {
				t.Fatalf("past %v: timer %d fired %d, cancelled %d", past, i, fired[i], cancelled[i])
			}
			total += cancelled[i]
		}
		if total != n-batchSize || w.Len() != 0 {
			t.Fatalf("past %v: %d cancelled from fire, %d left", past, total, w.Len())
		}
	}
}
