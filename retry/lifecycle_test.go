package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// Tests of SPEC R22: nothing outlives its use. Proxies that no route names
// are released once their attempts have ended and their IDs reused; zones
// can be removed; adding a zone costs amortised O(1).

// deploy returns the n proxies of deploy number k: new endpoints each time,
// two hosts, as a redeploy of the database's proxies moves them.
func deploy(k, n int) []retry.Proxy {
	ps := make([]retry.Proxy, n)
	for i := range ps {
		ps[i] = retry.Proxy{Host: fmt.Sprintf("d%d-h%d", k, i%2), Port: uint16(9000 + i)}
	}
	return ps
}

// getOK does one read through Do and checks its answer.
func getOK(c *retry.Client, zone retry.Zone, key string, res *retry.Result) error {
	err := c.Do(context.Background(), zone, &retry.Request{Command: wire.CmdGet, Key: []byte(key)}, res)
	if err != nil {
		return err
	}
	if res.Len() != 1 || string(res.Record(0).Value) != "value-of-"+key {
		return fmt.Errorf("read %q: %d records", key, res.Len())
	}
	return nil
}

// TestRedeployReusesProxyIDs: issue 23's S16 input. An 8-proxy zone is
// redeployed at new addresses 10,000 times: 80,000 endpoints, more than the
// 65,535 ProxyIDs. Before SPEC R22 every update after the 8,191st was
// refused (ErrInvalidConfig) and the zone kept routing to its dead
// proxies; now each old proxy is released once its reads have ended, the
// transport holds only the 8 the route names, and each redeploy serves
// reads from its new proxies.
func TestRedeployReusesProxyIDs(t *testing.T) {
	tr := retrytest.NewTransport()
	tr.SetDefaultHandler(retrytest.Serve(retrytest.Data{}, 0))
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, Poller: retry.PollHand})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	const deploys, n = 10_000, 8
	for k := range deploys {
		if err := c.ApplyRoute(testZone, deploy(k, n), seedConf); err != nil {
			t.Fatalf("deploy %d: %v", k, err)
		}
		key := fmt.Sprint("k", k)
		seq, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte(key)})
		must(t, err)
		rsp, ok := c.RecvResponse()
		if !ok || rsp.Seq() != seq || rsp.Result() != retry.ResultOK {
			t.Fatalf("deploy %d: no answer", k)
		}
		if s := rsp.Scan(); !s.Next() || string(s.Value()) != "value-of-"+key {
			t.Fatalf("deploy %d: wrong answer", k)
		}
		// The next poll ends the read and releases the last deploy's
		// proxies: their reads have all ended. Only this deploy's 8 are open.
		c.RecvResponse()
		if ps := c.ProxyStats(); ps.Live != n || ps.Draining != 0 || tr.Proxies() != n {
			t.Fatalf("deploy %d: client %+v, transport %d proxies open; want %d live, 0 draining, %d open", k, ps, tr.Proxies(), n, n)
		}
	}
	if got, want := tr.Opened(), deploys*n; got != want {
		t.Fatalf("transport opened %d proxies, want %d", got, want)
	}
	for id := retry.ProxyID(1); id <= 2*n; id++ {
		if _, ok := c.ProxyOf(id); !ok {
			t.Fatalf("ProxyID %d was never given out: IDs are not reused from the lowest", id)
		}
	}
	if _, ok := c.ProxyOf(2*n + 1); ok {
		t.Fatalf("ProxyID %d given out: released IDs are not reused", 2*n+1)
	}
}

