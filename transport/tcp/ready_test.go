package tcp

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
)

// TestReadyListNoFrameStranded: readers deliver frames to many proxies
// while Recv drains them, so proxies keep leaving and rejoining the ready
// list; every frame arrives exactly once, in its proxy's order, and Recv
// never reports nothing while frames wait.
func TestReadyListNoFrameStranded(t *testing.T) {
	const proxies, readers, perProxy = 64, 4, 2000
	tr, err := New(Config{RecvBuffer: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	cs := make([]*proxyConn, proxies+1)
	for i := 1; i <= proxies; i++ {
		cs[i] = tr.newConn(retry.ProxyID(i), retry.Proxy{})
	}
	tr.conns.Store(&cs)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() { // reader r owns proxies r+1, r+1+readers, ...: one producer a ring
			defer wg.Done()
			var f [8]byte
			for k := range perProxy {
				for p := r + 1; p <= proxies; p += readers {
					binary.LittleEndian.PutUint64(f[:], uint64(k))
					if !cs[p].deliver(f[:]) {
						t.Error("deliver failed")
						return
					}
				}
			}
		}()
	}
	next := make([]uint64, proxies+1)
	deadline := time.Now().Add(30 * time.Second)
	for got := 0; got < proxies*perProxy; {
		f, id, ok := tr.Recv()
		if !ok {
			if time.Now().After(deadline) {
				t.Fatalf("stuck after %d frames", got)
			}
			tr.Wait(time.Millisecond)
			continue
		}
		if k := binary.LittleEndian.Uint64(f); k != next[id] {
			t.Fatalf("proxy %d: frame %d, want %d", id, k, next[id])
		}
		next[id]++
		got++
	}
	wg.Wait()
	if _, _, ok := tr.Recv(); ok || tr.pending.Load() != 0 {
		t.Fatal("frames left after all were received")
	}
}
