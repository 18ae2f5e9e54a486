package retry_test

// When a read ends (SPEC R6, R9, R10, R19 and §7 "R9/R8/R19 — a simple read
// ends at its budget, not before"): timed scenarios on the fake clock,
// written as step tables.

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// grantOne is a storm guard that grants one re-send for a single read and
// refuses the next: ratio 1, no floor (retries + 1 ≤ 1 × reads).
var grantOne = retry.Config{RetryBudget: budget.Config{Ratio: 1, MinRetriesPerSecond: budget.NoFloor}}

// grantNone refuses every re-send of a lone read: 0.1 × 1 read < 1.
var grantNone = retry.Config{RetryBudget: budget.Config{Ratio: 0.1, MinRetriesPerSecond: budget.NoFloor}}

// TestSimpleReadEndsAtItsBudget: the two inputs (SPEC §7
// R9/R8/R19). MaxCnt=2, T=3000 ms, so x=500 ms and the schedule is 500,
// 1500, 3000 ms. Error-code re-sends and storm-guard refusals only change
// when re-sends go out: without a good answer the read ends at first send
// + T with its held -7953, and attempt 1's OK at 2000 ms wins until then
// (R7). Before round 3 the held error came at 2000 ms (the end of the
// segment the error re-send started) in the first input and at 1500 ms in
// the second, and attempt 1's OK was dropped as a duplicate.
func TestSimpleReadEndsAtItsBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  retry.Config
		// answering: proxies 2 and 3 answer -7953 at once (first input),
		// or attempt 2 is answered -7953 by hand at 1000 ms (second input).
		atOnce bool
		sends  int
		stats  retry.Stats // the retry counters expected
	}{
		{"error re-sends", retry.Config{}, true, 3, retry.Stats{RetriesTimeout: 1, RetriesErrorCode: 1}},
		{"guard refuses the error re-send", grantOne, false, 2, retry.Stats{RetriesTimeout: 1, RetriesRefused: 1}},
	} {
		for _, good := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/attempt1OK=%v", tc.name, good), func(t *testing.T) {
				f := newFixtureWith(t, hostProxies("p1", "p2", "p3"), confWith(2, "-7953"), tc.cfg)
				if tc.atOnce {
					f.tr.SetHandler(f.px[1], retrytest.Fail(retry.ResultProxySwiftTimeout))
					f.tr.SetHandler(f.px[2], retrytest.Fail(retry.ResultProxySwiftTimeout))
				}
				sent := &sentLog{f: f}
				start := f.clock.Now()
				f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 5, UserBuffer: []byte("ub")})
				final := "-7953@3s"
				if good {
					final = "0@2.001s" // answered at 2000 ms, handed out by the next poll
				}
				f.runSteps(start, []step{
					{at: 1000 * ms, want: "", do: func() {
						if !tc.atOnce {
							f.answer(sent.get(1), retry.ResultProxySwiftTimeout, "")
						}
					}},
					{at: 2000 * ms, want: "", do: func() {
						if good {
							f.answer(sent.get(0), retry.ResultOK, "v")
						}
					}},
					{at: 3100 * ms, want: final},
				})
				if n := sent.count(); n != tc.sends {
					t.Fatalf("%d attempts sent, want %d", n, tc.sends)
				}
				st := f.stats()
				if st.RetriesTimeout != tc.stats.RetriesTimeout || st.RetriesErrorCode != tc.stats.RetriesErrorCode || st.RetriesRefused != tc.stats.RetriesRefused {
					t.Fatalf("retries: timeout %d, error code %d, refused %d; want %d, %d, %d", st.RetriesTimeout, st.RetriesErrorCode,
						st.RetriesRefused, tc.stats.RetriesTimeout, tc.stats.RetriesErrorCode, tc.stats.RetriesRefused)
				}
				wantExhausted := uint64(1)
				if good {
					wantExhausted = 0
				}
				if st.Exhausted != wantExhausted || st.FinalResults != 1 {
					t.Fatalf("exhausted %d, finals %d; want %d, 1", st.Exhausted, st.FinalResults, wantExhausted)
				}
				f.drained()
			})
		}
	}
}