// TestReleaseWaitsForAttempts: a proxy the route drops stays open while an
// attempt sent to it is in flight (its answer is still wanted, SPEC R7),
// and is released when that request ends.
func TestReleaseWaitsForAttempts(t *testing.T) {
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, Poller: retry.PollHand})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	a, b := deploy(0, 1), deploy(1, 1)
	tr.SetHandler(b[0], retrytest.Serve(retrytest.Data{}, 0))
	tr.SetLog(true)
	steps := []struct {
		name           string
		do             func()
		open, draining int
		wantRsp        bool
		wantSeqOfReadA bool
	}{
		{name: "route a", do: func() { must(t, c.ApplyRoute(testZone, a, seedConf)) }, open: 1},
		{name: "read to silent a", do: func() {
			_, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("x")})
			must(t, err)
		}, open: 1},
		{name: "route b", do: func() { must(t, c.ApplyRoute(testZone, b, seedConf)) }, open: 2, draining: 1},
		{name: "a answers late", do: func() {
			for _, s := range tr.Sent() {
				tr.Replay(s, retrytest.Serve(retrytest.Data{}, 0))
			}
		}, open: 2, draining: 1, wantRsp: true},
		{name: "next poll", open: 1},
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		_, ok := c.RecvResponse()
		if ok != st.wantRsp {
			t.Fatalf("step %d (%s): response %v, want %v", i, st.name, ok, st.wantRsp)
		}
		if ps := c.ProxyStats(); tr.Proxies() != st.open || ps.Draining != st.draining {
			t.Fatalf("step %d (%s): %d open, %+v; want %d open, %d draining", i, st.name, tr.Proxies(), ps, st.open, st.draining)
		}
	}
}

// lateFrom wraps retrytest's transport to stage the race a fence is for: a
// frame from a proxy arrives just before the engine releases it (queued,
// not yet read), and before the poller reads it the released ID is given to
// a new endpoint (between: a route update and a Send on another goroutine,
// run here at the poller's next Recv).
type lateFrom struct {
	*retrytest.Transport
	late    []byte
	between func()
	armed   bool
}

func (l *lateFrom) Release(id retry.ProxyID) {
	if l.late != nil {
		l.DeliverFrom(id, l.late)
		l.late, l.armed = nil, true
	}
	l.Transport.Release(id)
}

func (l *lateFrom) Recv() ([]byte, retry.ProxyID, bool) {
	if l.armed {
		l.armed = false
		l.between()
	}
	return l.Transport.Recv()
}

