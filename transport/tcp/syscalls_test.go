package tcp_test

import (
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// TestReadCallsCounted: a proxy that answers one frame with a burst of 20
// frames in one write is read with a few Read calls, not 20 (SPEC N6):
// Stats.Reads counts the calls, so FramesRecv/Reads shows the batching;
// and a Send into an idle connection is one write call.
func TestReadCallsCounted(t *testing.T) {
	const burst = 20
	s := newEchoServer(t)
	s.onFrame = func(f []byte) ([]byte, bool) {
		var out []byte
		for i := 0; i < burst; i++ {
			out, _ = wire.AppendStreamFrame(out, f)
		}
		return out, false
	}
	s.start()
	addrs := &sync.Map{}
	p := retry.Proxy{Host: "h", Port: 1}
	addrs.Store(p, s.addr())
	tr := newTransport(t, tcp.Config{}, addrs)
	openDialed(t, tr, 1, p)
	if err := tr.Send(1, []byte("burst please")); err != nil {
		t.Fatal(err)
	}
	recvN(t, tr, burst, 10*time.Second)
	st := tr.Stats()
	if st.FramesSent != 1 || st.Writes != 1 {
		t.Fatalf("%d frames sent in %d writes, want 1 in 1", st.FramesSent, st.Writes)
	}
	// The 20 frames (under 1 KiB) arrive in one loopback segment: one Read
	// that returns them, plus the Read the reader may have parked in
	// before, and the one it parks in after.
	if st.FramesRecv != burst || st.Reads < 1 || st.Reads > 4 {
		t.Fatalf("%d frames received in %d read calls, want %d in 1..4", st.FramesRecv, st.Reads, burst)
	}
}
