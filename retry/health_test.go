package retry_test

// Proxy health and the first sends' own round robin (SPEC §7 R13 round 3).

import (
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// darkRun sends reads one at a time, every gap of fake time, to a zone of
// two proxies of which the first is dark (silent) and the second answers,
// and returns per read its latency, and the frames sent to the dark proxy.
type darkRun struct {
	f         *fixture
	latencies []time.Duration
	results   []int32
	dark      []retrytest.Sent // frames the dark proxy got, in order
	darkAt    []time.Duration  // when each was sent, since the run's start
	firstTo   map[retry.Proxy]int
}

func runDark(t *testing.T, cfg retry.Config, reads int, gap time.Duration) *darkRun {
	t.Helper()
	px := hostProxies("dark", "lit")
	f := newFixtureWith(t, px, seedConf, cfg)
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	r := &darkRun{f: f, firstTo: map[retry.Proxy]int{}}
	start := f.clock.Now()
	collect := func() {
		for _, s := range f.tr.Sent() {
			if s.Request().Attempt() == 0 {
				r.firstTo[s.Proxy]++
			}
			if s.Proxy == px[0] {
				r.dark = append(r.dark, s)
				r.darkAt = append(r.darkAt, f.clock.Now().Sub(start))
			}
		}
	}
	for i := 0; i < reads; i++ {
		sent := f.clock.Now()
		seq := f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(i)})
		collect()
		done := false
		for step := 0; !done && step < 4000; step++ {
			for _, g := range finals(f.poll()) {
				if g.seq == seq {
					r.latencies = append(r.latencies, f.clock.Now().Sub(sent))
					r.results = append(r.results, g.result)
					done = true
				}
			}
			collect()
			if !done {
				f.clock.Add(time.Millisecond)
			}
		}
		if !done {
			t.Fatalf("read %d: no final result", i)
		}
		f.clock.Add(gap)
	}
	f.drained()
	return r
}

// TestR13FirstSendsOwnRoundRobin: with health off, first sends alternate
// between two proxies although every read to the dark one is re-sent —
// 50 of 100 each (SPEC §7 R13 round 3: re-sends never move the first
// sends' round robin; issue 24 saw 99 of 100 go to the dark proxy).
func TestR13FirstSendsOwnRoundRobin(t *testing.T) {
	r := runDark(t, retry.Config{NoProxyHealth: true}, 100, 10*time.Millisecond)
	px := hostProxies("dark", "lit")
	if r.firstTo[px[0]] != 50 || r.firstTo[px[1]] != 50 {
		t.Fatalf("first sends: dark %d, lit %d; want 50, 50", r.firstTo[px[0]], r.firstTo[px[1]])
	}
	st := r.f.c.ClientStats()
	if st.SuspectProxies != 0 || st.SuspectMarks != 0 || r.f.stats().Probes != 0 {
		t.Fatalf("health off but counted: %+v, probes %d", st, r.f.stats().Probes)
	}
}

// TestR13HealthDarkProxy: with health on (the default), one of two
// proxies dark, reads every 10 ms for 10 s: every read succeeds; only
// reads sent before the dark proxy's first timeout (x = 500 ms for T = 3 s,
// n = 2) wait for a re-send; afterwards the dark proxy gets only probes —
// attempt-1 copies, at most one per probe interval — and no read waits for
// one (SPEC §7 R13 round 3).
func TestR13HealthDarkProxy(t *testing.T) {
	const x = 500 * time.Millisecond
	r := runDark(t, retry.Config{}, 1000, 10*time.Millisecond)
	for i, res := range r.results {
		if res != retry.ResultOK {
			t.Fatalf("read %d: result %d", i, res)
		}
	}
	// Reads are ~10 ms apart; the first read to the dark proxy is read 0
	// (the round robin starts there), detected at x: reads sent after x
	// never wait for a re-send.
	slow := 0
	for i, l := range r.latencies {
		if l >= x {
			slow++
			if i > int(x/(10*time.Millisecond)) {
				t.Fatalf("read %d (sent after the dark proxy's first timeout) took %v", i, l)
			}
		}
	}
	if slow == 0 {
		t.Fatal("no read met the dark proxy before it was suspect")
	}
	probes := 0
	for i, s := range r.dark {
		if r.darkAt[i] <= x {
			continue // before detection: ordinary first sends
		}
		if a := s.Request().Attempt(); a != 1 {
			t.Fatalf("frame %d to the dark proxy at %v is attempt %d, not a probe", i, r.darkAt[i], a)
		}
		probes++
	}
	// The run lasts 1000 reads × ~10 ms; the probe interval is 1 s.
	if probes == 0 || probes > 11 {
		t.Fatalf("%d probes of the dark proxy in ~10 s, want 1..11", probes)
	}
	if got := r.f.stats().Probes; got != uint64(probes) {
		t.Fatalf("Stats.Probes %d, frames seen %d", got, probes)
	}
	cs := r.f.c.ClientStats()
	if cs.SuspectProxies != 1 || cs.SuspectMarks != 1 {
		t.Fatalf("ClientStats %+v, want the dark proxy suspect, marked once", cs)
	}
}

