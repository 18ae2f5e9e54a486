package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// fastBackoff reconnects within a few milliseconds, for tests.
var fastBackoff = backoff.Constant{Wait: 2 * time.Millisecond}

// newTransport makes a transport whose Resolve maps proxies through addrs
// (logical proxy -> real address), as a simulator does.
func newTransport(t testing.TB, cfg tcp.Config, addrs *sync.Map) *tcp.Transport {
	t.Helper()
	if addrs != nil {
		cfg.Resolve = func(p retry.Proxy) (string, error) {
			a, ok := addrs.Load(p)
			if !ok {
				return "", fmt.Errorf("no address for %v", p)
			}
			return a.(string), nil
		}
	}
	if cfg.Backoff == nil {
		cfg.Backoff = fastBackoff
	}
	cfg.Logger = quiet
	tr, err := tcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// recvN receives n frames (copies), waiting up to d in all.
func recvN(t testing.TB, tr *tcp.Transport, n int, d time.Duration) (frames [][]byte, from []retry.ProxyID) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(frames) < n {
		f, id, ok := tr.Recv()
		if ok {
			frames = append(frames, bytes.Clone(f))
			from = append(from, id)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d frames of %d", len(frames), n)
		}
		tr.Wait(10 * time.Millisecond)
	}
	return frames, from
}