// TestReusedIDNeverMisroutes: a ProxyID released and given to a new
// endpoint never carries an answer of the old one (SPEC R22, R12). The old
// proxy's frame that arrived just before its release names the request
// the new proxy gets right after (a confused or hostile proxy, or a seq
// reached by chance); the transport's fence (Transport.Release) drops it,
// and the request gets the new proxy's answer.
func TestReusedIDNeverMisroutes(t *testing.T) {
	l := &lateFrom{Transport: retrytest.NewTransport()}
	c, err := retry.New(retry.Config{Transport: l, Logger: quiet, Poller: retry.PollHand})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	old, mid, fresh := deploy(0, 1), deploy(1, 1), deploy(2, 1)
	l.SetDefaultHandler(retrytest.Serve(retrytest.Data{}, 0))
	must(t, c.ApplyRoute(testZone, old, seedConf))
	seq1, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("first")})
	must(t, err)
	if rsp, ok := c.RecvResponse(); !ok || rsp.Seq() != seq1 {
		t.Fatalf("first read: %v", ok)
	}
	// The next request of the zone gets seq1+1; the old proxy's frame names it.
	var rb wire.ResponseBuilder
	rb.Start(nil, wire.ResponseHeader{Command: wire.CmdGet, Seq: seq1 + 1})
	must(t, rb.AddRecord(0, 0, []byte("third"), []byte("from the old proxy")))
	l.late = rb.Frame()
	var seq3 uint64
	l.between = func() {
		must(t, c.ApplyRoute(testZone, fresh, seedConf))
		if p, ok := c.ProxyOf(1); !ok || p != fresh[0] {
			t.Errorf("ProxyID 1 is %v %v, want the new endpoint %v", p, ok, fresh[0])
		}
		seq3, err = c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("third")})
		must(t, err)
	}
	must(t, c.ApplyRoute(testZone, mid, seedConf))
	rsp, ok := c.RecvResponse() // releases the old proxy; its frame is queued
	if !ok || rsp.Seq() != seq3 || seq3 != seq1+1 {
		t.Fatalf("third read: ok %v, seq %d, want %d", ok, seq3, seq1+1)
	}
	s := rsp.Scan()
	if !s.Next() || string(s.Value()) != "value-of-third" {
		t.Fatalf("third read got %q, want the new proxy's answer", s.Value())
	}
	if l.Dropped() != 1 {
		t.Fatalf("transport dropped %d frames of released proxies, want 1", l.Dropped())
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRouteUpdatesUnderLoad: reads from many goroutines while the zone is
// redeployed at new addresses and a second zone is added and removed. Every
// read of the steady zone is answered by its first attempt (none lost an
// answer to a released proxy), each exactly once; reads of the removed zone
// end with an error, never hang; both zones' finals equal their reads.
func TestRouteUpdatesUnderLoad(t *testing.T) {
	tr := retrytest.NewTransport()
	tr.SetDefaultHandler(retrytest.Serve(retrytest.Data{}, 0))
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	other := retry.Zone{AppID: 2, ZoneID: 4}
	must(t, c.ApplyRoute(testZone, deploy(0, 8), seedConf))
	deploys := 300
	if raceEnabled {
		deploys = 100
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, otherReads atomic.Int64
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res retry.Result
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("g%d-%d", g, i)
				if err := getOK(c, testZone, key, &res); err != nil {
					errs <- err
					return
				}
				if res.Attempts() != 1 {
					errs <- fmt.Errorf("read %s took %d attempts: an answer was lost", key, res.Attempts())
					return
				}
				reads.Add(1)
				// The other zone comes and goes: its reads fail cleanly.
				err := c.Do(context.Background(), other, &retry.Request{Command: wire.CmdGet, Key: []byte(key)}, &res)
				if err != nil && !errors.Is(err, retry.ErrUnknownZone) && !errors.Is(err, retry.ErrReadRetryTimeout) {
					errs <- fmt.Errorf("other zone: %v", err)
					return
				}
				otherReads.Add(1)
			}
		}()
	}
	for k := 1; k <= deploys; k++ {
		must(t, c.ApplyRoute(testZone, deploy(k, 8), seedConf))
		if k%2 == 1 {
			must(t, c.ApplyRoute(other, deploy(-k, 2), seedConf))
		} else {
			must(t, c.RemoveZone(other))
		}
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, _ := c.Stats(testZone)
	if st.FinalResults != st.ReadsSent || st.ReadsSent < uint64(reads.Load()) || st.RetriesTimeout+st.RetriesErrorCode != 0 {
		t.Fatalf("stats %+v, %d reads", st, reads.Load())
	}
	// The client's own driver (PollSelf) polls on: the last deploys' proxies go at its
	// next poll.
	for deadline := time.Now().Add(10 * time.Second); c.ProxyStats().Live != 8 || tr.Proxies() != 8; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the run: %+v, %d open; want 8 and 8", c.ProxyStats(), tr.Proxies())
		}
	}
	t.Logf("%d reads, %d of the other zone, %d deploys, %d proxies opened", reads.Load(), otherReads.Load(), deploys, tr.Opened())
}

