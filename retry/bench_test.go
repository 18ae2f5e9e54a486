package retry_test

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

var (
	sinkU64 uint64
	quiet   = slog.New(slog.DiscardHandler)
)

// benchClient is a client whose three proxies answer at once from
// retrytest.Data, read retry on (budgets 3 s / 6 s) or off.
func benchClient(b testing.TB, retryOn bool, perPacket int) *retry.Client {
	b.Helper()
	c, _, _ := servingClientWith(b, retry.Config{Poller: retry.PollHand}, perPacket, "a", "b", "c")
	if !retryOn {
		_ = c.SetReadRetryTimeout(0, 0)
	}
	return c
}

// servingClient is a client on the real clock, polling itself (PollSelf),
// whose proxies, one per host named, answer at once from retrytest.Data
// (index streams of 100 records, perPacket records a packet), budgets 3 s /
// 6 s.
func servingClient(t testing.TB, perPacket int, hosts ...string) (*retry.Client, *retrytest.Transport, []retry.Proxy) {
	t.Helper()
	return servingClientWith(t, retry.Config{}, perPacket, hosts...)
}

// servingClientWith is servingClient with cfg's other fields (Transport
// and Logger are the helper's).
func servingClientWith(t testing.TB, cfg retry.Config, perPacket int, hosts ...string) (*retry.Client, *retrytest.Transport, []retry.Proxy) {
	t.Helper()
	tr := retrytest.NewTransport()
	px := hostProxies(hosts...)
	for _, p := range px {
		tr.SetHandler(p, retrytest.Serve(retrytest.Data{StreamLen: 100}, perPacket))
	}
	cfg.Transport, cfg.Logger = tr, quiet
	c, err := retry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyRoute(testZone, px, seedConf); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	return c, tr, px
}

// alternate runs blocks of 256 calls of x and of y by turns for b.N
// calls in all, so that both see the same machine, and reports the time
// of x over the time of y as unit: a ratio measured within one run.
func alternate(b *testing.B, x, y func(), unit string) {
	var xT, yT time.Duration
	const block = 256
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if i%(2*block) < block {
			x()
			xT += time.Since(t0)
		} else {
			y()
			yT += time.Since(t0)
		}
	}
	if yT > 0 {
		b.ReportMetric(float64(xT)/float64(yT), unit)
	}
}

// drain polls until the request's final result and returns the records seen.
func drain(b *testing.B, c *retry.Client) int {
	n := 0
	for {
		rsp, ok := c.RecvResponse()
		if !ok {
			b.Fatal("no final response")
		}
		n += rsp.RecordCount()
		sinkU64 += rsp.AsyncID()
		if !rsp.HaveMore() {
			return n
		}
	}
}

// BenchmarkSimpleRead: one simple read, Send to answer, through the
// in-memory transport, with read retry on (a context per read, the storm
// guard recording every read) and off. "ratio" alternates blocks of both on
// two clients and reports on/off (goal ≤ 1.05, 0 allocs/op).
func BenchmarkSimpleRead(b *testing.B) {
	b.Run("ratio", func(b *testing.B) {
		on, off := benchClient(b, true, 0), benchClient(b, false, 0)
		req := retry.Request{Command: wire.CmdGet, Table: "players", Key: []byte("user:123456"), UserBuffer: make([]byte, 32)}
		read := func(c *retry.Client) func() {
			return func() {
				req.AsyncID++
				if _, err := c.Send(testZone, &req); err != nil {
					b.Fatal(err)
				}
				if drain(b, c) != 1 {
					b.Fatal("no record")
				}
			}
		}
		alternate(b, read(on), read(off), "on/off")
	})
	for _, on := range []bool{false, true} {
		name := "retry=off"
		if on {
			name = "retry=on"
		}
		b.Run(name, func(b *testing.B) {
			c := benchClient(b, on, 0)
			req := retry.Request{Command: wire.CmdGet, Table: "players", Key: []byte("user:123456"), UserBuffer: make([]byte, 32)}
			b.ReportAllocs()
			for b.Loop() {
				req.AsyncID++
				if _, err := c.Send(testZone, &req); err != nil {
					b.Fatal(err)
				}
				if drain(b, c) != 1 {
					b.Fatal("no record")
				}
			}
		})
	}
}

// BenchmarkComplexRead: a 100-key batch answered in packets of 10, read
// retry on: every packet goes through the answered-keys bitset.
func BenchmarkComplexRead(b *testing.B) {
	c := benchClient(b, true, 10)
	req := retry.Request{Command: wire.CmdBatchGet, Table: "players", Keys: batchKeys(100), UserBuffer: make([]byte, 32)}
	b.ReportAllocs()
	for b.Loop() {
		req.AsyncID++
		if _, err := c.Send(testZone, &req); err != nil {
			b.Fatal(err)
		}
		if drain(b, c) != 100 {
			b.Fatal("records missing")
		}
	}
}

