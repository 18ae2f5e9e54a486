package ctxtable

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/readretry/readretry/internal/arrival"
)

// benchMeta is shaped like the engine's context (docs/design.md, "One read,
// end to end", step 1): command, class, segment unit, retries used, up to 9
// tried proxy ids, first-send time, async ID, timer handle, next position.
// 96 bytes, no pointers.
type benchMeta struct {
	Command     uint16
	Class       uint8
	Retries     uint8
	NTried      uint8
	_           [3]byte
	Tried       [9]uint32
	_           uint32
	SegmentUnit int64
	FirstSend   int64
	AsyncID     uint64
	Timer       uint64
	NextPos     uint64
	Attempt     uint32
	_           uint32
}

// Payload of a typical simple read: a 110-byte packed frame and a 24-byte
// user buffer (134 bytes, stored in the 144-byte class).
var (
	benchFrame = make([]byte, 110)
	benchUser  = make([]byte, 24)
)

const benchResident = 500_000

var (
	sinkU64 atomic.Uint64
	sinkInt int
)

// fixture is a table kept full across the b.N rounds of one benchmark: P
// windows of live contexts, one per parallel worker, together holding
// `resident` contexts. Worker w owns sequence numbers k·P + w, so the
// workers' numbers interleave like those of senders drawing from one
// shared counter.
type fixture struct {
	t       *Table[benchMeta]
	windows []window
	next    atomic.Int32
}

type window struct {
	_    [64]byte      // keep workers' windows on separate cache lines
	hi   uint64        // next k to insert
	w, p uint64        // worker number, worker count
	ans  arrival.Order // the order the answers to this worker's sends arrive in
	_    [64]byte
}

func (w *window) seq(k uint64) uint64 { return k*w.p + w.w }

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*fixture{}
)

// getFixture returns the table for (shards, resident, workers), filling it
// once. Single-goroutine benchmarks use one worker: one counter, as in the
// engine.
func getFixture(b *testing.B, shards, resident, workers int) *fixture {
	key := fmt.Sprint(shards, "/", resident, "/", workers)
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f := fixtures[key]; f != nil {
		f.next.Store(0)
		return f
	}
	// Only one big fixture lives at a time so memory stays bounded.
	clear(fixtures)
	runtime.GC()
	t, err := New[benchMeta](Config{Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	p := workers
	f := &fixture{t: t, windows: make([]window, p)}
	per := uint64(resident / p)
	for w := range f.windows {
		f.windows[w] = window{hi: per, w: uint64(w), p: uint64(p)}
	}
	for k := range per {
		for w := range f.windows {
			s := f.windows[w].seq(k)
			if _, err := t.Insert(s, benchMeta{AsyncID: s}, benchFrame, benchUser, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Settle the heap now (the previous fixture is garbage) so that GC and
	// the scavenger do not run inside the timed loop.
	debug.FreeOSMemory()
	fixtures[key] = f
	return f
}

// cycle is one read's life in the engine: store the new context, find the
// one whose answer arrives, update it, release it.
//
// It reports a failure with b.Error and ok == false, never b.Fatal: it runs
// on RunParallel's goroutines, where FailNow is not allowed.
func cycle(b *testing.B, t *Table[benchMeta], w *window) (v uint64, ok bool) {
	s := w.seq(w.hi)
	if _, err := t.Insert(s, benchMeta{AsyncID: s, Command: 7}, benchFrame, benchUser, 0); err != nil {
		b.Error(err)
		return 0, false
	}
	w.hi++
	s = w.seq(w.ans.Take())
	r, found := t.Lookup(s)
	if !found {
		b.Error("resident context missing")
		return 0, false
	}
	m := r.Meta()
	m.Retries++
	v = m.AsyncID + uint64(r.UserBuf()[0]) + uint64(r.Frame()[0])
	if !t.Delete(s) {
		b.Error("delete missed")
		return 0, false
	}
	return v, true
}

// BenchmarkInsertLookupDelete: one Insert + Lookup + Delete per op with
// 500,000 contexts resident.
func BenchmarkInsertLookupDelete(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		f := getFixture(b, 0, benchResident, 1)
		w := &f.windows[0]
		var s uint64
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			v, ok := cycle(b, f.t, w)
			if !ok {
				return
			}
			s += v
		}
		sinkU64.Add(s)
	})
	b.Run("parallel", func(b *testing.B) {
		f := getFixture(b, 0, benchResident, runtime.GOMAXPROCS(0))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			w := &f.windows[int(f.next.Add(1)-1)%len(f.windows)]
			var s uint64
			for pb.Next() {
				v, ok := cycle(b, f.t, w)
				if !ok {
					return
				}
				s += v
			}
			sinkU64.Add(s)
		})
	})
}

// lookupAt looks up the i-th resident context of window w, in send order
// (stride 1) or scattered (stride 7919, coprime to the window), among the
// oldest contexts, which the answers have not reached yet.
// Like cycle, it reports a failure with b.Error and ok == false.
func lookupAt(b *testing.B, t *Table[benchMeta], w *window, stride, i uint64) (uint64, bool) {
	front := w.ans.Front() + 1
	r, ok := t.Lookup(w.seq(front + (i*stride)%(w.hi-front)))
	if !ok {
		b.Error("missing")
		return 0, false
	}
	return r.Meta().AsyncID, true
}

