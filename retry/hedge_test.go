package retry_test

// Adaptive first re-send (SPEC R21).

import (
	"errors"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// timeline sends one silent read and steps the fake clock 1 ms at a time
// until its final result, returning when each re-send went out and when
// the final came (since the send), and the final's result.
func timeline(f *fixture) (resends []time.Duration, end time.Duration, result int32) {
	f.t.Helper()
	return timelineOf(f, retry.Request{Command: wire.CmdGet, Key: []byte("silent")})
}

// answered sends reads answered after lat each.
func answered(f *fixture, reads int, lat time.Duration) {
	f.t.Helper()
	for range reads {
		f.tr.Sent()
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		s := f.tr.Sent()
		f.clock.Add(lat)
		f.answer(s[0], retry.ResultOK, "v")
		if gs := finals(f.poll()); len(gs) != 1 || gs[0].result != retry.ResultOK {
			f.t.Fatalf("answered read: %s", describe(gs))
		}
	}
}

func within(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

// TestR21HedgeFirstResend: T = 3 s, n = 2 (x = 500 ms), Hedge at p95. Until
// the window holds 100 answers the schedule is the seed's (500, 1500,
// 3000 ms). Once 100 reads answered in 20 ms, the first re-send goes at
// d = the p95 (20 ms, up to one histogram bucket, 5/4, above), and the last at
// d + x' with x' = 2(T−d)/(n(n+1)) = (3000 − d)/3 ≈ 993 ms, the read ending
// exactly at T (SPEC R21).
func TestR21HedgeFirstResend(t *testing.T) {
	f := newFixtureWith(t, hostProxies("a"), seedConf, retry.Config{Hedge: retry.Hedge{Percentile: 0.95}})
	answered(f, 99, 20*time.Millisecond)
	rs, end, res := timeline(f)
	if len(rs) != 2 || rs[0] != 500*time.Millisecond || rs[1] != 1500*time.Millisecond || end != 3000*time.Millisecond || res != retry.ResultReadRetryTimeout {
		t.Fatalf("99 answers: re-sends %v, end %v (%d); want the seed's 500ms 1.5s, -19219 at 3s", rs, end, res)
	}
	answered(f, 1, 20*time.Millisecond)
	rs, end, res = timeline(f)
	if len(rs) != 2 || !within(rs[0], 22*time.Millisecond, 3*time.Millisecond) {
		t.Fatalf("100 answers: re-sends %v, want the first at about 20 ms (p95)", rs)
	}
	d := rs[0] - time.Millisecond // the timer fires at the next tick
	if want := d + (3*time.Second-d)/3; !within(rs[1], want, 2*time.Millisecond) {
		t.Fatalf("second re-send at %v, want d + x' = %v", rs[1], want)
	}
	if end != 3000*time.Millisecond || res != retry.ResultReadRetryTimeout {
		t.Fatalf("hedged read ended at %v with %d, want -19219 at exactly T = 3 s", end, res)
	}
	f.drained()
}

// TestR21HedgeOffSeedSchedule: without Config.Hedge the schedule is the
// seed's whatever the answers' latencies (SPEC R21, R6).
func TestR21HedgeOffSeedSchedule(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	answered(f, 200, 20*time.Millisecond)
	rs, end, _ := timeline(f)
	if len(rs) != 2 || rs[0] != 500*time.Millisecond || rs[1] != 1500*time.Millisecond || end != 3000*time.Millisecond {
		t.Fatalf("re-sends %v, end %v; want 500ms 1.5s, 3s", rs, end)
	}
	f.drained()
}

// TestR21HedgeConfig: a Percentile outside (0, 1) or a negative Min is
// refused with ErrInvalidConfig.
func TestR21HedgeConfig(t *testing.T) {
	for _, h := range []retry.Hedge{{Percentile: 1}, {Percentile: -0.1}, {Percentile: 0.9, Min: -1}, {Percentile: 0.9, MinSamples: -1}} {
		if _, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Hedge: h}); !errors.Is(err, retry.ErrInvalidConfig) {
			t.Errorf("Hedge %+v: %v, want ErrInvalidConfig", h, err)
		}
	}
}