// TestSimpleReadEndsWhenEveryAttemptAnswered: the one exception to ending
// at T (SPEC §7): once every attempt sent has answered with a listed code,
// nothing better can come, and the held error is delivered at once — here
// at 500 ms, when attempt 3 answers.
func TestSimpleReadEndsWhenEveryAttemptAnswered(t *testing.T) {
	f := newFixture(t, hostProxies("p1", "p2", "p3"), confWith(2, "-7953"))
	f.tr.SetHandler(f.px[1], retrytest.Fail(retry.ResultProxySwiftTimeout))
	f.tr.SetHandler(f.px[2], retrytest.Fail(retry.ResultProxySwiftTimeout))
	sent := &sentLog{f: f}
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	f.runSteps(start, []step{
		{at: 400 * ms, want: "", do: func() { f.answer(sent.get(0), retry.ResultProxySwiftTimeout, "") }},
		{at: 3100 * ms, want: "-7953@401ms"},
	})
	if n := sent.count(); n != 3 {
		t.Fatalf("%d attempts sent, want 3", n)
	}
	f.drained()
}

// TestComplexReadRefusedWaitsOutItsSegments: a complex read whose re-send
// the storm guard refuses sends nothing more and waits out the waits its
// retries would have had (SPEC R19, §7): BATCH_GET, T=6000 ms, n=2, x=1000
// ms, proxies silent; the re-send at 1000 ms is refused, so the read ends
// at 1000 + 2000 + 3000 = 6000 ms with -19219 after one attempt, not at
// 1000 ms. An index read whose first packet is handled at 501 ms waits
// from its refused wait's end (1501 ms) on: -19219 at 6501 ms.
func TestComplexReadRefusedWaitsOutItsSegments(t *testing.T) {
	t.Run("batch", func(t *testing.T) {
		f := newFixtureWith(t, hostProxies("a", "b"), seedConf, grantNone)
		start := f.clock.Now()
		f.send(batchReq(1))
		f.runSteps(start, []step{
			{at: 5999 * ms, want: ""},
			{at: 6100 * ms, want: "-19219@6s"},
		})
		if st := f.stats(); st.RetriesRefused != 1 || st.RetriesTimeout != 0 || st.Exhausted != 1 {
			t.Fatalf("refused %d, timeout retries %d, exhausted %d; want 1, 0, 1", st.RetriesRefused, st.RetriesTimeout, st.Exhausted)
		}
		if n := len(f.tr.Sent()); n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
		f.drained()
	})
	t.Run("index after a packet", func(t *testing.T) {
		f := newFixtureWith(t, hostProxies("a", "b"), seedConf, grantNone)
		sent := &sentLog{f: f}
		d := retrytest.Data{StreamLen: 10}
		start := f.clock.Now()
		f.send(retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("g")})
		f.runSteps(start, []step{
			{at: 500 * ms, want: "", do: func() {
				f.tr.Replay(sent.get(0), func(req wire.Request, r *retrytest.Replier) {
					r.Start(req, retry.ResultOK, true, 0, 5)
					for pos := range uint64(5) {
						r.Record(pos, retry.ResultOK, d.AppendStreamKey(nil, req.Key(), pos), d.AppendStreamValue(nil, req.Key(), pos))
					}
					r.Send()
				})
			}},
			{at: 6500 * ms, want: "0+@501ms"},
			{at: 6600 * ms, want: "-19219@6.501s"},
		})
		if n := sent.count(); n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
		f.drained()
	})
}