// BenchmarkLookup: Lookup of resident contexts with 500,000 resident, in
// send order (as answers mostly arrive) and scattered, and of absent ones
// (late or duplicate answers).
func BenchmarkLookup(b *testing.B) {
	for _, c := range []struct {
		name   string
		stride uint64
	}{{"ordered", 1}, {"scattered", 7919}} {
		b.Run(c.name+"/single", func(b *testing.B) {
			f := getFixture(b, 0, benchResident, 1)
			w := &f.windows[0]
			var s uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range uint64(b.N) {
				v, ok := lookupAt(b, f.t, w, c.stride, i)
				if !ok {
					return
				}
				s += v
			}
			sinkU64.Add(s)
		})
		b.Run(c.name+"/parallel", func(b *testing.B) {
			f := getFixture(b, 0, benchResident, runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &f.windows[int(f.next.Add(1)-1)%len(f.windows)]
				var s uint64
				for i := uint64(0); pb.Next(); i++ {
					v, ok := lookupAt(b, f.t, w, c.stride, i)
					if !ok {
						return
					}
					s += v
				}
				sinkU64.Add(s)
			})
		})
	}
	b.Run("miss/single", func(b *testing.B) {
		f := getFixture(b, 0, benchResident, 1)
		var n int
		b.ReportAllocs()
		b.ResetTimer()
		for i := range uint64(b.N) {
			if _, ok := f.t.Lookup(1<<62 + i); ok {
				n++
			}
		}
		sinkInt += n
	})
}

// BenchmarkShards sweeps the shard count for BENCHMARKS.md's shard-count table:
// insert+lookup+delete with 500,000 resident, single goroutine and parallel.
func BenchmarkShards(b *testing.B) {
	for _, shards := range []int{1, 2, 4, 8, 16, 32, 64, 128, 256} {
		b.Run(fmt.Sprintf("shards=%d/single", shards), func(b *testing.B) {
			f := getFixture(b, shards, benchResident, 1)
			w := &f.windows[0]
			var s uint64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				v, ok := cycle(b, f.t, w)
				if !ok {
					return
				}
				s += v
			}
			sinkU64.Add(s)
		})
		b.Run(fmt.Sprintf("shards=%d/parallel", shards), func(b *testing.B) {
			f := getFixture(b, shards, benchResident, runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &f.windows[int(f.next.Add(1)-1)%len(f.windows)]
				var s uint64
				for pb.Next() {
					v, ok := cycle(b, f.t, w)
					if !ok {
						return
					}
					s += v
				}
				sinkU64.Add(s)
			})
		})
	}
}

// gcPause returns the shortest of several forced GC cycles: the machine is
// shared, and the minimum filters out the cycles that lost their CPU.
func gcPause() time.Duration {
	best := time.Duration(1 << 62)
	for range 10 {
		start := time.Now()
		runtime.GC()
		best = min(best, time.Since(start))
	}
	return best
}

