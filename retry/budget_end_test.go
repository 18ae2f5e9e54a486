package retry_test

// When a read ends (SPEC R6, R9, R10, R19 and §7 "R9/R8/R19 — a simple read
// ends at its budget, not before"): timed scenarios on the fake clock,
// written as step tables.

import (
	"fmt"
	"testing"

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
