package retry_test

// Memory follows load (SPEC R15): every buffer the client keeps between
// requests has a bound, and a buffer grown for one outsized request goes
// back to the garbage collector. One test per shrink rule BENCHMARKS.md
// states: the rebuild buffer (TestR15OutsizedRequestBufferNotKept), the
// per-record flags, the made-results queue, the held-answer buffers and
// Do's Result buffers.

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

// TestR15RecordFlagsNotKept: an index read answered by one packet of
// 200,000 records (one flag byte each) leaves no flag buffer above 64 KiB
// behind; before round 3 the poller kept 200,000 bytes for the client's
// lifetime.
func TestR15RecordFlagsNotKept(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	f.tr.SetLog(false)
	const n = 200_000
	f.tr.SetHandler(f.px[0], func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, n)
		for pos := range uint64(n) {
			r.Record(pos, retry.ResultOK, nil, nil)
		}
		r.Send()
	})
	f.send(retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("g")})
	gs := f.poll()
	if len(gs) != 1 || len(gs[0].recs) != n || gs[0].more {
		t.Fatalf("%d responses", len(gs))
	}
	f.poll() // releases the response
	if got := retry.RetainedBufBytes(f.c); got > retry.MaxRetainedBuf {
		t.Fatalf("a %d-byte buffer is kept, want none above %d", got, retry.MaxRetainedBuf)
	}
	f.drained()
}

// TestR15FinalQueueShrinks: 5,000 requests without read retry time out in
// one poll, so 5,000 made results queue up (one is handed out per
// RecvResponse); once they are drained the queue keeps at most
// MaxRetainedFinals entries.
func TestR15FinalQueueShrinks(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	f.tr.SetLog(false)
	_ = f.c.SetReadRetryTimeout(0, 0)
	const n = 5000
	for i := range n {
		f.send(retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "k%d", i)})
	}
	f.clock.Add(5001 * ms)
	rsp, ok := f.c.RecvResponse()
	if !ok || rsp.Result() != retry.ResultWaitRspTimeout {
		t.Fatal("no wait timeout")
	}
	if got := retry.RetainedFinals(f.c); got < n-1 {
		t.Fatalf("queue of %d entries with %d results waiting", got, n-1)
	}
	if gs := f.poll(); len(gs) != n-1 {
		t.Fatalf("%d more results, want %d", len(gs), n-1)
	}
	if got := retry.RetainedFinals(f.c); got > retry.MaxRetainedFinals {
		t.Fatalf("drained queue keeps %d entries, want at most %d", got, retry.MaxRetainedFinals)
	}
	f.drained()
}

// bigValue is a record value well above the retained-buffer bound.
var bigValue = bytes.Repeat([]byte("v"), 200_000)

// TestR15HeldBuffersNotKept: a held error packet and held batch records of
// 200 KB each (SPEC R8, R8b) go back to the garbage collector with their
// request; the poller keeps only emptied held answers with small buffers.
func TestR15HeldBuffersNotKept(t *testing.T) {
	t.Run("error packet", func(t *testing.T) {
		f := newFixture(t, hostProxies("a", "b"), confWith(1, "-7953"))
		f.tr.SetHandler(f.px[1], func(req wire.Request, r *retrytest.Replier) {
			r.Start(req, retry.ResultProxySwiftTimeout, false, 0, 0)
			r.Record(0, retry.ResultProxySwiftTimeout, req.Key(), bigValue)
			r.Send()
		})
		start := f.clock.Now()
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		// a is silent; the re-send at 1000 ms goes to b, whose error is held
		// until 3000 ms.
		if gs := f.step(3100*ms, start); len(gs) != 1 || gs[0].result != retry.ResultProxySwiftTimeout || gs[0].at != 3000*ms {
			t.Fatalf("want the held error at 3000 ms, got %+v", gs)
		}
		f.poll()
		if got := retry.RetainedBufBytes(f.c); got > retry.MaxRetainedBuf {
			t.Fatalf("a %d-byte buffer is kept, want none above %d", got, retry.MaxRetainedBuf)
		}
		f.drained()
	})
	t.Run("batch records", func(t *testing.T) {
		f := newFixture(t, hostProxies("a", "b"), confWith(1, "-7953"))
		for _, p := range f.px {
			f.tr.SetHandler(p, func(req wire.Request, r *retrytest.Replier) {
				r.Start(req, retry.ResultOK, false, 0, 0)
				for it := req.Keys(); ; {
					idx, key, ok := it.Next()
					if !ok {
						break
					}
					r.Record(uint64(idx), retry.ResultProxySwiftTimeout, key, bigValue)
				}
				r.Send()
			})
		}
		f.send(batchReq(1))
		gs := f.poll()
		if fin := finals(gs); len(fin) != 1 || fin[0].result != retry.ResultOK || len(fin[0].recs) != 4 {
			t.Fatalf("want the four failed records in one OK final, got %+v", fin)
		}
		f.poll()
		if got := retry.RetainedBufBytes(f.c); got > retry.MaxRetainedBuf {
			t.Fatalf("a %d-byte buffer is kept, want none above %d", got, retry.MaxRetainedBuf)
		}
		f.drained()
	})
}