// BenchmarkInFlight500k holds 500,000 simple reads in flight in one zone
// (silent proxies) and reports the footprint per context: bytes of heap
// beyond the frame and user buffer each holds, and heap objects (SPEC R15,
// §5). One op fills the zone and drops it.
func BenchmarkInFlight500k(b *testing.B) {
	const n = 500_000
	tr := retrytest.NewTransport()
	px := hostProxies("a", "b", "c")
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, Poller: retry.PollHand})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.ApplyRoute(testZone, px, seedConf); err != nil {
		b.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(time.Hour, time.Hour)
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(1_000_000+i))
	}
	user := make([]byte, 32)
	var frameBytes int
	{
		f, _ := wire.AppendKeyRequest(nil, wire.RequestHeader{Command: wire.CmdGet, AppID: 2, ZoneID: 3}, keys[0])
		frameBytes = len(f)
	}
	var before, after runtime.MemStats
	var perCtx, objs float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		req := retry.Request{Command: wire.CmdGet, UserBuffer: user}
		for i := 0; i < n; i++ {
			req.Key, req.AsyncID = keys[i], uint64(i)
			if _, err := c.Send(testZone, &req); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if st, _ := c.Stats(testZone); st.Contexts != n || st.CapHits != 0 {
			b.Fatalf("contexts %d cap hits %d", st.Contexts, st.CapHits)
		}
		perCtx = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n - float64(frameBytes+len(user))
		objs = float64(int64(after.HeapObjects)-int64(before.HeapObjects)) / n
		_ = c.Close()
		c, _ = retry.New(retry.Config{Transport: tr, Logger: quiet, Poller: retry.PollHand})
		_ = c.ApplyRoute(testZone, px, seedConf)
		_ = c.SetReadRetryTimeout(time.Hour, time.Hour)
		b.StartTimer()
	}
	b.ReportMetric(perCtx, "overhead-bytes/ctx")
	b.ReportMetric(objs, "heapobj/ctx")
	b.ReportMetric(float64(frameBytes+len(user)), "payload-bytes/ctx")
}

// BenchmarkDo: the blocking front door (SPEC R20) against the hand-driven
// Send/RecvResponse loop it replaces, in-memory transport, read retry on.
// "simple" and "hand" run the same read; "ratio" alternates blocks of both
// on two clients and reports do/hand (goal ≤ 1.5, 0 allocs/op).
func BenchmarkDo(b *testing.B) {
	simple := retry.Request{Command: wire.CmdGet, Table: "players", Key: []byte("user:123456"), UserBuffer: make([]byte, 32)}
	doOnce := func(b *testing.B, c *retry.Client, res *retry.Result, req *retry.Request, want int) {
		if err := c.Do(context.Background(), testZone, req, res); err != nil || res.Len() != want {
			b.Fatalf("Do: %v, %d records", err, res.Len())
		}
	}
	handOnce := func(b *testing.B, c *retry.Client, req *retry.Request, want int) {
		if _, err := c.Send(testZone, req); err != nil {
			b.Fatal(err)
		}
		if drain(b, c) != want {
			b.Fatal("records missing")
		}
	}
	b.Run("simple", func(b *testing.B) {
		c, _, _ := servingClient(b, 0, "a", "b", "c")
		defer c.Close()
		var res retry.Result
		b.ReportAllocs()
		for b.Loop() {
			doOnce(b, c, &res, &simple, 1)
		}
	})
	b.Run("hand", func(b *testing.B) {
		c := benchClient(b, true, 0)
		b.ReportAllocs()
		for b.Loop() {
			handOnce(b, c, &simple, 1)
		}
	})
	b.Run("batch100", func(b *testing.B) {
		c, _, _ := servingClient(b, 10, "a", "b", "c")
		defer c.Close()
		req := retry.Request{Command: wire.CmdBatchGet, Table: "players", Keys: batchKeys(100), UserBuffer: make([]byte, 32)}
		var res retry.Result
		b.ReportAllocs()
		for b.Loop() {
			doOnce(b, c, &res, &req, 100)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c, _, _ := servingClient(b, 0, "a", "b", "c")
		defer c.Close()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var res retry.Result
			req := simple
			for pb.Next() {
				if err := c.Do(context.Background(), testZone, &req, &res); err != nil || res.Len() != 1 {
					b.Errorf("Do: %v", err)
					return
				}
			}
		})
	})
	b.Run("ratio", func(b *testing.B) {
		doC, _, _ := servingClient(b, 0, "a", "b", "c")
		handC := benchClient(b, true, 0)
		defer doC.Close()
		var res retry.Result
		alternate(b, func() { doOnce(b, doC, &res, &simple, 1) }, func() { handOnce(b, handC, &simple, 1) }, "do/hand")
	})
}

// BenchmarkDoBlocked reports the memory of goroutines blocked in Do (SPEC
// R20): heap plus stack bytes per waiter with 10,000 waiting on silent
// proxies, the caller's goroutine stack included.
func BenchmarkDoBlocked(b *testing.B) {
	const n = 10_000
	var per float64
	for b.Loop() {
		c, tr := benchSilentClient(b)
		per = blockWaiters(b, c, n, func() int {
			sent := tr.Sent()
			for _, s := range sent {
				tr.Replay(s, retrytest.Serve(retrytest.Data{}, 0))
			}
			return len(sent)
		})
		_ = c.Close()
	}
	b.ReportMetric(per, "bytes/waiter")
}

// benchSilentClient is a client with one silent proxy whose clock stands
// still, so that no request times out however long the machine takes to
// start its callers: what it measures does not depend on the machine's load.
func benchSilentClient(b testing.TB) (*retry.Client, *retrytest.Transport) {
	tr := retrytest.NewTransport()
	tr.SetLog(true)
	frozen := newFakeClock()
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, Clock: frozen.Now})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.ApplyRoute(testZone, hostProxies("a"), seedConf); err != nil {
		b.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(time.Hour, time.Hour)
	return c, tr
}
