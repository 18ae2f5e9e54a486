package retry_test

// The storm guard (SPEC R19, §7 "R19 — the guard counts load, not calls").

import (
	"errors"
	"fmt"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/retrytest"
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

// stormRun sends reads at 2000/s for 5 s of fake time (a poll every 1 ms)
// to four hosts whose handlers serve or stay silent, budgets 300/600 ms,
// ReadRetryMaxCnt=2, and returns the attempts sent per read, the share of
// reads answered OK and the zone's stats once every read has ended.
func stormRun(t *testing.T, cfg retry.Config, dark int) (attemptsPerRead, okShare float64, st retry.Stats) {
	t.Helper()
	clock := newFakeClock()
	tr := retrytest.NewTransport()
	px := hostProxies("h0", "h1", "h2", "h3")
	for i, p := range px {
		if i >= dark {
			tr.SetHandler(p, retrytest.Serve(retrytest.Data{}, 0))
		}
	}
	cfg.Transport, cfg.Clock, cfg.Logger, cfg.Poller = tr, clock.Now, quiet, retry.PollHand
	c, err := retry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(300*ms, 600*ms)
	if err := c.ApplyRoute(testZone, px, confWith(2, "-7953")); err != nil {
		t.Fatal(err)
	}
	const reads = 10_000
	ok, finals := 0, 0
	poll := func() {
		for {
			rsp, more := c.RecvResponse()
			if !more {
				return
			}
			if !rsp.HaveMore() {
				finals++
				if rsp.Result() == retry.ResultOK {
					ok++
				}
			}
		}
	}
	for i := range reads {
		if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "k%d", i)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			clock.Add(ms)
			poll()
		}
	}
	for finals < reads {
		clock.Add(ms)
		poll()
	}
	sends := 0
	for _, p := range px {
		sends += tr.Sends(p)
	}
	st, _ = c.Stats(testZone)
	return float64(sends) / reads, float64(ok) / reads, st
}

// TestR19StormGuard: each zone's retry budget (SPEC R19, B4 semantics) holds
// the all-proxies-down case to at most 1.5 attempts per read (1 + 2 retries
// = 3 without it) with the defaults, and keeps the single-dark-host case
// whole: one host of four silent, at least 99.9% of reads still succeed.
// A refused re-send is not sent and is counted; the read waits for its
// attempts already out until its budget ends (-19219 at the budget, not
// earlier). With NoRetryBudget every retry goes out.
func TestR19StormGuard(t *testing.T) {
	att, _, st := stormRun(t, retry.Config{}, 4)
	t.Logf("all down: %.3f attempts per read, %+v", att, st)
	// The model: retries granted ≤ 0.4 × reads in the window + the floor
	// (10/s × 10 s = 100), so ≤ 1 + 0.4 + 100/10,000 attempts per read.
	if att > 1.5 || att < 1.3 {
		t.Fatalf("all proxies down: %.3f attempts per read, want within [1.3, 1.5]", att)
	}
	granted := st.RetriesTimeout
	if st.RetriesRefused == 0 || granted+st.RetriesRefused > 2*10_000 || float64(granted) > 0.4*10_000+100+1 {
		t.Fatalf("stats %+v", st)
	}
	if st.Exhausted != 10_000 || st.Contexts != 0 {
		t.Fatalf("every read must end with -19219 once: %+v", st)
	}

	att, okShare, st := stormRun(t, retry.Config{}, 1)
	if okShare < 0.999 {
		t.Fatalf("one host of four dark: %.4f of reads ok, want ≥ 0.999 (stats %+v)", okShare, st)
	}
	if att > 1.3 {
		t.Fatalf("one host dark: %.3f attempts per read", att)
	}

	att, _, st = stormRun(t, retry.Config{NoRetryBudget: true}, 4)
	if att != 3 || st.RetriesRefused != 0 {
		t.Fatalf("storm guard off: %.3f attempts per read, %d refused; want 3, 0", att, st.RetriesRefused)
	}
	if _, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), RetryBudget: budget.Config{Ratio: -1}}); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("bad budget config: %v", err)
	}
}

// TestR19RefusedReadWaitsForItsBudget: with a budget that grants nothing
// (no floor, ratio 0.1 and a single read), the read's re-send is refused:
// nothing more is sent and it ends at its budget's end — 3000 ms for a
// simple read, not at the first segment's end.
func TestR19RefusedReadWaitsForItsBudget(t *testing.T) {
	f := newFixtureWith(t, hostProxies("a", "b"), seedConf, grantNone)
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	f.tr.Sent()
	gs := f.runSchedule(start, []step{
		{at: 2999 * ms},
		{at: 3000 * ms, want: "-19219@3s"},
		{at: 3100 * ms},
	})
	if gs[0].attempts != 1 {
		t.Fatalf("%d attempts, want 1", gs[0].attempts)
	}
	if st := f.stats(); st.RetriesRefused != 1 || st.RetriesTimeout != 0 {
		t.Fatalf("refused %d, timeout re-sends %d; want 1, 0", st.RetriesRefused, st.RetriesTimeout)
	}
	f.drained()
}
