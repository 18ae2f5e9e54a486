package retry_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// fakeClock is a manual clock for the engine (Config.Clock).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// logRecord is one captured log line.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

// captureHandler is a slog.Handler that keeps every record (SPEC R16 tests).
type captureHandler struct {
	mu      sync.Mutex
	records []logRecord
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *captureHandler) WithGroup(string) slog.Handler            { return h }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Any()
		return true
	})
	h.mu.Lock()
	h.records = append(h.records, rec)
	h.mu.Unlock()
	return nil
}

func (h *captureHandler) find(msg string) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

const seedConf = "tcp://10.0.0.1:9000;conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2"

var testZone = retry.Zone{AppID: 2, ZoneID: 3}

// fixture is a client on an in-memory transport with a fake clock.
type fixture struct {
	t     testing.TB
	c     *retry.Client
	tr    *retrytest.Transport
	clock *fakeClock
	logs  *captureHandler
	px    []retry.Proxy
}

// newFixture makes a client with the given proxies (all silent, logging
// sends) and conf list, budgets 3000 ms / 6000 ms.
func newFixture(t testing.TB, proxies []retry.Proxy, collect string) *fixture {
	return newFixtureWith(t, proxies, collect, retry.Config{})
}

// newFixtureWith is newFixture with cfg's other fields (Transport, Clock,
// Logger, WaitTimeout and Shards are the fixture's, and the fixture polls by
// hand: Poller is PollHand).
func newFixtureWith(t testing.TB, proxies []retry.Proxy, collect string, cfg retry.Config) *fixture {
	t.Helper()
	return newFixtureOn(t, newFakeClock(), proxies, collect, cfg)
}

// newFixtureOn is newFixtureWith on the given fake clock.
func newFixtureOn(t testing.TB, clock *fakeClock, proxies []retry.Proxy, collect string, cfg retry.Config) *fixture {
	t.Helper()
	f := &fixture{t: t, tr: retrytest.NewTransport(), clock: clock, logs: &captureHandler{}, px: proxies}
	f.tr.SetLog(true)
	cfg.Transport, cfg.Clock, cfg.Logger, cfg.WaitTimeout, cfg.Shards = f.tr, f.clock.Now, slog.New(f.logs), 5*time.Second, 4
	cfg.Poller = retry.PollHand
	c, err := retry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	if err := c.SetReadRetryTimeout(3000*time.Millisecond, 6000*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyRoute(testZone, proxies, collect); err != nil {
		t.Fatal(err)
	}
	return f
}

func hostProxies(spec ...string) []retry.Proxy {
	var out []retry.Proxy
	for i, s := range spec {
		out = append(out, retry.Proxy{Host: s, Port: uint16(9000 + i)})
	}
	return out
}

// got is a copy of a Response, safe to keep.
type got struct {
	seq, asyncID uint64
	result       int32
	more         bool
	user         string
	attempts     int
	recs         []wire.Record
	at           time.Duration
}

// poll calls RecvResponse until nothing is ready and copies every response.
func (f *fixture) poll() []got {
	var out []got
	for {
		rsp, ok := f.c.RecvResponse()
		if !ok {
			return out
		}
		g := got{seq: rsp.Seq(), asyncID: rsp.AsyncID(), result: rsp.Result(), more: rsp.HaveMore(),
			user: string(rsp.UserBuffer()), attempts: rsp.Attempts()}
		for it := rsp.Records(); ; {
			r, ok := it.Next()
			if !ok {
				break
			}
			g.recs = append(g.recs, wire.Record{Tag: r.Tag, Result: r.Result, Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)})
		}
		if n := rsp.RecordCount(); n != len(g.recs) {
			f.t.Fatalf("RecordCount %d but %d records iterated", n, len(g.recs))
		}
		out = append(out, g)
	}
}

// step advances the clock by d in 1 ms steps, polling at each, and returns
// every response with the time (since the first call's start) it came at.
func (f *fixture) step(d time.Duration, since time.Time) []got {
	var out []got
	for end := f.clock.Now().Add(d); f.clock.Now().Before(end); {
		f.clock.Add(time.Millisecond)
		for _, g := range f.poll() {
			g.at = f.clock.Now().Sub(since)
			out = append(out, g)
		}
	}
	return out
}

func (f *fixture) send(req retry.Request) uint64 {
	f.t.Helper()
	seq, err := f.c.Send(testZone, &req)
	if err != nil {
		f.t.Fatalf("Send: %v", err)
	}
	return seq
}