// timelineOf is timeline for any read req (silent), for up to 8 s.
func timelineOf(f *fixture, req retry.Request) (resends []time.Duration, end time.Duration, result int32) {
	f.t.Helper()
	f.tr.Sent()
	start := f.clock.Now()
	seq := f.send(req)
	for f.clock.Now().Sub(start) < 8*time.Second {
		f.clock.Add(time.Millisecond)
		gs := f.poll()
		for _, s := range f.tr.Sent() {
			if s.Request().Attempt() > 0 {
				resends = append(resends, f.clock.Now().Sub(start))
			}
		}
		for _, g := range finals(gs) {
			if g.seq == seq {
				return resends, f.clock.Now().Sub(start), g.result
			}
		}
	}
	f.t.Fatal("no final result in 8 s")
	return
}

// answeredBatches sends batch reads whose whole answer (one packet) is
// parsed lat after their send.
func answeredBatches(f *fixture, reads int, lat time.Duration) {
	f.t.Helper()
	f.tr.SetHandler(f.px[0], retrytest.Serve(retrytest.Data{}, 0))
	for range reads {
		f.send(retry.Request{Command: wire.CmdBatchGet, Keys: batchKeys(3)})
		f.clock.Add(lat)
		if gs := finals(f.poll()); len(gs) != 1 || gs[0].result != retry.ResultOK {
			f.t.Fatalf("answered batch: %s", describe(gs))
		}
	}
	f.tr.SetHandler(f.px[0], nil)
	f.tr.Sent()
}

// TestR21HedgeComplexFirstWait: complex budget T = 6 s, n = 2, so x =
// 2T/((n+1)(n+2)) = 1 s and the seed's waits are x, 2x, 3x: re-sends at
// 1 s and 3 s, the end at 6 s (SPEC R10). With Hedge at p95, until the
// zone's window holds 100 complex first packets (simple reads' answers do
// not count: their estimate is apart) the schedule is the seed's. Once
// 100 batches had their first packet after 20 ms (recorded as 21 ms: the
// first send is kept in ms), the first wait is d = the p95, up to one
// histogram bucket (5/4) above; the later waits stay 2x and 3x, so the
// re-sends are at d and d + 2x, the end at d + 5x, attempts 1 + n (SPEC
// R21).
func TestR21HedgeComplexFirstWait(t *testing.T) {
	const x = time.Second
	f := newFixtureWith(t, hostProxies("a"), seedConf, retry.Config{Hedge: retry.Hedge{Percentile: 0.95}})
	silent := retry.Request{Command: wire.CmdBatchGet, Keys: batchKeys(3)}
	answered(f, 150, 20*time.Millisecond) // simple reads: their own estimate
	answeredBatches(f, 99, 20*time.Millisecond)
	rs, end, res := timelineOf(f, silent)
	if len(rs) != 2 || rs[0] != x || rs[1] != 3*x || end != 6*x || res != retry.ResultReadRetryTimeout {
		t.Fatalf("99 first packets: re-sends %v, end %v (%d); want the seed's 1s 3s, -19219 at 6s", rs, end, res)
	}
	answeredBatches(f, 1, 20*time.Millisecond)
	rs, end, res = timelineOf(f, silent)
	if len(rs) != 2 || rs[0] < 22*time.Millisecond || rs[0] > 28*time.Millisecond {
		t.Fatalf("100 first packets: re-sends %v, want the first at about 21 ms (p95)", rs)
	}
	d := rs[0] - time.Millisecond // the timer fires at the next tick
	if rs[1] != d+2*x+time.Millisecond || end != d+5*x+time.Millisecond || res != retry.ResultReadRetryTimeout {
		t.Fatalf("hedged batch: re-sends %v, end %v (%d); want %v, -19219 at %v", rs, end, res, d+2*x, d+5*x)
	}
	f.drained()
}