// openDialed opens a proxy and waits for its first connection attempt, so
// that the test's next Send finds it connected (Open itself never waits).
func openDialed(t testing.TB, tr *tcp.Transport, id retry.ProxyID, p retry.Proxy) {
	t.Helper()
	if err := tr.Open(id, p); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.WaitDialed(ctx); err != nil {
		t.Fatalf("first dial of %v: %v", p, err)
	}
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEchoManySenders: frames from many goroutines to two proxies all come
// back, intact, each proxy's in the order they were sent, and the writer
// batches them (fewer writes than frames).
func TestEchoManySenders(t *testing.T) {
	a, b := newEchoServer(t).start(), newEchoServer(t).start()
	addrs := &sync.Map{}
	pa, pb := retry.Proxy{Host: "host-1", Port: 1}, retry.Proxy{Host: "host-2", Port: 1}
	addrs.Store(pa, a.addr())
	addrs.Store(pb, b.addr())
	tr := newTransport(t, tcp.Config{}, addrs)
	openDialed(t, tr, 1, pa)
	openDialed(t, tr, 2, pb)
	if !tr.Available(1) || !tr.Available(2) {
		t.Fatal("proxies not available after Open")
	}
	const senders, perSender = 4, 1500
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1024)
			for i := 0; i < perSender; i++ {
				n := 16 + (i*131+s*17)%1000
				binary.LittleEndian.PutUint32(buf, uint32(s))
				binary.LittleEndian.PutUint32(buf[4:], uint32(i))
				binary.LittleEndian.PutUint32(buf[8:], uint32(n))
				for j := 12; j < n; j++ {
					buf[j] = byte(i ^ j)
				}
				for {
					err := tr.Send(retry.ProxyID(1+i%2), buf[:n])
					if err == nil {
						break
					}
					if !errors.Is(err, tcp.ErrWriteQueueFull) {
						t.Errorf("Send: %v", err)
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	frames, from := recvN(t, tr, senders*perSender, 20*time.Second)
	wg.Wait()
	next := map[[2]uint32]uint32{}
	for k, f := range frames {
		s, i, n := binary.LittleEndian.Uint32(f), binary.LittleEndian.Uint32(f[4:]), binary.LittleEndian.Uint32(f[8:])
		if int(n) != len(f) {
			t.Fatalf("frame %d: length %d, says %d", k, len(f), n)
		}
		for j := 12; j < len(f); j++ {
			if f[j] != byte(int(i)^j) {
				t.Fatalf("frame %d corrupted at %d", k, j)
			}
		}
		if want := retry.ProxyID(1 + i%2); from[k] != want {
			t.Fatalf("frame from sender %d #%d came from proxy %d, want %d", s, i, from[k], want)
		}
		key := [2]uint32{s, i % 2}
		if _, seen := next[key]; !seen {
			next[key] = i % 2
		}
		if i != next[key] {
			t.Fatalf("sender %d proxy %d: frame %d after %d", s, i%2, i, next[key])
		}
		next[key] = i + 2
	}
	st := tr.Stats()
	if st.FramesSent != senders*perSender || st.FramesRecv != senders*perSender || st.Connects != 2 {
		t.Fatalf("stats %+v", st)
	}
	if st.Writes >= st.FramesSent { // batching: many frames per write

		t.Fatalf("%d writes for %d frames", st.Writes, st.FramesSent)
	}
	if _, _, ok := tr.Recv(); ok {
		t.Fatal("extra frame")
	}
}

// TestServerClosesMidStream: a server that dies in the middle of a frame.
// The partial frame is never delivered, the proxy turns unavailable, the
// transport reconnects with backoff, and traffic flows again.
func TestServerClosesMidStream(t *testing.T) {
	s := newEchoServer(t)
	s.onFrame = func(f []byte) ([]byte, bool) {
		out, _ := wire.AppendStreamFrame(nil, f)
		if string(f) == "cut" {
			return out[:len(out)-1], true
		}
		return out, false
	}
	s.start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{}, addrs)
	openDialed(t, tr, 1, p)
	if err := tr.Send(1, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if f, _ := recvN(t, tr, 1, 5*time.Second); string(f[0]) != "a" {
		t.Fatalf("got %q", f[0])
	}
	if err := tr.Send(1, []byte("cut")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "disconnect", func() bool { return tr.Stats().Disconnects == 1 })
	eventually(t, "reconnect", func() bool { return tr.Available(1) && tr.Stats().Connects == 2 })
	if err := tr.Send(1, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if f, _ := recvN(t, tr, 1, 5*time.Second); string(f[0]) != "b" {
		t.Fatalf("got %q after reconnect", f[0])
	}
}

// TestRefusedConnection: a proxy whose address refuses connections is
// unavailable, Send fails with retry.ErrUnavailable, and once the address
// answers the transport connects by itself.
func TestRefusedConnection(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 9}
	addrs.Store(p, deadAddr)
	tr := newTransport(t, tcp.Config{}, addrs)
	openDialed(t, tr, 1, p) // Open does not dial: the refusal is the reader's to log and retry
	if tr.Available(1) {
		t.Fatal("refusing proxy reported available")
	}
	if err := tr.Send(1, []byte("x")); !errors.Is(err, retry.ErrUnavailable) {
		t.Fatalf("Send to a refusing proxy: %v", err)
	}
	eventually(t, "dial failures", func() bool { return tr.Stats().DialFailures >= 3 })

	live := newEchoServer(t).start()
	addrs.Store(p, live.addr())
	eventually(t, "connection", func() bool { return tr.Available(1) })
	if err := tr.Send(1, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if f, _ := recvN(t, tr, 1, 5*time.Second); string(f[0]) != "hello" {
		t.Fatalf("got %q", f[0])
	}
}

// TestStalledPeer: a proxy that stops reading fills its write buffer; Send
// then fails with ErrWriteQueueFull (an unavailability) instead of
// blocking, Available turns false, and Close still returns.
func TestStalledPeer(t *testing.T) {
	s := newEchoServer(t)
	s.noRead = true
	s.start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{MaxPending: 64 << 10}, addrs)
	openDialed(t, tr, 1, p)
	frame := make([]byte, 16<<10)
	// The kernel's socket buffers take some megabytes first; after that the
	// writer blocks for good and the proxy stays unavailable.
	var full error
	for i := 0; i < 1<<16 && (full == nil || tr.Available(1)); i++ {
		start := time.Now()
		if err := tr.Send(1, frame); err != nil {
			full = err
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Send blocked %v", d)
		}
		if full != nil {
			time.Sleep(time.Millisecond)
		}
	}
	if !errors.Is(full, tcp.ErrWriteQueueFull) || !errors.Is(full, retry.ErrUnavailable) {
		t.Fatalf("Send to a stalled peer: %v", full)
	}
	if tr.Available(1) {
		t.Fatal("stalled proxy still available")
	}
	if tr.Stats().SendQueueFull == 0 {
		t.Fatal("SendQueueFull not counted")
	}
}

// TestOversizeFrame: a length prefix above MaxFrameSize breaks the
// connection (the stream cannot be resynchronised); nothing is delivered
// and the transport reconnects.
func TestOversizeFrame(t *testing.T) {
	s := newEchoServer(t).start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{MaxFrameSize: 1024}, addrs)
	openDialed(t, tr, 1, p)
	if err := tr.Send(1, make([]byte, 2000)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "disconnect", func() bool { return tr.Stats().Disconnects >= 1 })
	eventually(t, "reconnect", func() bool { return tr.Available(1) })
	if err := tr.Send(1, []byte("small")); err != nil {
		t.Fatal(err)
	}
	if f, _ := recvN(t, tr, 1, 5*time.Second); string(f[0]) != "small" {
		t.Fatalf("got %q", f[0])
	}
	if err := tr.Send(1, make([]byte, wire.MaxFrameSize+1)); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("Send of an oversize frame: %v", err)
	}
}

// TestLargeFramesSmallRing: frames larger than half of the receive ring
// take the heap path and keep their order with small frames.
func TestLargeFramesSmallRing(t *testing.T) {
	s := newEchoServer(t).start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{RecvBuffer: 4 << 10}, addrs)
	openDialed(t, tr, 1, p)
	sizes := []int{10, 3000, 20, 5000, 2100, 7, 3000, 3000, 100}
	for i, n := range sizes {
		f := bytes.Repeat([]byte{byte(i)}, n)
		if err := tr.Send(1, f); err != nil {
			t.Fatal(err)
		}
	}
	frames, _ := recvN(t, tr, len(sizes), 5*time.Second)
	for i, f := range frames {
		if len(f) != sizes[i] || f[0] != byte(i) || f[len(f)-1] != byte(i) {
			t.Fatalf("frame %d: %d bytes starting %d, want %d bytes of %d", i, len(f), f[0], sizes[i], i)
		}
	}
}

