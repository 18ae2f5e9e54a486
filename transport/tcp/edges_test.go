package tcp_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// trickleServer accepts connections and, on each, waits idle, then
// writes stream: its first first bytes at once, the rest chunk bytes every
// gap. It keeps the connection open until the test ends (only the client
// may end it).
type trickleServer struct {
	ln           net.Listener
	stream       []byte
	idle, gap    time.Duration
	first, chunk int
	stop         chan struct{}
	wg           sync.WaitGroup
}

func newTrickleServer(t *testing.T, s *trickleServer) *trickleServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln, s.stop = ln, make(chan struct{})
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		close(s.stop)
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

// frames returns n length-prefixed frames of size bytes each.
func frames(n, size int) []byte {
	var out []byte
	for range n {
		out, _ = wire.AppendStreamFrame(out, make([]byte, size))
	}
	return out
}

func (s *trickleServer) serve() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer nc.Close()
			if !s.sleep(s.idle) {
				return
			}
			rest := s.stream
			n := min(s.first, len(rest))
			for len(rest) > 0 {
				if _, err := nc.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
				n = min(s.chunk, len(rest))
				if len(rest) > 0 && !s.sleep(s.gap) {
					return
				}
			}
			<-s.stop
		}()
	}
}

func (s *trickleServer) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-s.stop:
		return false
	}
}

// TestFrameStallDropsConnection: SPEC R22, issue 23's input. A proxy that
// sends a frame's length and then one byte every 100 ms would take about
// 100 s for its 1000-byte frame; with a 300 ms FrameTimeout the transport
// drops the connection (counted as a disconnect) and the proxy is
// unavailable, so first sends go elsewhere. Before, it stayed available
// with the connection open for as long as the trickle lasted.
func TestFrameStallDropsConnection(t *testing.T) {
	s := newTrickleServer(t, &trickleServer{stream: frames(1, 1000), first: wire.StreamPrefixSize + 1, chunk: 1, gap: 100 * time.Millisecond})
	p := retry.Proxy{Host: "h", Port: 1}
	tr := newTransport(t, tcp.Config{
		FrameTimeout: 300 * time.Millisecond,
		Backoff:      backoff.Constant{Wait: time.Hour}, // no redial within the test
		Resolve:      func(retry.Proxy) (string, error) { return s.ln.Addr().String(), nil },
	}, nil)
	openDialed(t, tr, 1, p)
	if !tr.Available(1) {
		t.Fatal("not connected")
	}
	eventually(t, "the stalled connection dropped", func() bool { return tr.Stats().Disconnects == 1 })
	if tr.Available(1) {
		t.Fatal("a proxy whose connection was dropped is available")
	}
	if err := tr.Send(1, []byte("x")); !errors.Is(err, retry.ErrUnavailable) {
		t.Fatalf("Send after the drop: %v, want retry.ErrUnavailable", err)
	}
	if st := tr.Stats(); st.FramesRecv != 0 {
		t.Fatalf("%d frames received from a proxy that never finished one", st.FramesRecv)
	}
}

// TestIdleConnectionKept: the frame deadline runs only inside a frame. A
// proxy silent for three FrameTimeouts between frames keeps its
// connection, and its next frame, sent whole, arrives.
func TestIdleConnectionKept(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s := newTrickleServer(t, &trickleServer{stream: frames(1, 64), idle: 3 * timeout, first: 68})
	tr := newTransport(t, tcp.Config{
		FrameTimeout: timeout,
		Resolve:      func(retry.Proxy) (string, error) { return s.ln.Addr().String(), nil },
	}, nil)
	openDialed(t, tr, 1, retry.Proxy{Host: "h", Port: 1})
	f, _ := recvN(t, tr, 1, 10*time.Second)
	if len(f[0]) != 64 {
		t.Fatalf("frame of %d bytes, want 64", len(f[0]))
	}
	if st := tr.Stats(); st.Disconnects != 0 || st.Connects != 1 {
		t.Fatalf("connects %d, disconnects %d: an idle connection was dropped", st.Connects, st.Disconnects)
	}
}

// TestSteadyStreamKept: each frame has a deadline of its own. A proxy
// that streams 300 frames of 10 bytes (14 with the prefix) for about three
// FrameTimeouts, one write a millisecond, each write ending 2 bytes into
// the next frame so that no Read ends between frames, keeps its
// connection, and every frame arrives.
func TestSteadyStreamKept(t *testing.T) {
	const timeout, n, size = 100 * time.Millisecond, 300, wire.StreamPrefixSize + 10
	s := newTrickleServer(t, &trickleServer{stream: frames(n, 10), first: size + 2, chunk: size, gap: time.Millisecond})
	tr := newTransport(t, tcp.Config{
		FrameTimeout: timeout,
		Resolve:      func(retry.Proxy) (string, error) { return s.ln.Addr().String(), nil },
	}, nil)
	openDialed(t, tr, 1, retry.Proxy{Host: "h", Port: 1})
	recvN(t, tr, n, 30*time.Second)
	if st := tr.Stats(); st.Disconnects != 0 || st.Connects != 1 {
		t.Fatalf("connects %d, disconnects %d: a steady stream was dropped", st.Connects, st.Disconnects)
	}
}

// TestApplyRouteNeverWaitsOnDial: SPEC R22, issue 23's input S19. A route
// update naming 5 proxies whose dials hang (listeners on loopback whose
// accept queues are full, so the kernel drops the SYNs) returns without
// waiting for any of them: the dials run on the transport's own
// goroutines, and the proxies stay unavailable until connected. With a
// one-minute DialTimeout, the old inline first dial held ApplyRoute for
// five minutes; the bound below (20 s) is loose for a loaded machine.
func TestApplyRouteNeverWaitsOnDial(t *testing.T) {
	const proxies = 5
	addrs := &sync.Map{}
	route := make([]retry.Proxy, proxies)
	for i := range route {
		route[i] = retry.Proxy{Host: "dark", Port: uint16(i + 1)}
		addrs.Store(route[i], blackHole(t))
	}
	tr := newTransport(t, tcp.Config{DialTimeout: time.Minute, Backoff: backoff.Constant{Wait: time.Hour}}, addrs)
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	applied := make(chan error, 1)
	go func() { applied <- c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: 1}, route, "") }()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ApplyRoute waited on the dials of its black-holed proxies")
	}
	for id := retry.ProxyID(1); id <= proxies; id++ {
		if tr.Available(id) {
			t.Fatalf("proxy %d available before it connected", id)
		}
	}
	if st := tr.Stats(); st.Connects != 0 {
		t.Fatalf("%d connects to black-holed proxies", st.Connects)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := tr.WaitDialed(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitDialed with every first dial hanging: %v, want the context's deadline", err)
	}
}

// blackHole returns the address of a loopback listener that never accepts
// and whose accept queue is full, so that a connection attempt to it hangs
// (the kernel drops its SYN) until the dialler gives up. It fills the queue
// by connecting until a connection attempt times out.
func blackHole(t *testing.T) string {
	t.Helper()
	ln := listenBacklog(t, 1)
	addr := ln.Addr().String()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
		_ = ln.Close()
	})
	for range 64 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return addr
			}
			t.Fatalf("filling the accept queue of %s: %v", addr, err)
		}
		held = append(held, c)
	}
	t.Skipf("the accept queue of %s did not fill (this kernel does not drop SYNs at a full backlog)", addr)
	return ""
}
