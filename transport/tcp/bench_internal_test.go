package tcp

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/readretry/readretry/retry"
)

// mutexQueue is the alternative the ring was measured against: one
// mutex-guarded FIFO shared by every producer, each frame copied into a
// recycled buffer (as retrytest's inbox does).
type mutexQueue struct {
	mu    sync.Mutex
	q     [][]byte
	head  int
	spare [][]byte
	last  []byte
}

func (m *mutexQueue) push(f []byte) {
	m.mu.Lock()
	var b []byte
	if n := len(m.spare); n > 0 {
		b, m.spare = m.spare[n-1], m.spare[:n-1]
	}
	m.q = append(m.q, append(b[:0], f...))
	m.mu.Unlock()
}

func (m *mutexQueue) pop() ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last != nil {
		m.spare = append(m.spare, m.last)
		m.last = nil
	}
	if m.head == len(m.q) {
		m.q, m.head = m.q[:0], 0
		return nil, false
	}
	f := m.q[m.head]
	m.q[m.head] = nil
	m.head++
	m.last = f
	return f, true
}

// benchSink keeps the consumer's work observable.
var benchSink int

// BenchmarkRecvPath moves b.N frames of 120 bytes from 4 producer
// goroutines (the proxies' readers) to one consumer (the poller): through
// one SPSC ring per producer, as the Transport does, and through the
// mutex-guarded queue baseline. ns/op is per frame.
func BenchmarkRecvPath(b *testing.B) {
	const producers = 4
	frame := make([]byte, 120)
	b.Run("ring", func(b *testing.B) {
		rings := make([]*ring, producers)
		for i := range rings {
			rings[i] = newRing(64 << 10)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		per := (b.N + producers - 1) / producers
		b.ReportAllocs()
		b.ResetTimer()
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func(r *ring) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if !r.push(frame, stop) {
						return
					}
				}
			}(rings[p])
		}
		got, rr := 0, 0
		var held *ring
		var heldSize uint64
		for got < per*producers {
			if held != nil {
				held.release(heldSize)
				held = nil
			}
			found := false
			for k := 0; k < producers; k++ {
				r := rings[(rr+k)%producers]
				if f, size, ok := r.next(); ok {
					benchSink += len(f)
					held, heldSize = r, size
					rr = (rr + k + 1) % producers
					got++
					found = true
					break
				}
			}
			if !found {
				runtime.Gosched()
			}
		}
		if held != nil {
			held.release(heldSize)
		}
		wg.Wait()
	})
	b.Run("mutex-queue", func(b *testing.B) {
		q := &mutexQueue{}
		var wg sync.WaitGroup
		per := (b.N + producers - 1) / producers
		b.ReportAllocs()
		b.ResetTimer()
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					q.push(frame)
				}
			}()
		}
		for got := 0; got < per*producers; {
			if f, ok := q.pop(); ok {
				benchSink += len(f)
				got++
			} else {
				runtime.Gosched()
			}
		}
		wg.Wait()
	})
}

// recvNs4 is the ns/op of the latest BenchmarkRecv/proxies=4 run, for the
// ratio the 512-proxy run reports.
var recvNs4 float64

// BenchmarkRecv is the poller's receive path with N proxies open and the
// traffic on 4 of them, spread over the proxy ids (a client connected to
// a whole cluster, its zones' reads on a few proxies at a time): rounds of
// 64 frames of 120 bytes are delivered as the proxies' readers deliver
// them (ring push, ready list, pending count), round robin over the 4, and
// then taken with Recv. ns/op is per frame, delivery included; the rings
// in use and their memory are the same for every N, so the ratio is
// Recv's own. proxies=512 reports vs-4proxies-x, its ns/op over
// proxies=4's in the same run: Recv does not scan the idle proxies' rings,
// so it stays near 1.
func BenchmarkRecv(b *testing.B) {
	const round, busy = 64, 4
	for _, n := range []int{4, 512} {
		b.Run(fmt.Sprintf("proxies=%d", n), func(b *testing.B) {
			t, err := New(Config{RecvBuffer: 64 << 10})
			if err != nil {
				b.Fatal(err)
			}
			defer t.Close()
			conns := make([]*proxyConn, n)
			cs := make([]*proxyConn, n+1) // ProxyID 0 is never used
			for i := range conns {
				conns[i] = t.newConn(retry.ProxyID(i+1), retry.Proxy{})
				cs[i+1] = conns[i]
			}
			t.conns.Store(&cs)
			var active [busy]*proxyConn
			for j := range active {
				active[j] = conns[j*n/busy]
			}
			frame := make([]byte, 120)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(round, b.N-done)
				for i := range k {
					if !active[i%busy].deliver(frame) {
						b.Fatal("deliver")
					}
				}
				for got := 0; got < k; got++ {
					f, _, ok := t.Recv()
					if !ok {
						b.Fatalf("Recv found nothing with %d frames waiting", k-got)
					}
					benchSink += len(f)
				}
				done += k
			}
			b.StopTimer()
			if _, _, ok := t.Recv(); ok {
				b.Fatal("a frame left over")
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n == 4 {
				recvNs4 = ns
			} else if recvNs4 > 0 {
				b.ReportMetric(ns/recvNs4, "vs-4proxies-x")
			}
		})
	}
}
