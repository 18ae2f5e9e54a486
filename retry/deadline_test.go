package retry_test

// The caller's deadline as the budget (SPEC §7 R20).

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// TestR20DeadlineIsBudget: a Do whose context deadline is 200 ms away, under
// a 3 s budget with n = 2 (x = 500 ms), takes 200 ms as its budget T': it
// re-sends at the ends of the segments cut from T' — x' = 2T'/((n+1)(n+2))
// = 33.3 ms, then 3x' = 100 ms (SPEC R6) — gives up at T' with -19219 and
// leaves no context and no timer behind. Before, it first re-sent at 500 ms
// and kept its context for 3 s.
//
// The fake clock runs an hour ahead of the wall clock, so the context's own
// timer (real time) never fires during the test: only the engine ends the
// read.
func TestR20DeadlineIsBudget(t *testing.T) {
	clock := newFakeClock()
	clock.t = time.Now().Add(time.Hour).Truncate(time.Millisecond)
	f := newFixtureOn(t, clock, hostProxies("a"), seedConf, retry.Config{})
	start := f.clock.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(200*time.Millisecond))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var res retry.Result
		done <- f.c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res)
	}()
	for f.tr.Pending() == 0 && len(f.sentSoFar()) == 0 {
		time.Sleep(time.Millisecond) // the Do goroutine has not sent yet (no fake time passes)
	}
	var resends []time.Duration
	var err error
	var ended time.Duration
	for ended == 0 && f.clock.Now().Sub(start) < 4*time.Second {
		f.clock.Add(time.Millisecond)
		f.poll()
		for _, s := range f.sentSoFar() {
			if s.Request().Attempt() > 0 {
				resends = append(resends, f.clock.Now().Sub(start))
			}
		}
		if f.stats().FinalResults > 0 { // handed to the Do call: it returns now
			err = <-done
			ended = f.clock.Now().Sub(start)
		}
	}
	if ended == 0 {
		cancel()
		t.Fatalf("Do still waiting at 4 s of fake time (err %v after cancel)", <-done)
	}
	if !errors.Is(err, retry.ErrReadRetryTimeout) {
		t.Fatalf("Do: %v, want ErrReadRetryTimeout", err)
	}
	if len(resends) != 2 || resends[0] < 33*time.Millisecond || resends[0] > 35*time.Millisecond ||
		resends[1] < 100*time.Millisecond || resends[1] > 102*time.Millisecond {
		t.Fatalf("re-sends at %v, want about 34 ms and 100 ms (segments of 200 ms)", resends)
	}
	if ended < 200*time.Millisecond || ended > 203*time.Millisecond {
		t.Fatalf("Do returned at %v, want at the 200 ms deadline", ended)
	}
	f.poll() // the next poll releases the delivered context
	if reqs, timers := f.c.InFlight(testZone); reqs != 0 || timers != 0 {
		t.Fatalf("after the deadline: %d requests, %d timers kept", reqs, timers)
	}
	f.drained()
}

// sentSoFar returns the frames sent since the last call (the transport's
// log), safe to call from the test's goroutine while Do runs.
func (f *fixture) sentSoFar() []retrytest.Sent { return f.tr.Sent() }
