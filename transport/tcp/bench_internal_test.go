package tcp

import (
	"runtime"
	"sync"
	"testing"
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
