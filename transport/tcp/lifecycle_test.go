package tcp_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// newGetServer starts a proxy that answers every request with one record:
// the request's key and "value-of-" + key.
func newGetServer(t testing.TB) *echoServer {
	s := newEchoServer(t)
	s.onFrame = func(f []byte) ([]byte, bool) {
		req, err := wire.ParseRequest(f)
		if err != nil {
			return nil, true
		}
		var rb wire.ResponseBuilder
		rb.Start(nil, wire.ResponseHeader{Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), Attempt: req.Attempt()})
		_ = rb.AddRecord(0, 0, req.Key(), append([]byte("value-of-"), req.Key()...))
		out, _ := wire.AppendStreamFrame(nil, rb.Frame())
		return out, false
	}
	return s.start()
}

// TestReleaseFence: Release closes the proxy's connection and stops its
// goroutines, and a frame it received that Recv had not returned is
// dropped, so the proxy opened next under the same id never passes it on
// (SPEC R22).
func TestReleaseFence(t *testing.T) {
	a, b := newEchoServer(t).start(), newEchoServer(t).start()
	addrs := &sync.Map{}
	pa, pb := retry.Proxy{Host: "a", Port: 1}, retry.Proxy{Host: "b", Port: 1}
	addrs.Store(pa, a.addr())
	addrs.Store(pb, b.addr())
	tr := newTransport(t, tcp.Config{}, addrs)
	before := runtime.NumGoroutine()
	openDialed(t, tr, 1, pa)
	if err := tr.Send(1, []byte("from a")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's echo in the ring", func() bool { return tr.Stats().FramesRecv == 1 })
	tr.Release(1)
	if tr.Available(1) || tr.Send(1, []byte("x")) == nil {
		t.Fatal("a released proxy is still usable")
	}
	eventually(t, "a's goroutines to return", func() bool { return runtime.NumGoroutine() <= before })
	openDialed(t, tr, 1, pb)
	if err := tr.Send(1, []byte("from b")); err != nil {
		t.Fatal(err)
	}
	frames, from := recvN(t, tr, 1, 5*time.Second)
	if string(frames[0]) != "from b" || from[0] != 1 {
		t.Fatalf("Recv returned %q from %d, want b's frame", frames[0], from[0])
	}
	if st := tr.Stats(); st.FramesDropped != 1 || st.Released != 1 || st.Proxies != 1 || st.Conns != 1 {
		t.Fatalf("stats %+v", st)
	}
	tr.Release(7) // unknown: nothing happens
}

// TestRedeployReleasesProxies: issue 23's S16 input over real connections
// on loopback, bounded: an 8-proxy zone redeployed 20 times at new
// addresses, each deploy read from, the old proxies' servers stopped once
// the deploy is served. Before SPEC R22 the transport kept every proxy it
// was ever given, with its two goroutines and ring, and redialled the
// stopped ones for ever; now it holds the 8 the route names, goroutines
// return to their level after the second deploy, and no dial goes to an
// endpoint no route names.
func TestRedeployReleasesProxies(t *testing.T) {
	addrs := &sync.Map{}
	tr := newTransport(t, tcp.Config{}, addrs)
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	zone := retry.Zone{AppID: 1, ZoneID: 1}
	const deploys, n = 20, 8
	var old []*echoServer
	base := 0
	for k := range deploys {
		px := make([]retry.Proxy, n)
		servers := make([]*echoServer, n)
		for i := range px {
			servers[i] = newGetServer(t)
			px[i] = retry.Proxy{Host: fmt.Sprintf("d%d-h%d", k, i%2), Port: uint16(7000 + i)}
			addrs.Store(px[i], servers[i].addr())
		}
		if err := c.ApplyRoute(zone, px, "conf://ReadRetryMaxCnt=2"); err != nil {
			t.Fatalf("deploy %d: %v", k, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := tr.WaitDialed(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		var res retry.Result
		for i := range 2 * n {
			key := fmt.Sprintf("d%d-%d", k, i)
			if err := c.Do(context.Background(), zone, &retry.Request{Command: wire.CmdGet, Key: []byte(key)}, &res); err != nil {
				t.Fatalf("deploy %d read %d: %v", k, i, err)
			}
			if res.Len() != 1 || string(res.Record(0).Value) != "value-of-"+key {
				t.Fatalf("deploy %d read %d: wrong answer", k, i)
			}
		}
		// The engine releases the last deploy's proxies at its next poll
		// (their reads have ended); only then do their servers go away.
		eventually(t, fmt.Sprintf("deploy %d: only its proxies open", k), func() bool {
			st := tr.Stats()
			return st.Proxies == n && st.Conns == n
		})
		for _, s := range old {
			s.Close()
		}
		old = servers
		if k == 1 {
			base = runtime.NumGoroutine()
		}
	}
	eventually(t, "goroutines back to their level", func() bool { return runtime.NumGoroutine() <= base })
	st := tr.Stats()
	if st.Released != (deploys-1)*n || st.Connects != deploys*n || st.DialFailures != 0 || st.Disconnects != (deploys-1)*n {
		t.Fatalf("stats %+v: want %d released, %d connects, %d disconnects, no dial failure", st, (deploys-1)*n, deploys*n, (deploys-1)*n)
	}
	if ps := c.ProxyStats(); ps.Live != n {
		t.Fatalf("client proxies %+v", ps)
	}
	t.Logf("goroutines %d after the second deploy, %d after the last; transport %+v", base, runtime.NumGoroutine(), st)
}
