package tcp_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/readretry/readretry/wire"
)

// echoServer is a loopback server that answers each length-prefixed frame
// with the same frame, optionally transformed. It stops cleanly (goleak).
type echoServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	// onFrame, if set, decides what to write back for a frame: the bytes to
	// write (already prefixed) and whether to close the connection after.
	onFrame func(frame []byte) (out []byte, closeAfter bool)
	// discard makes the server read and drop everything.
	discard bool
	// noRead makes the server accept and never read (a stalled peer).
	noRead bool
	done   chan struct{}
	once   sync.Once
}

func newEchoServer(t testing.TB) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	t.Cleanup(s.Close)
	return s
}

func (s *echoServer) start() *echoServer {
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func (s *echoServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[nc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(nc)
	}
}

func (s *echoServer) serve(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		_ = nc.Close()
	}()
	if s.noRead {
		<-s.done
		return
	}
	if s.discard {
		_, _ = io.Copy(io.Discard, nc)
		return
	}
	r := wire.NewReader(nc, 0)
	var out []byte
	for {
		f, err := r.Next()
		if err != nil {
			return
		}
		closeAfter := false
		if s.onFrame != nil {
			var b []byte
			b, closeAfter = s.onFrame(f)
			out = append(out[:0], b...)
		} else {
			out, _ = wire.AppendStreamFrame(out[:0], f)
		}
		if _, err := nc.Write(out); err != nil {
			return
		}
		if closeAfter {
			return
		}
	}
}

// dropConns closes every open server-side connection.
func (s *echoServer) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nc := range s.conns {
		_ = nc.Close()
	}
}

// Close stops the server and waits for its goroutines.
func (s *echoServer) Close() {
	s.once.Do(func() { close(s.done) })
	err := s.ln.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		panic(err)
	}
	s.dropConns()
	s.wg.Wait()
}