// TestR14PastDueSegmentsInOnePoll: tick 1 ms, simple budget 1 ms,
// ReadRetryMaxCnt=8 (x ≈ 22 µs), polled every 1 ms, silent proxies. Every
// segment already past due is handled in the same poll: -19219 arrives by
// budget + one tick + one poll interval (3 ms), never before the budget,
// and the read is still retried 8 times (SPEC R14).
func TestR14PastDueSegmentsInOnePoll(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), confWith(8, "-7953"))
	if err := f.c.SetReadRetryTimeout(time.Millisecond, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	gs := f.step(20*ms, start)
	if len(gs) != 1 || gs[0].result != retry.ResultReadRetryTimeout || gs[0].at < time.Millisecond || gs[0].at > 3*ms || gs[0].attempts != 9 {
		t.Fatalf("want -19219 within [1 ms, 3 ms] after 9 attempts, got %+v", gs)
	}
	if st := f.stats(); st.RetriesTimeout != 8 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR14LatenessBound checks the bound SPEC R14 states for every schedule:
// with silent proxies a simple read with read retry ends no earlier than its
// budget T and no later than T + one tick + one poll interval, having sent
// all n+1 attempts; a complex read's last wait ends the same way. The model
// is the SPEC's: segments k·x, x = 2T/((n+1)(n+2)), summing to T.
func TestR14LatenessBound(t *testing.T) {
	for _, budget := range []time.Duration{time.Millisecond, 7 * ms, 300 * ms, 3 * time.Second} {
		for _, n := range []int{1, 2, 5, 8} {
			for _, poll := range []time.Duration{time.Millisecond, 3 * ms, 10 * ms} {
				name := fmt.Sprintf("T=%v/n=%d/poll=%v", budget, n, poll)
				clock := newFakeClock()
				tr := retrytest.NewTransport()
				c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Clock: clock.Now, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetReadRetryTimeout(budget, budget)
				if err := c.ApplyRoute(testZone, hostProxies("a", "b", "c"), confWith(n, "-7953")); err != nil {
					t.Fatal(err)
				}
				start := clock.Now()
				if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
					t.Fatal(err)
				}
				var at time.Duration
				for at == 0 && clock.Now().Sub(start) < 2*budget+time.Second {
					clock.Add(poll)
					if rsp, ok := c.RecvResponse(); ok {
						if rsp.Result() != retry.ResultReadRetryTimeout || rsp.Attempts() != n+1 {
							t.Fatalf("%s: result %d after %d attempts", name, rsp.Result(), rsp.Attempts())
						}
						at = clock.Now().Sub(start)
					}
				}
				if at < budget || at > budget+time.Millisecond+poll {
					t.Fatalf("%s: -19219 at %v, want within [%v, %v]", name, at, budget, budget+time.Millisecond+poll)
				}
				_ = c.Close()
			}
		}
	}
}

// TestAnswerQueuedBeforeDeadlineWins: an answer that is already waiting in
// the transport when the poller comes back from a stall must win over the
// timers that expired during the stall. The poller cannot know when a
// queued packet arrived, but it did arrive before this poll's "now", so
// firing the expired timers first re-sends reads that are answered (extra
// attempts, SPEC R7's hedge wasted) and, after a stall longer than the
// budget, ends them with -19219 although a good answer came in time (SPEC
// R9: "No good answer by the end of the last segment"). Found by rrsim:
// after client stalls of 70-160 ms on this shared machine (the report's
// max_stall_ms), steady showed 0.3% extra attempts and 12 late duplicates
// with healthy 1 ms proxies, and settings two -19219s.
//
// Here: the proxy answers at once, the poller then sleeps 100 ms past the
// 3 s budget, and polls.
func TestAnswerQueuedBeforeDeadlineWins(t *testing.T) {
	tr := retrytest.NewTransport()
	p := retry.Proxy{Host: "10.0.0.1", Port: 9000}
	q := retry.Proxy{Host: "10.0.0.2", Port: 9000}
	tr.SetHandler(p, retrytest.Serve(retrytest.Data{}, 0))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	zone := retry.Zone{AppID: 1, ZoneID: 1}
	if err := c.ApplyRoute(zone, []retry.Proxy{p, q}, "conf://ReadRetryMaxCnt=2"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadRetryTimeout(3*time.Second, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(zone, &retry.Request{Command: wire.CmdGet, Table: "t", Key: []byte("k"), AsyncID: 1}); err != nil {
		t.Fatal(err)
	}
	if tr.Pending() != 1 {
		t.Fatalf("%d answers queued, want 1", tr.Pending())
	}
	now = now.Add(3100 * time.Millisecond) // the poller stalls past the whole budget
	var results []int32
	attempts := 0
	for {
		rsp, ok := c.RecvResponse()
		if !ok {
			break
		}
		if !rsp.HaveMore() {
			results = append(results, rsp.Result())
			attempts = rsp.Attempts()
		}
	}
	if len(results) != 1 || results[0] != retry.ResultOK || attempts != 1 {
		t.Fatalf("final results %v after %d attempts; want the queued answer (0) after 1 attempt", results, attempts)
	}
}
