package tcp_test

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// countingServer reads and drops everything, counting the frames' bytes, so
// that a send benchmark can wait for the last byte.
type countingServer struct {
	*echoServer
	bytes atomic.Int64
}

func newCountingServer(b *testing.B) *countingServer {
	s := &countingServer{echoServer: newEchoServer(b)}
	s.onFrame = func(f []byte) ([]byte, bool) {
		s.bytes.Add(int64(wire.StreamPrefixSize + len(f)))
		return nil, false
	}
	return s
}

func (s *countingServer) waitBytes(b *testing.B, n int64) {
	for deadline := time.Now().Add(30 * time.Second); s.bytes.Load() < n; {
		if time.Now().After(deadline) {
			b.Fatalf("server got %d bytes of %d", s.bytes.Load(), n)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// BenchmarkSend sends b.N frames of 64 bytes from parallel goroutines to one
// loopback proxy and waits until the server has read them all: through the
// Transport (per-connection buffer and writer goroutine), and through the
// baseline of a mutex-guarded conn.Write per frame. frames/write shows the
// batching.
func BenchmarkSend(b *testing.B) {
	frame := make([]byte, 64)
	per := int64(wire.StreamPrefixSize + len(frame))
	b.Run("transport", func(b *testing.B) {
		s := newCountingServer(b)
		s.start()
		addrs := &sync.Map{}
		addrs.Store(retry.Proxy{Host: "h", Port: 1}, s.addr())
		tr := newTransport(b, tcp.Config{}, addrs)
		openDialed(b, tr, 1, retry.Proxy{Host: "h", Port: 1})
		var sent atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for tr.Send(1, frame) != nil {
					time.Sleep(10 * time.Microsecond)
				}
				sent.Add(1)
			}
		})
		s.waitBytes(b, sent.Load()*per)
		b.StopTimer()
		st := tr.Stats()
		b.ReportMetric(float64(st.FramesSent)/float64(max(st.Writes, 1)), "frames/write")
	})
	b.Run("mutex-write", func(b *testing.B) {
		s := newCountingServer(b)
		s.start()
		nc, err := net.Dial("tcp", s.addr())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		var mu sync.Mutex
		var sent atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var buf []byte
			for pb.Next() {
				buf, _ = wire.AppendStreamFrame(buf[:0], frame)
				mu.Lock()
				_, err := nc.Write(buf)
				mu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
				sent.Add(1)
			}
		})
		s.waitBytes(b, sent.Load()*per)
		b.StopTimer()
		b.ReportMetric(1, "frames/write")
	})
}

// BenchmarkRoundTrip is one frame to a loopback echo server and back, one
// at a time: through the Transport (Send, Wait, Recv) and through a bare
// connection (write, then wire.Reader). ns/op is the round trip.
func BenchmarkRoundTrip(b *testing.B) {
	frame := make([]byte, 100)
	b.Run("transport", func(b *testing.B) {
		s := newEchoServer(b).start()
		addrs := &sync.Map{}
		addrs.Store(retry.Proxy{Host: "h", Port: 1}, s.addr())
		tr := newTransport(b, tcp.Config{}, addrs)
		openDialed(b, tr, 1, retry.Proxy{Host: "h", Port: 1})
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := tr.Send(1, frame); err != nil {
				b.Fatal(err)
			}
			for {
				if f, _, ok := tr.Recv(); ok {
					if len(f) != len(frame) {
						b.Fatal("short echo")
					}
					break
				}
				tr.Wait(time.Second)
			}
		}
	})
	b.Run("bare-conn", func(b *testing.B) {
		s := newEchoServer(b).start()
		nc, err := net.Dial("tcp", s.addr())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		r := wire.NewReader(nc, 0)
		out, _ := wire.AppendStreamFrame(nil, frame)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := nc.Write(out); err != nil {
				b.Fatal(err)
			}
			f, err := r.Next()
			if err != nil || len(f) != len(frame) {
				b.Fatal("short echo", err)
			}
		}
	})
}