// scannableHeap returns the heap bytes the garbage collector has to scan
// (runtime/metrics /gc/scan/heap:bytes): unlike a GC's wall time, it does not
// depend on what else the machine is doing.
func scannableHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkMemory fills a table with 500,000 contexts (96-byte meta, 110-byte
// frame, 24-byte user buffer) and reports the R15 figures: the table's own
// bytes per context beyond frame + user buffer + meta (overhead-B/ctx), the
// same including the meta (fixed-B/ctx), heap objects per context, heap bytes
// the GC must scan per context, and one forced GC cycle (the fastest of 10)
// with the table full versus empty. ns/op is the fill.
func BenchmarkMemory(b *testing.B) {
	clear(fixtures)
	var ms runtime.MemStats
	payload := float64(len(benchFrame) + len(benchUser))
	meta := float64(metaBytes[benchMeta]())
	for range b.N {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap0, obj0, scan0 := ms.HeapAlloc, ms.HeapObjects, scannableHeap()
		t, err := New[benchMeta](Config{})
		if err != nil {
			b.Fatal(err)
		}
		gcEmpty := gcPause()
		b.StartTimer()
		for s := range uint64(benchResident) {
			if _, err := t.Insert(s, benchMeta{AsyncID: s}, benchFrame, benchUser, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap1, obj1, scan1 := ms.HeapAlloc, ms.HeapObjects, scannableHeap()
		gcFull := gcPause()
		n := float64(benchResident)
		perCtx := float64(heap1-heap0) / n
		b.ReportMetric(perCtx-payload-meta, "overhead-B/ctx")
		b.ReportMetric(perCtx-payload, "fixed-B/ctx")
		b.ReportMetric(float64(obj1-obj0)/n, "heapobj/ctx")
		b.ReportMetric((float64(scan1)-float64(scan0))/n, "gcscan-B/ctx")
		b.ReportMetric(float64(gcEmpty.Microseconds()), "gc-µs-empty")
		b.ReportMetric(float64(gcFull.Microseconds()), "gc-µs-full")
		runtime.KeepAlive(t)
		b.StartTimer()
	}
}

// Hash candidates for mix, the mixer of PlaceHashed and spread shards.
func hashFib(seq uint64) uint64 { return seq * 0x9e3779b97f4a7c15 }

func hashFmix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

func hashXX(seq uint64) uint64 {
	var k [8]byte
	binary.LittleEndian.PutUint64(k[:], seq)
	return xxhash.Sum64(k[:])
}

var hashCandidates = []struct {
	name string
	fn   func(uint64) uint64
}{{"mix", mix}, {"fibonacci", hashFib}, {"fmix64", hashFmix}, {"xxhash", hashXX}}

// BenchmarkHash compares the candidates' latency (each call depends on the
// previous result, as a probe depends on its hash).
func BenchmarkHash(b *testing.B) {
	b.Run("mix", func(b *testing.B) {
		var s uint64
		for i := range uint64(b.N) {
			s += mix(i ^ s)
		}
		sinkU64.Add(s)
	})
	b.Run("fibonacci", func(b *testing.B) {
		var s uint64
		for i := range uint64(b.N) {
			s += hashFib(i ^ s)
		}
		sinkU64.Add(s)
	})
	b.Run("fmix64", func(b *testing.B) {
		var s uint64
		for i := range uint64(b.N) {
			s += hashFmix(i ^ s)
		}
		sinkU64.Add(s)
	})
	b.Run("xxhash", func(b *testing.B) {
		var s uint64
		for i := range uint64(b.N) {
			s += hashXX(i ^ s)
		}
		sinkU64.Add(s)
	})
}

// BenchmarkHashQuality places 60,000 keys of several patterns into 8
// shard indexes sized like the table's at its cap (top hash bits pick the
// shard, the 32 below the probe key, as PlaceHashed does) and reports the
// longest and the mean displacement per candidate, and how many keys found
// their shard already at the 7/8 load where the table would grow it.
func BenchmarkHashQuality(b *testing.B) {
	const keys, shards = 60_000, 8
	patterns := []struct {
		name string
		key  func(k uint64) uint64
	}{
		{"sequential", func(k uint64) uint64 { return k }},
		{"stride4096", func(k uint64) uint64 { return k << 12 }},
		{"twocounters", func(k uint64) uint64 { return (k&1)<<48 | k>>1 }},
		{"random", func(k uint64) uint64 { return mix(k^0x5555) * 0x9e3779b97f4a7c15 }},
	}
	for _, c := range hashCandidates {
		for _, pat := range patterns {
			b.Run(c.name+"/"+pat.name, func(b *testing.B) {
				var maxD, sumD, overflow uint64
				for range b.N {
					var ix [shards]index
					for i := range ix {
						ix[i].init(keys / shards * 20 / 17) // load 0.85 when full
					}
					for k := range uint64(keys) {
						key := pat.key(k)
						h := c.fn(key)
						sh := &ix[h>>61]
						if sh.count >= sh.growAt {
							overflow++ // the table would grow this shard
							continue
						}
						pos, dist, found := sh.findOrPlace(key, uint32(h>>29))
						if found {
							b.Fatal("duplicate key")
						}
						sh.place(pos, dist, key, 1)
					}
					maxD, sumD = 0, 0
					for i := range ix {
						maxD = max(maxD, uint64(ix[i].maxDist))
						for _, e := range ix[i].cells {
							sumD += uint64(e.dist)
						}
					}
				}
				b.ReportMetric(float64(maxD), "maxdisp")
				b.ReportMetric(float64(sumD)/keys, "meandisp")
				b.ReportMetric(float64(overflow)/float64(b.N), "overflowed-keys")
			})
		}
	}
}

// BenchmarkIdle reports the heap of an idle table with the default shard
// count, over 1,000 tables (SPEC R15: an idle zone is cheap): never used
// (fresh-B/table), and after 10,000 contexts came and went
// (burst-B/table: the shards keep their ring at its least size and one
// spare chunk per size class used). ns/op is making one table.
func BenchmarkIdle(b *testing.B) {
	for range b.N {
		t, err := New[benchMeta](Config{})
		if err != nil {
			b.Fatal(err)
		}
		sinkTable = t
	}
	b.StopTimer()
	b.ReportMetric(idleBytes(b, false), "fresh-B/table")
	b.ReportMetric(idleBytes(b, true), "burst-B/table")
}

var sinkTable *Table[benchMeta]

// idleBytes returns the heap per table of 1,000 idle tables, after 10,000
// contexts came and went if burst.
func idleBytes(b testing.TB, burst bool) float64 {
	const n = 1000
	ts := make([]*Table[benchMeta], n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ts {
		t, err := New[benchMeta](Config{})
		if err != nil {
			b.Fatal(err)
		}
		if burst {
			for s := range uint64(10_000) {
				if _, err := t.Insert(s, benchMeta{}, benchFrame, benchUser, 0); err != nil {
					b.Fatal(err)
				}
			}
			for s := range uint64(10_000) {
				t.Delete(s)
			}
		}
		ts[i] = t
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ts)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
}
