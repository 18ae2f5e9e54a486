package retry_test

import (
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// TestFirstTimerBeforeHandle: a read's first timer fires while its sender
// is stalled between scheduling it and publishing the handle. The poller
// must leave the context to the sender — no re-send before the first
// attempt is even out, no final, nothing freed under the sender's write
// (the use the race detector found in TestR20AbandonedResponsesExact) — and
// the read then keeps the seed's schedule (SPEC R6, R14): budget 3 s, n = 2,
// x = 500 ms; the sender stalls until 600 ms, so the first re-send goes out
// at the first poll after Send returns, the second at 3x = 1500 ms, and
// -19219 comes at exactly T = 3000 ms, once, after 3 attempts.
func TestFirstTimerBeforeHandle(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	start := f.clock.Now()
	var during []got
	sentDuring := -1
	retry.SetAfterFirstSchedule(func() {
		f.clock.Add(600 * time.Millisecond)
		during = f.poll()
		sentDuring = len(f.tr.Sent())
	})
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 7})
	retry.SetAfterFirstSchedule(nil)
	if sentDuring != 0 || len(during) != 0 {
		t.Fatalf("while the sender stalled: %d frames sent, finals %+v; want none (the first attempt is not out yet)", sentDuring, during)
	}
	if n := len(f.tr.Sent()); n != 1 { // Sent clears its record
		t.Fatalf("%d frames after Send, want the first attempt", n)
	}
	finals := f.step(3*time.Second, start)
	if n := len(f.tr.Sent()); n != 2 {
		t.Fatalf("%d re-sends, want 2; finals %+v", n, finals)
	}
	if len(finals) != 1 || finals[0].result != retry.ResultReadRetryTimeout || finals[0].attempts != 3 || finals[0].asyncID != 7 {
		t.Fatalf("finals %+v: want one -19219 after 3 attempts", finals)
	}
	if at := finals[0].at; at != 3000*time.Millisecond {
		t.Fatalf("-19219 at %v, want at T = 3000ms", at)
	}
	if st := f.stats(); st.Contexts != 0 {
		t.Fatalf("%d contexts left", st.Contexts)
	}
}
