package retry_test

// The storm guard (SPEC R19, §7 "R19 — the guard counts load, not calls").

import (
	"errors"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/wire"
)

// TestStormGuardCountsLoadNotCalls: the input. 1,000 Sends refused
// with ErrNoProxy (every proxy unavailable) and 1,000 refused with
// ErrTooManyRequests (the zone's bound on requests without a context
// reached) deposit nothing; then 50 reads reach silent proxies, each asking
// for 2 re-sends (MaxCnt=2) within one window. The guard (ratio 0.4, no
// floor) grants 0.4 × 50 = 20 re-sends — the model of B4 over the reads
// that reached a proxy — and refuses the other 30 reads their first
// re-send (a refusal stops a read's re-sends for good); the 20 that got one
// are refused their second. Before round 3 the refused Sends counted as
// reads, and all 100 re-sends were granted.
func TestStormGuardCountsLoadNotCalls(t *testing.T) {
	f := newFixtureWith(t, hostProxies("a", "b", "c"), confWith(2, "-7953"), retry.Config{
		RetryBudget: budget.Config{Ratio: 0.4, MinRetriesPerSecond: budget.NoFloor}, MaxWaitingPerZone: 1,
	})
	f.tr.SetLog(false)
	for _, p := range f.px {
		f.tr.SetAvailable(p, false)
	}
	read := retry.Request{Command: wire.CmdGet, Key: []byte("k")}
	for range 1000 {
		if _, err := f.c.Send(testZone, &read); !errors.Is(err, retry.ErrNoProxy) {
			t.Fatalf("Send with every proxy down: %v", err)
		}
	}
	for _, p := range f.px {
		f.tr.SetAvailable(p, true)
	}
	// One write holds the zone's only unit for requests without a context;
	// reads with retry off for their class then find the bound reached.
	f.send(retry.Request{Command: wire.CmdInsert, Key: []byte("w"), Value: []byte("v")})
	_ = f.c.SetReadRetryTimeout(0, 6000*ms)
	for range 1000 {
		if _, err := f.c.Send(testZone, &read); !errors.Is(err, retry.ErrTooManyRequests) {
			t.Fatalf("Send over MaxWaitingPerZone: %v", err)
		}
	}
	_ = f.c.SetReadRetryTimeout(3000*ms, 6000*ms)
	for range 50 {
		f.send(read)
	}
	f.step(3100*ms, f.clock.Now())
	st := f.stats()
	if st.RetriesTimeout != 20 || st.RetriesRefused != 50 {
		t.Fatalf("re-sends granted %d, refused %d; want 20 (0.4 × 50 reads that reached a proxy), 50", st.RetriesTimeout, st.RetriesRefused)
	}
	if st.ReadsSent != 50 || st.Exhausted != 50 {
		t.Fatalf("reads sent %d, exhausted %d; want 50, 50", st.ReadsSent, st.Exhausted)
	}
}