// TestRemoveZone: a removed zone's requests in flight end as if their
// budgets ran out, each with one final result through the usual paths; its
// stats, its place in Zones and its proxies go; applied again it is a new
// zone, and an answer to the removed zone's request never passes for one of
// the new zone's (its index is reused, its sequence numbers are not).
func TestRemoveZone(t *testing.T) {
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, Poller: retry.PollHand})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	px := deploy(0, 2)
	keep := retry.Zone{AppID: 7, ZoneID: 7}
	must(t, c.ApplyRoute(testZone, px, seedConf))
	must(t, c.ApplyRoute(keep, deploy(1, 1), seedConf))
	tr.SetLog(true)
	var seqs []uint64
	for _, req := range []*retry.Request{
		{Command: wire.CmdGet, Key: []byte("a")},
		{Command: wire.CmdBatchGet, Keys: [][]byte{[]byte("b"), []byte("c")}},
		{Command: wire.CmdReplace, Key: []byte("w"), Value: []byte("v")},
	} {
		seq, err := c.Send(testZone, req)
		must(t, err)
		seqs = append(seqs, seq)
	}
	sent := tr.Sent()
	must(t, c.RemoveZone(testZone))
	want := map[uint64]int32{seqs[0]: retry.ResultReadRetryTimeout, seqs[1]: retry.ResultReadRetryTimeout, seqs[2]: retry.ResultWaitRspTimeout}
	for range 3 {
		rsp, ok := c.RecvResponse()
		if !ok {
			t.Fatal("a request of the removed zone got no final result")
		}
		if w, found := want[rsp.Seq()]; !found || rsp.Result() != w || rsp.Zone() != testZone {
			t.Fatalf("seq %d: result %d zone %v, want %d", rsp.Seq(), rsp.Result(), rsp.Zone(), w)
		}
		delete(want, rsp.Seq())
	}
	if _, ok := c.RecvResponse(); ok {
		t.Fatal("a fourth response")
	}
	if _, err := c.Stats(testZone); !errors.Is(err, retry.ErrUnknownZone) {
		t.Fatalf("Stats of a removed zone: %v", err)
	}
	if zs := c.Zones(); len(zs) != 1 || zs[0] != keep {
		t.Fatalf("zones %v", zs)
	}
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet}); !errors.Is(err, retry.ErrUnknownZone) {
		t.Fatalf("Send to a removed zone: %v", err)
	}
	if err := c.RemoveZone(testZone); !errors.Is(err, retry.ErrUnknownZone) {
		t.Fatalf("second RemoveZone: %v", err)
	}
	if tr.Proxies() != 1 {
		t.Fatalf("%d proxies open, want the other zone's 1", tr.Proxies())
	}
	// Applied again: a new zone in the old one's place. Its first request
	// goes to a silent proxy; the removed zone's first request's answer
	// arrives from that proxy and must not be taken for it.
	must(t, c.ApplyRoute(testZone, px, seedConf))
	seq, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("a")})
	must(t, err)
	if seq>>40 != seqs[0]>>40 {
		t.Fatalf("the zone did not take its old index: seq %x, old %x", seq, seqs[0])
	}
	tr.Replay(sent[0], retrytest.Serve(retrytest.Data{}, 0))
	if _, ok := c.RecvResponse(); ok {
		t.Fatal("the removed zone's answer was delivered")
	}
	if st, _ := c.Stats(testZone); st.DuplicatesDropped != 1 || st.Contexts != 1 {
		t.Fatalf("new zone's stats %+v", st)
	}
}

// TestRemoveZoneEndsDo: a Do waiting on a removed zone returns the read
// retry timeout, as if its budget had run out (SPEC R22, R9).
func TestRemoveZoneEndsDo(t *testing.T) {
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(time.Hour, time.Hour)
	must(t, c.ApplyRoute(testZone, deploy(0, 2), seedConf))
	done := make(chan error)
	go func() {
		done <- c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("a")}, nil)
	}()
	for {
		if n, _ := c.InFlight(testZone); n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	must(t, c.RemoveZone(testZone))
	if err := <-done; !errors.Is(err, retry.ErrReadRetryTimeout) {
		t.Fatalf("Do: %v", err)
	}
}

