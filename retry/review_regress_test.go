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
	c, err := retry.New(retry.Config{Transport: h, Logger: slog.New(slog.DiscardHandler)})
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

// TestR2CapRaisedAfterZone: a cap raised after the zone exists gets timers
// for every context (the wheel is sized for at least the default cap), and
// a cap beyond what the wheel holds is clamped and logged, never left with
// timers that do not fit.
func TestR2CapRaisedAfterZone(t *testing.T) {
	logs := &captureHandler{}
	clock := newFakeClock()
	c, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), MaxWaitingPerZone: 10, Logger: slog.New(logs), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	c.SetReadRetryMaxContextCountPerZone(10)
	if err := c.ApplyRoute(testZone, hostProxies("a"), seedConf); err != nil {
		t.Fatal(err)
	}
	c.SetReadRetryMaxContextCountPerZone(20_000)
	for i := 0; i < 20_000; i++ {
		if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
			t.Fatal(err)
		}
	}
	reqs, timers := c.InFlight(testZone)
	if st, _ := c.Stats(testZone); reqs != 20_000 || timers != 20_000 || st.Contexts != 20_000 || st.CapHits != 0 {
		t.Fatalf("requests %d timers %d contexts %d cap hits %d", reqs, timers, st.Contexts, st.CapHits)
	}
	if len(logs.find(retry.MsgCapClamped)) != 0 {
		t.Fatal("clamped below the wheel's size")
	}
	c.SetReadRetryMaxContextCountPerZone(2_000_000)
	if l := logs.find(retry.MsgCapClamped); len(l) != 1 || l[0].attrs["used"] != int64(retry.DefaultMaxContexts) {
		t.Fatalf("clamp logs %+v", l)
	}
	_ = c.Close()
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
