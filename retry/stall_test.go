package retry_test

// Stall detection (SPEC §7 R13 round 3, issue 24): a proxy with attempts
// outstanding and no frame for longer than an eighth of the read's first
// segment x is passed over by first sends, long before a timeout at x
// marks it suspect. The schedule of every read stays the seed's.

import (
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// The fixture's simple reads: T = 3 s, n = 2, so x = 2T/((n+1)(n+2)) =
// 500 ms (SPEC R6) and the stall threshold x/8 = 62.5 ms (above the floor
// of 4 ms for the default 1 ms tick and poll interval).
const (
	stallX         = 500 * time.Millisecond
	stallThreshold = stallX / 8
)

// checkOutstanding fails unless every proxy's count of attempts in flight
// is back to 0 (nothing leaks, whatever answered or timed out).
func checkOutstanding(t *testing.T, f *fixture) {
	t.Helper()
	for _, p := range f.px {
		if n := retry.ProxyOutstanding(f.c, p); n != 0 {
			t.Fatalf("proxy %v: %d attempts still counted in flight", p, n)
		}
	}
}

// TestR13StallAvoidsDarkProxy: two proxies, the first dark from the start,
// a read every 1 ms for 700 ms, polled between sends. The model: first
// sends alternate (the first sends' round robin starts at the dark proxy)
// until the dark proxy has been silent with an attempt outstanding for
// longer than 62.5 ms — reads sent at 0, 2, …, 62 ms, 32 of them — and
// none after, before or after the timeout at x marks it suspect. Exactly
// those 32 reads wait for their re-send, at x (seed schedule); the rest
// are answered at once. Without stall detection the dark proxy takes every
// other read until x: 250.
func TestR13StallAvoidsDarkProxy(t *testing.T) {
	px := hostProxies("dark", "lit")
	f := newFixture(t, px, seedConf)
	if n := stallRun(t, retry.Config{NoProxyHealth: true}); n != 350 {
		t.Fatalf("health off: %d of 700 first sends to the dark proxy, want 350 (round robin)", n)
	}
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	start := f.clock.Now()
	sentAt := map[uint64]time.Duration{}
	var wantSlow []uint64
	firstToDark := 0
	var results []got
	for ms := 0; ms < 700; ms++ {
		seq := f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(ms)})
		sentAt[seq] = f.clock.Now().Sub(start)
		for _, s := range f.tr.Sent() {
			if s.Proxy == px[0] && s.Request().Attempt() == 0 {
				firstToDark++
				if s.Request().Seq() != seq {
					t.Fatalf("a first send to the dark proxy that is not the read just sent")
				}
				if at := sentAt[seq]; at > stallThreshold {
					t.Fatalf("read sent at %v (past the stall threshold %v) went to the dark proxy", at, stallThreshold)
				}
				wantSlow = append(wantSlow, seq)
			}
		}
		results = append(results, finals(f.step(time.Millisecond, start))...)
	}
	results = append(results, finals(f.step(stallX, start))...)
	if firstToDark != 32 {
		t.Fatalf("%d first sends to the dark proxy, want 32 (reads sent at 0, 2, …, 62 ms)", firstToDark)
	}
	slow := map[uint64]bool{}
	for _, s := range wantSlow {
		slow[s] = true
	}
	if len(results) != 700 {
		t.Fatalf("%d final results for 700 reads", len(results))
	}
	for _, g := range results {
		lat := g.at - sentAt[g.seq]
		switch {
		case g.result != retry.ResultOK:
			t.Fatalf("read %d: result %d", g.asyncID, g.result)
		case slow[g.seq] && lat != stallX:
			// Re-sent at exactly x (the seed's R6), answered in that poll.
			t.Fatalf("read %d sent to the dark proxy answered after %v, want x = %v", g.asyncID, lat, stallX)
		case !slow[g.seq] && lat > time.Millisecond:
			t.Fatalf("read %d sent to the lit proxy answered after %v", g.asyncID, lat)
		}
	}
	if cs := f.c.ClientStats(); cs.SuspectMarks != 1 {
		t.Fatalf("ClientStats %+v: want the dark proxy marked suspect once (at x)", cs)
	}
	f.drained()
	checkOutstanding(t, f)
}

// TestR13StallFalsePositiveRecovers: a healthy but slow proxy is stalled
// once it has been silent past the threshold with attempts outstanding,
// and first sends reach it again at its very next frame, although it still
// has an attempt outstanding (the frame restarts its stall clock); it is
// never marked suspect, since it answered before x.
func TestR13StallFalsePositiveRecovers(t *testing.T) {
	px := hostProxies("slow", "lit")
	f := newFixture(t, px, seedConf)
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	start := f.clock.Now()
	get := func() uint64 { return f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")}) }
	get() // slow
	get() // lit
	get() // slow
	var toSlow []retrytest.Sent
	for _, s := range f.tr.Sent() {
		if s.Proxy == px[0] {
			toSlow = append(toSlow, s)
		}
	}
	if len(toSlow) != 2 {
		t.Fatalf("%d first sends to the slow proxy, want 2", len(toSlow))
	}
	f.step(stallThreshold+10*time.Millisecond, start)
	countSlow := func(reads int) int {
		n := 0
		for range reads {
			get()
		}
		for _, s := range f.tr.Sent() {
			if s.Proxy == px[0] {
				n++
			}
		}
		return n
	}
	if n := countSlow(4); n != 0 {
		t.Fatalf("stalled proxy got %d of 4 first sends, want 0", n)
	}
	f.answer(toSlow[0], retry.ResultOK, "v") // one answer; the other attempt is still out
	f.poll()
	if n := countSlow(4); n != 2 {
		t.Fatalf("proxy that answered got %d of 4 first sends, want 2 (round robin)", n)
	}
	if cs := f.c.ClientStats(); cs.SuspectMarks != 0 {
		t.Fatalf("ClientStats %+v: a proxy that answered before x was marked suspect", cs)
	}
	f.answer(toSlow[1], retry.ResultOK, "v")
	f.drained()
	checkOutstanding(t, f)
}

// stallRun sends a read every 1 ms for 700 ms to a dark and a lit proxy
// and returns how many first sends went to the dark one.
func stallRun(t *testing.T, cfg retry.Config) int {
	px := hostProxies("dark", "lit")
	f := newFixtureWith(t, px, seedConf, cfg)
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	n := 0
	for range 700 {
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		for _, s := range f.tr.Sent() {
			if s.Proxy == px[0] && s.Request().Attempt() == 0 {
				n++
			}
		}
		f.step(time.Millisecond, f.clock.Now())
	}
	f.drained()
	checkOutstanding(t, f)
	return n
}