// TestMaxZones: a client serves at most Config.MaxZones zones at once; a
// removed zone makes room (SPEC R22).
func TestMaxZones(t *testing.T) {
	c, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Logger: quiet, MaxZones: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := deploy(0, 1)
	for i := range uint32(3) {
		must(t, c.ApplyRoute(retry.Zone{ZoneID: i}, px, ""))
	}
	err = c.ApplyRoute(retry.Zone{ZoneID: 3}, px, "")
	if !errors.Is(err, retry.ErrTooManyZones) || !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("fourth zone: %v", err)
	}
	must(t, c.ApplyRoute(retry.Zone{ZoneID: 0}, deploy(1, 1), "")) // an update of a known zone is not a new zone
	must(t, c.RemoveZone(retry.Zone{ZoneID: 1}))
	must(t, c.ApplyRoute(retry.Zone{ZoneID: 3}, px, ""))
	if _, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), MaxZones: retry.MaxZones + 1}); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("MaxZones above the maximum: %v", err)
	}
}

// TestAddZoneAmortised: adding a zone costs the same whether the client
// serves 1,000 zones or 20,000 (SPEC R22; issue 23's S17: each add copied
// the whole zone list, and 50,000 more zones took over half a minute). The
// bytes allocated by the last 1,000 adds are compared with the first
// 1,000's: a copy per add would make them over ten times as many.
func TestAddZoneAmortised(t *testing.T) {
	c, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Logger: quiet, Shards: 1, NoRetryBudget: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := deploy(0, 1)
	add := func(from, to int) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := from; i < to; i++ {
			must(t, c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: uint32(i)}, px, ""))
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	first := add(0, 1000)
	add(1000, 19_000)
	last := add(19_000, 20_000)
	t.Logf("bytes allocated per zone added: first 1,000 %d, last 1,000 %d", first/1000, last/1000)
	if last > 2*first {
		t.Fatalf("adding zones 19,000-20,000 allocated %d bytes, zones 0-1,000 %d: not amortised O(1)", last, first)
	}
}

// hookHandler is a slog.Handler that calls fn for each record whose message
// is msg, from inside the logging call.
type hookHandler struct {
	msg string
	fn  func()
}

func (h hookHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h hookHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.fn()
	}
	return nil
}
func (h hookHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h hookHandler) WithGroup(string) slog.Handler      { return h }

// TestNewZoneHasConfWhenVisible: a zone added by ApplyRoute is visible to
// Send only with its conf:// applied, so its first reads have read retry
// (SPEC R5, R22). The hook sends a read from inside ApplyRoute, while the
// conf is being applied (MsgConfClamped is logged before it is stored): the
// zone must not be found yet. Before the fix the zone was published first
// and that read went out without read retry (ReadsWithoutContext 1) — the
// race TestRouteUpdatesUnderLoad met as a read of a just-added zone ending
// with ErrWaitTimeout when the zone was removed.
func TestNewZoneHasConfWhenVisible(t *testing.T) {
	tr := retrytest.NewTransport()
	tr.SetDefaultHandler(retrytest.Serve(retrytest.Data{}, 0))
	var c *retry.Client
	var sendErr error
	sent := false
	zone := retry.Zone{AppID: 9, ZoneID: 9}
	log := slog.New(hookHandler{msg: retry.MsgConfClamped, fn: func() {
		sent = true
		_, sendErr = c.Send(zone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	}})
	var err error
	c, err = retry.New(retry.Config{Transport: tr, Logger: log, Poller: retry.PollHand})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	// ReadRetryMaxCnt above the maximum is clamped, and logged before the
	// conf is stored.
	conf := "conf://ReadRetryCmd=7|103&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=99"
	must(t, c.ApplyRoute(zone, deploy(0, 2), conf))
	if !sent {
		t.Fatal("the clamp was not logged: the hook never ran")
	}
	if !errors.Is(sendErr, retry.ErrUnknownZone) {
		st, _ := c.Stats(zone)
		t.Fatalf("Send during ApplyRoute found the new zone before its conf: err %v, %d reads without a context", sendErr, st.ReadsWithoutContext)
	}
	// Once ApplyRoute returned, a read has read retry.
	if _, err := c.Send(zone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stats(zone); st.ReadsWithoutContext != 0 || st.ReadsSent != 1 {
		t.Fatalf("stats %+v: want 1 read, with a context", st)
	}
}