func (f *fixture) stats() retry.Stats {
	s, err := f.c.Stats(testZone)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// drained advances time far enough for every timer to fire and checks that
// the zone holds no request and no timer, and that the context count is 0
// (SPEC §6: never a leaked context, buffer or timer).
func (f *fixture) drained() {
	f.t.Helper()
	for i := 0; i < 20; i++ {
		f.clock.Add(time.Second)
		f.poll()
	}
	reqs, timers := f.c.InFlight(testZone)
	st := f.stats()
	ts, _ := f.c.TableStats(testZone)
	if reqs != 0 || timers != 0 || st.Contexts != 0 || ts.PayloadBlocks != 0 || ts.LargeInUse != 0 {
		f.t.Fatalf("leak: requests=%d timers=%d contexts=%d payload blocks=%d large=%d",
			reqs, timers, st.Contexts, ts.PayloadBlocks, ts.LargeInUse)
	}
	if ts.PayloadAllocs != ts.PayloadFrees {
		f.t.Fatalf("payload blocks: %d allocated, %d freed", ts.PayloadAllocs, ts.PayloadFrees)
	}
}

// answer replies to a recorded request with a simple-read answer.
func (f *fixture) answer(s retrytest.Sent, result int32, value string) {
	req := s.Request()
	var rb wire.ResponseBuilder
	rb.Start(nil, wire.ResponseHeader{Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), Result: result, Attempt: req.Attempt()})
	if value != "" {
		_ = rb.AddRecord(0, 0, req.Key(), []byte(value))
	}
	f.tr.Deliver(s.Proxy, rb.Frame())
}

func finals(gs []got) []got {
	var out []got
	for _, g := range gs {
		if !g.more {
			out = append(out, g)
		}
	}
	return out
}

// step is one line of a timed scenario on the fake clock: at `at` (since
// the scenario's start) do runs — answers delivered, proxies changed —
// after the polls up to at and before the poll at at+1 ms; want lists the
// responses the polls in (previous step's at, at] handed out, each as
// result@time (final) or result+@time (more follow), in order; sends (with
// runSchedule) lists the times of the frames sent in that window.
type step struct {
	at    time.Duration
	do    func()
	want  string
	sends string
}

// runSteps plays steps in order and fails with "step %d: got, want" at the
// first difference in the responses. A step's polls run every 1 ms of fake
// time. It leaves the transport's log of sent frames alone, and returns
// every response, for checks beyond result and time.
func (f *fixture) runSteps(start time.Time, steps []step) []got {
	f.t.Helper()
	return f.play(start, steps, false)
}

// runSchedule is runSteps that also checks each step's sends (it empties
// the transport's log as it goes).
func (f *fixture) runSchedule(start time.Time, steps []step) []got {
	f.t.Helper()
	return f.play(start, steps, true)
}

func (f *fixture) play(start time.Time, steps []step, sends bool) (all []got) {
	f.t.Helper()
	for i, s := range steps {
		var gs []got
		var at []string
		for f.clock.Now().Sub(start) < s.at {
			f.clock.Add(time.Millisecond)
			now := f.clock.Now().Sub(start)
			for _, g := range f.poll() {
				g.at = now
				gs = append(gs, g)
			}
			if sends {
				for range f.tr.Sent() {
					at = append(at, now.String())
				}
			}
		}
		if g := describe(gs); g != s.want {
			f.t.Fatalf("step %d (at %v): got %q, want %q", i, s.at, g, s.want)
		}
		if g := strings.Join(at, " "); sends && g != s.sends {
			f.t.Fatalf("step %d (at %v): sends at %q, want %q", i, s.at, g, s.sends)
		}
		all = append(all, gs...)
		if s.do != nil {
			s.do()
		}
	}
	return all
}

// describe writes responses as runSteps' want strings.
func describe(gs []got) string {
	var b strings.Builder
	for i, g := range gs {
		if i > 0 {
			b.WriteByte(' ')
		}
		more := ""
		if g.more {
			more = "+"
		}
		fmt.Fprintf(&b, "%d%s@%v", g.result, more, g.at)
	}
	return b.String()
}

// sentLog keeps every frame the fixture's transport sent, in order, so that
// a scenario can answer attempt k later (retrytest's Sent empties its log).
type sentLog struct {
	f   *fixture
	all []retrytest.Sent
}

// get returns attempt i (0-based, in send order) of everything sent so far.
func (l *sentLog) get(i int) retrytest.Sent {
	l.f.t.Helper()
	l.all = append(l.all, l.f.tr.Sent()...)
	if i >= len(l.all) {
		l.f.t.Fatalf("attempt %d not sent (%d sent)", i+1, len(l.all))
	}
	return l.all[i]
}

// count returns how many frames were sent so far.
func (l *sentLog) count() int {
	l.all = append(l.all, l.f.tr.Sent()...)
	return len(l.all)
}

func confWith(maxCnt int, codes string) string {
	return fmt.Sprintf("conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=%s&ReadRetryMaxCnt=%d", codes, maxCnt)
}
