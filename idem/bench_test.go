package idem_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
)

var sinkFence idem.Fence

// BenchmarkMemoryClaim is the hot path of SPEC I1: a claim with a []byte
// key, 0 allocs/op.
//
//   - new: fresh keys on a fake clock that moves 1 µs per claim with a
//     1 ms ttl, so ~1,000 entries are live and the wheel expires one entry
//     per claim: the steady state of a busy store.
//   - new-parallel: the same with b.RunParallel on the real clock (ttl
//     2 ms).
//   - repeat, repeat-parallel: claims of live keys (a duplicate: 0).
//   - claim+release-parallel: a fresh claim and its release per op.
func BenchmarkMemoryClaim(b *testing.B) {
	ctx := context.Background()
	b.Run("new", func(b *testing.B) {
		clk := newFakeClock()
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 16, Tick: time.Millisecond, Clock: clk.Now})
		g := storetest.NewKeyGen()
		b.ReportAllocs()
		for b.Loop() {
			clk.Advance(time.Microsecond)
			f, err := m.Claim(ctx, g.Next(), time.Millisecond)
			if err != nil || f == 0 {
				b.Fatal(f, err)
			}
			sinkFence = f
		}
		b.ReportMetric(float64(m.Len()), "live-entries")
	})
	b.Run("new-parallel", func(b *testing.B) {
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 20, Tick: time.Millisecond})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := storetest.NewKeyGen()
			for pb.Next() {
				f, err := m.Claim(ctx, g.Next(), 2*time.Millisecond)
				if err != nil || f == 0 {
					b.Error(f, err)
					return
				}
			}
		})
	})
	live := func(b *testing.B) (*idem.Memory, [][]byte) {
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 12})
		g := storetest.NewKeyGen()
		keys := make([][]byte, 1024)
		for i := range keys {
			keys[i] = append([]byte(nil), g.Next()...)
			m.Claim(ctx, keys[i], time.Hour)
		}
		return m, keys
	}
	b.Run("repeat", func(b *testing.B) {
		m, keys := live(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if f, _ := m.Claim(ctx, keys[i&1023], time.Hour); f != 0 {
				b.Fatal("repeat won")
			}
			i++
		}
	})
	b.Run("repeat-parallel", func(b *testing.B) {
		m, keys := live(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if f, _ := m.Claim(ctx, keys[i&1023], time.Hour); f != 0 {
					b.Error("repeat won")
					return
				}
				i++
			}
		})
	})
	b.Run("claim+release-parallel", func(b *testing.B) {
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 12})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := storetest.NewKeyGen()
			for pb.Next() {
				k := g.Next()
				f, err := m.Claim(ctx, k, time.Minute)
				if err != nil || f == 0 {
					b.Error(f, err)
					return
				}
				if err := m.Release(ctx, k, f); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkDo is idem.Do on the memory store — claim, run, extension
// registration with the shared keeper, complete — against the same
// store's bare Claim+Complete in the same run (ratio reported as
// x-bare). Sequential calls start and stop the keeper's loop each time
// (it runs only while a claim is held); parallel ones keep it running.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	result := []byte("order 42")
	fn := func(context.Context) ([]byte, error) { return result, nil }
	ttl := idem.TTL{Pending: time.Minute, Done: time.Millisecond}
	run := func(b *testing.B, parallel bool, do func(g *storetest.KeyGen) error) float64 {
		start := time.Now()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				g := storetest.NewKeyGen()
				for pb.Next() {
					if err := do(g); err != nil {
						b.Error(err)
						return
					}
				}
			})
		} else {
			g := storetest.NewKeyGen()
			for b.Loop() {
				if err := do(g); err != nil {
					b.Fatal(err)
				}
			}
		}
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	for _, parallel := range []bool{false, true} {
		name := "sequential"
		if parallel {
			name = "parallel"
		}
		var bare float64
		m := newMemory(b, idem.MemoryConfig{Capacity: 1 << 20, Tick: time.Millisecond})
		b.Run(name+"/bare-claim+complete", func(b *testing.B) {
			b.ReportAllocs()
			bare = run(b, parallel, func(g *storetest.KeyGen) error {
				k := g.Next()
				f, err := m.Claim(ctx, k, ttl.Pending)
				if err != nil {
					return err
				}
				return m.Complete(ctx, k, f, result, ttl.Done)
			})
		})
		b.Run(name+"/Do", func(b *testing.B) {
			b.ReportAllocs()
			ns := run(b, parallel, func(g *storetest.KeyGen) error {
				_, _, err := idem.Do(ctx, m, g.Next(), ttl, fn)
				return err
			})
			if bare > 0 {
				b.ReportMetric(ns/bare, "x-bare")
			}
		})
	}
}

// BenchmarkBaselineSyncMap is the same-run baseline for the memory store:
// sync.Map.LoadOrStore of fresh keys, then Delete — "first time?" without
// expiry, bounds or stored results — and Load of live keys.
func BenchmarkBaselineSyncMap(b *testing.B) {
	b.Run("claim+delete-parallel", func(b *testing.B) {
		var m sync.Map
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := storetest.NewKeyGen()
			for pb.Next() {
				k := string(g.Next())
				if _, loaded := m.LoadOrStore(k, struct{}{}); loaded {
					b.Error("fresh key loaded")
					return
				}
				m.Delete(k)
			}
		})
	})
	b.Run("repeat-parallel", func(b *testing.B) {
		var m sync.Map
		g := storetest.NewKeyGen()
		keys := make([][]byte, 1024)
		for i := range keys {
			keys[i] = append([]byte(nil), g.Next()...)
			m.Store(string(keys[i]), struct{}{})
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				// sync.Map keys are interfaces: the string is boxed,
				// one allocation per lookup.
				if _, ok := m.Load(string(keys[i&1023])); !ok {
					b.Error("missing")
					return
				}
				i++
			}
		})
	})
}

// BenchmarkMemoryFootprint reports the heap held per live entry of a full
// store (36-byte keys, no results), for sizing Capacity.
func BenchmarkMemoryFootprint(b *testing.B) {
	const n = 1 << 16
	ctx := context.Background()
	var perEntry float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := newMemory(b, idem.MemoryConfig{Capacity: n})
		g := storetest.NewKeyGen()
		for range n * 15 / 16 {
			if _, err := m.Claim(ctx, g.Next(), time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(m.Len())
		runtime.KeepAlive(m)
	}
	b.ReportMetric(perEntry, "B/entry")
}
