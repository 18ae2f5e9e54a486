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
	f.tr.Sent()
	start := f.clock.Now()
	seq := f.send(retry.Request{Command: wire.CmdGet, Key: []byte("silent")})
	for f.clock.Now().Sub(start) < 5*time.Second {
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
	f.t.Fatal("no final result in 5 s")
	return
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