// TestWait: Wait sleeps until a frame arrives, not a full timeout, and
// returns false after the timeout when none does.
func TestWait(t *testing.T) {
	s := newEchoServer(t).start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{}, addrs)
	openDialed(t, tr, 1, p)
	if tr.Wait(5 * time.Millisecond) {
		t.Fatal("Wait reported a frame on an idle transport")
	}
	if tr.Wait(0) {
		t.Fatal("Wait(0) reported a frame")
	}
	var woke atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		woke.Store(true)
		_ = tr.Send(1, []byte("ping"))
	}()
	if !tr.Wait(30 * time.Second) {
		t.Fatal("Wait returned without a frame")
	}
	if !woke.Load() {
		t.Fatal("Wait returned before the frame was sent")
	}
	if f, _, ok := tr.Recv(); !ok || string(f) != "ping" {
		t.Fatalf("Recv after Wait: %q %v", f, ok)
	}
}

// TestOpenAndErrors covers the API's edges: bad config, unknown proxies, a
// conflicting Open, and everything after Close.
func TestOpenAndErrors(t *testing.T) {
	if _, err := tcp.New(tcp.Config{RecvBuffer: -1}); !errors.Is(err, tcp.ErrInvalidConfig) {
		t.Fatalf("New with a negative size: %v", err)
	}
	s := newEchoServer(t).start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{}, addrs)
	if err := tr.Send(7, []byte("x")); !errors.Is(err, tcp.ErrUnknownProxy) || !errors.Is(err, retry.ErrUnavailable) {
		t.Fatalf("Send to an unknown proxy: %v", err)
	}
	if tr.Available(7) {
		t.Fatal("unknown proxy available")
	}
	openDialed(t, tr, 1, p)
	if err := tr.Open(1, p); err != nil {
		t.Fatalf("Open again with the same endpoint: %v", err)
	}
	if err := tr.Open(1, retry.Proxy{Host: "other", Port: 1}); !errors.Is(err, tcp.ErrProxyConflict) {
		t.Fatalf("Open with another endpoint: %v", err)
	}
	openDialed(t, tr, 2, retry.Proxy{Host: "nowhere", Port: 1}) // resolved and dialled on the reader
	if tr.Available(2) || tr.Stats().DialFailures == 0 {
		t.Fatalf("unresolvable proxy: available %v, %d dial failures", tr.Available(2), tr.Stats().DialFailures)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(1, []byte("x")); !errors.Is(err, retry.ErrUnavailable) {
		t.Fatalf("Send after Close: %v", err)
	}
	if err := tr.Open(3, p); !errors.Is(err, tcp.ErrClosed) {
		t.Fatalf("Open after Close: %v", err)
	}
	if _, _, ok := tr.Recv(); ok {
		t.Fatal("Recv after Close returned a frame")
	}
	if tr.Wait(time.Second) {
		t.Fatal("Wait after Close returned true")
	}
}

// TestCloseDuringDial: a hanging first dial runs on the proxy's reader,
// not in Open (which returns at once, the proxy unavailable), and Close
// cancels it at once instead of waiting out DialTimeout.
func TestCloseDuringDial(t *testing.T) {
	dialing := make(chan struct{})
	tr, err := tcp.New(tcp.Config{
		DialTimeout: time.Minute,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			close(dialing)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Open(1, retry.Proxy{Host: "127.0.0.1", Port: 9}); err != nil {
		t.Fatal(err)
	}
	<-dialing
	if tr.Available(1) {
		t.Fatal("a proxy whose first dial hangs is available")
	}
	closed := make(chan struct{})
	go func() { _ = tr.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // far below the minute a held lock would cost
		t.Fatal("Close waited for the dial")
	}
	if err := tr.WaitDialed(context.Background()); err != nil {
		t.Fatalf("WaitDialed after Close: %v", err)
	}
}
