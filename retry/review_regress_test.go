package retry_test

// Regressions found by a review from a fresh clone, each reduced to the
// engine on the in-memory transport.

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// TestR11IndexLimitLastPacketLost: an index read with a Limit whose records
// all arrived but whose empty last packet was lost is complete: one final
// OK, not -19219 after a timeout (SPEC R11, R12).
func TestR11IndexLimitLastPacketLost(t *testing.T) {
	px := hostProxies("a", "b")
	f := newFixture(t, px, seedConf)
	lossy := func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, 0, true, 0, 10) // records 0..9 with HaveMore; the last packet never comes
		for i := req.Position(); i < 10; i++ {
			r.Record(i, 0, []byte("k"), []byte("v"))
		}
		r.Send()
	}
	for _, p := range px {
		f.tr.SetHandler(p, lossy)
	}
	f.send(retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("pk"), Limit: 10})
	gs := f.poll()
	if len(gs) != 1 || gs[0].more || gs[0].result != retry.ResultOK || len(gs[0].recs) != 10 || gs[0].attempts != 1 {
		t.Fatalf("responses %+v", gs)
	}
	if st := f.stats(); st.Exhausted != 0 || st.RetriesTimeout != 0 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// holdAvailable parks the first Send inside the engine (in proxy choice),
// after its closed check, until released.
type holdAvailable struct {
	*retrytest.Transport
	once             sync.Once
	entered, release chan struct{}
}

func (h *holdAvailable) Available(id retry.ProxyID) bool {
	h.once.Do(func() { close(h.entered); <-h.release })
	return h.Transport.Available(id)
}

// TestCloseWaitsForSend: Close waits for a Send under way, so the request
// either fails with ErrClosed or is swept; nothing stays behind (SPEC §6).
func TestCloseWaitsForSend(t *testing.T) {
	h := &holdAvailable{Transport: retrytest.NewTransport(), entered: make(chan struct{}), release: make(chan struct{})}
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: h, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(time.Second, time.Second)
	if err := c.ApplyRoute(testZone, hostProxies("a"), seedConf); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() {
		_, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		errc <- err
	}()
	<-h.entered
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a Send was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	if err := <-errc; err != nil {
		t.Fatalf("the Send under way: %v", err)
	}
	<-closed
	if reqs, timers := c.InFlight(testZone); reqs != 0 {
		t.Fatalf("requests=%d timers=%d after Close", reqs, timers)
	}
	if st, _ := c.Stats(testZone); st.Contexts != 0 {
		t.Fatalf("contexts %d after Close", st.Contexts)
	}
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); !errors.Is(err, retry.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// TestR2CapRaisedAfterZone: SPEC R2 (round 2): a change of the cap applies
// at once to every zone, those that exist already included, raising as well
// as lowering. The zone was added with a cap of 10; raised to 600,000 it
// holds 600,000 contexts, each with its timer (before round 2 it was
// clamped to 500,000 because the wheel had been sized when the zone was
// added); lowered again, new reads go out without a context while the
// contexts in flight stay.
func TestR2CapRaisedAfterZone(t *testing.T) {
	logs := &captureHandler{}
	clock := newFakeClock()
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), MaxWaitingPerZone: 10, Logger: slog.New(logs), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	c.SetReadRetryMaxContextCountPerZone(10)
	if err := c.ApplyRoute(testZone, hostProxies("a"), seedConf); err != nil {
		t.Fatal(err)
	}
	n := 600_000
	if raceEnabled {
		n = 60_000 // the race detector makes 600,000 sends take minutes
	}
	c.SetReadRetryMaxContextCountPerZone(n)
	req := retry.Request{Command: wire.CmdGet, Key: []byte("k")}
	for range n {
		if _, err := c.Send(testZone, &req); err != nil {
			t.Fatal(err)
		}
	}
	reqs, timers := c.InFlight(testZone)
	if st, _ := c.Stats(testZone); reqs != n || timers != n || st.Contexts != int64(n) || st.CapHits != 0 {
		t.Fatalf("requests %d timers %d contexts %d cap hits %d, want %d contexts", reqs, timers, st.Contexts, st.CapHits, n)
	}
	if l := logs.find(retry.MsgSetMaxContext); len(l) != 2 || l[1].attrs["max_context_count"] != int64(n) {
		t.Fatalf("set logs %+v", l)
	}
	c.SetReadRetryMaxContextCountPerZone(n / 2)
	if _, err := c.Send(testZone, &req); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stats(testZone); st.Contexts != int64(n) || st.CapHits != 1 || st.ReadsWithoutContext != 1 {
		t.Fatalf("after lowering: contexts %d cap hits %d", st.Contexts, st.CapHits)
	}
	c.SetReadRetryMaxContextCountPerZone(1 << 40)
	if l := logs.find(retry.MsgSetMaxContext); l[len(l)-1].attrs["max_context_count"] != int64(retry.MaxContextsPerZone) {
		t.Fatalf("a cap above MaxContextsPerZone: %+v", l[len(l)-1])
	}
}

// TestR13ManyRefusingProxies: a send that fails moves on to the next proxy
// however many refuse, as long as one is healthy.
func TestR13ManyRefusingProxies(t *testing.T) {
	var px []retry.Proxy
	for i := 0; i < 20; i++ {
		px = append(px, retry.Proxy{Host: "h" + string(rune('a'+i)), Port: 1})
	}
	f := newFixture(t, px, seedConf)
	for _, p := range px[:17] {
		f.tr.SetRefusing(p, true)
	}
	for i := 0; i < 20; i++ {
		if _, err := f.c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for _, s := range f.tr.Sent() {
		for _, bad := range px[:17] {
			if s.Proxy == bad {
				t.Fatalf("sent to refusing proxy %v", bad)
			}
		}
	}
	f.drained()
}