// TestR15DoResultBuffersNotKept: Do's waiters keep their Result's buffers
// for the next call, but not buffers grown past 64 KiB by an outsized
// answer — whether the waiter kept the answer (res nil) or got the
// caller's grown Result back in the swap (SPEC R15, R20).
func TestR15DoResultBuffersNotKept(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := servingClient(t, 0, "a")
	defer c.Close()
	tr.SetHandler(px[0], func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, 0)
		r.Record(0, retry.ResultOK, req.Key(), bigValue)
		r.Send()
	})
	big := retry.Request{Command: wire.CmdGet, Key: []byte("big")}
	if err := c.Do(context.Background(), testZone, &big, nil); err != nil {
		t.Fatal(err)
	}
	if got := retry.WaiterBufBytes(c); got > retry.MaxRetainedBuf {
		t.Fatalf("res nil: a waiter keeps %d bytes, want at most %d", got, retry.MaxRetainedBuf)
	}
	var res retry.Result
	if err := c.Do(context.Background(), testZone, &big, &res); err != nil || res.Len() != 1 || len(res.Record(0).Value) != len(bigValue) {
		t.Fatalf("outsized read: %v, %d records", err, res.Len())
	}
	tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	if err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res); err != nil {
		t.Fatal(err)
	}
	if got := retry.WaiterBufBytes(c); got > retry.MaxRetainedBuf {
		t.Fatalf("swapped Result: a waiter keeps %d bytes, want at most %d", got, retry.MaxRetainedBuf)
	}
	// Many small records grow the record table instead (32 bytes each).
	tr.SetHandler(px[0], func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, 10_000)
		for pos := range uint64(10_000) {
			r.Record(pos, retry.ResultOK, nil, nil)
		}
		r.Send()
	})
	if err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("g")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := retry.WaiterBufBytes(c); got > retry.MaxRetainedBuf {
		t.Fatalf("10,000 records: a waiter keeps %d bytes, want at most %d", got, retry.MaxRetainedBuf)
	}
}

// TestR15OutsizedRequestBufferNotKept: a read with a 1 MiB key whose first
// attempt is lost is re-sent, then 10,000 ordinary reads follow; no buffer
// above the largest pooled size class is kept afterwards (SPEC R15: memory
// follows load). Before round 2 the re-send buffer kept 1,056,768 bytes for
// the client's lifetime.
func TestR15OutsizedRequestBufferNotKept(t *testing.T) {
	px := hostProxies("a", "b")
	f := newFixture(t, px, seedConf)
	f.tr.SetLog(false)
	start := f.clock.Now()
	big := bytes.Repeat([]byte("k"), 1<<20)
	f.send(retry.Request{Command: wire.CmdGet, Key: big})
	f.tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	if gs := f.step(600*ms, start); len(gs) != 1 || gs[0].result != retry.ResultOK {
		t.Fatalf("the outsized read: %+v", gs)
	}
	for i := range 10_000 {
		f.send(retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "user:%d", i)})
		f.poll()
	}
	if n := retry.RetainedBufBytes(f.c); n > retry.MaxRetainedBuf {
		t.Fatalf("a %d-byte buffer is kept, want none above %d", n, retry.MaxRetainedBuf)
	}
	f.drained()
}

// TestR15IdleZonesAreCheap: 1,000 zones with a conf:// element and no
// traffic cost at most 16 KiB each (SPEC R15 round 2: memory follows the
// contexts in flight, not the cap; before round 2 each cost about 300 KB,
// its timing wheel sized for two million timers when the zone was added).
// The per-zone figure goes into the R15 formula of BENCHMARKS.md.
func TestR15IdleZonesAreCheap(t *testing.T) {
	const zones = 1000
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := hostProxies("a", "b")
	_ = c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: 0}, px, seedConf) // proxies and the registries' first growth
	before := heapInUse()
	for i := 1; i <= zones; i++ {
		if err := c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: uint32(i)}, px, seedConf); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(heapInUse()-before) / zones
	t.Logf("idle zone: %.0f bytes", per)
	if per > 16<<10 {
		t.Fatalf("an idle zone costs %.0f bytes, want at most 16 KiB", per)
	}
}

// heapInUse returns the live heap bytes after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