// TestR13ProbeRestoresProxy: a dark proxy that comes back answers the next
// probe and is trusted again: first sends reach it again (SPEC §7 R13
// round 3).
func TestR13ProbeRestoresProxy(t *testing.T) {
	px := hostProxies("dark", "lit")
	f := newFixture(t, px, seedConf)
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")}) // to the dark proxy
	f.step(600*time.Millisecond, f.clock.Now())
	if cs := f.c.ClientStats(); cs.SuspectProxies != 1 {
		t.Fatalf("after a timeout: %+v, want one suspect proxy", cs)
	}
	f.tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0)) // back
	f.tr.Sent()
	var fin []got
	for i := 0; i < 40; i++ { // 2 s: the probe interval has passed
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		fin = append(fin, finals(f.step(50*time.Millisecond, f.clock.Now()))...)
	}
	// Exactly once (SPEC R7, R12): one final per read, the probe's copy of
	// the answer dropped as a duplicate; attempts within 1 + MaxRetries.
	if len(fin) != 40 {
		t.Fatalf("%d final results for 40 reads", len(fin))
	}
	for _, g := range fin {
		if g.result != retry.ResultOK || g.attempts > 3 {
			t.Fatalf("read: result %d after %d attempts", g.result, g.attempts)
		}
	}
	if st := f.stats(); st.Probes != 1 || st.DuplicatesDropped != 1 {
		t.Fatalf("probes %d, duplicates dropped %d; want the one probe's answer dropped", st.Probes, st.DuplicatesDropped)
	}
	if cs := f.c.ClientStats(); cs.SuspectProxies != 0 {
		t.Fatalf("after the proxy answered a probe: %+v, want none suspect", cs)
	}
	first := 0
	for _, s := range f.tr.Sent() {
		if s.Proxy == px[0] && s.Request().Attempt() == 0 {
			first++
		}
	}
	if first == 0 {
		t.Fatal("no first send reached the proxy after it answered")
	}
	f.drained()
}

// TestR13ResendPrefersHealthy: among untried hosts a re-send takes a
// healthy proxy before a suspect one (SPEC §7 R13 round 3), whatever the
// round robin says. Route c, a, b: c refuses the first send (suspect), a
// is silent, b answers; the re-send at x scans c first but goes to b.
func TestR13ResendPrefersHealthy(t *testing.T) {
	px := hostProxies("c", "a", "b")
	f := newFixture(t, px, seedConf)
	f.tr.SetRefusing(px[0], true)
	f.tr.SetHandler(px[2], retrytest.Serve(retrytest.Data{}, 0))
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	f.tr.SetRefusing(px[0], false)
	if s := f.tr.Sent(); len(s) != 1 || s[0].Proxy != px[1] {
		t.Fatalf("first send: %+v, want one frame to a", s)
	}
	gs := finals(f.step(600*time.Millisecond, start))
	s := f.tr.Sent()
	if len(s) != 1 || s[0].Proxy != px[2] {
		t.Fatalf("re-sends %+v, want one to b (c is suspect)", s)
	}
	if len(gs) != 1 || gs[0].result != retry.ResultOK || gs[0].at != 500*time.Millisecond {
		t.Fatalf("got %s, want 0@500ms", describe(gs))
	}
	f.drained()
}
