package bench

// Side-by-side benchmarks of ctxtable against the concurrent maps an engine
// would otherwise use to hold in-flight read contexts (SPEC R2, R15): every
// store does the same work per read — store the context with a copy of the
// packed frame and the user buffer, find it when the answer arrives, update
// it, read its payload, release it — with 500,000 contexts resident.
//
//	cd bench && go test -run '^$' -bench Ctx -benchmem .
//
// Compare ratios within one run: the machine is shared and noisy.

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/internal/arrival"
	"github.com/valyala/bytebufferpool"
)

// ctxMeta is shaped like the engine's context: command, class, retries, up to
// 9 tried proxy ids, first-send time, async ID, timer handle, next position.
// 96 bytes, no pointers.
type ctxMeta struct {
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

// A typical simple read: 110-byte packed frame, 24-byte user buffer.
var (
	ctxFrame = make([]byte, 110)
	ctxUser  = make([]byte, 24)
)

const ctxResident = 500_000

// ctxStore is one way to hold in-flight contexts. touch finds seq's context,
// bumps its retry count and reads its payload (as delivering an answer
// does), returning a value that depends on all of it.
type ctxStore interface {
	insert(seq uint64, m *ctxMeta, frame, user []byte) bool
	touch(seq uint64) (uint64, bool)
	remove(seq uint64) bool
}

// ---- ctxtable ----

type ctxTableStore struct{ t *ctxtable.Table[ctxMeta] }

func newCtxTableStore(capacity int) ctxStore {
	// No cap: the engine counts its contexts itself.
	t, err := ctxtable.New[ctxMeta](ctxtable.Config{})
	if err != nil {
		panic(err)
	}
	return ctxTableStore{t}
}

func (s ctxTableStore) insert(seq uint64, m *ctxMeta, frame, user []byte) bool {
	_, err := s.t.Insert(seq, *m, frame, user, 0)
	return err == nil
}

func (s ctxTableStore) touch(seq uint64) (uint64, bool) {
	r, ok := s.t.Lookup(seq)
	if !ok {
		return 0, false
	}
	m := r.Meta()
	m.Retries++
	return m.AsyncID + uint64(r.Frame()[0]) + uint64(r.UserBuf()[0]), true
}

func (s ctxTableStore) remove(seq uint64) bool { return s.t.Delete(seq) }

// ---- map baselines: a heap context with its own pooled payload buffer ----

type ctxRec struct {
	meta  ctxMeta
	buf   []byte // frame then user buffer, reused through ctxPool
	frame int    // len(frame) within buf
}

var ctxPool = sync.Pool{New: func() any { return new(ctxRec) }}

func newCtxRec(m *ctxMeta, frame, user []byte) *ctxRec {
	c := ctxPool.Get().(*ctxRec)
	c.meta = *m
	c.buf = append(append(c.buf[:0], frame...), user...)
	c.frame = len(frame)
	return c
}

func touchCtxRec(c *ctxRec) uint64 {
	c.meta.Retries++
	return c.meta.AsyncID + uint64(c.buf[0]) + uint64(c.buf[c.frame])
}

type ctxXsyncStore struct{ m *xsync.MapOf[uint64, *ctxRec] }

func newCtxXsyncStore(int) ctxStore { return ctxXsyncStore{xsync.NewMapOf[uint64, *ctxRec]()} }

func (s ctxXsyncStore) insert(seq uint64, m *ctxMeta, frame, user []byte) bool {
	c := newCtxRec(m, frame, user)
	if _, loaded := s.m.LoadOrStore(seq, c); loaded {
		ctxPool.Put(c)
		return false
	}
	return true
}

func (s ctxXsyncStore) touch(seq uint64) (uint64, bool) {
	c, ok := s.m.Load(seq)
	if !ok {
		return 0, false
	}
	return touchCtxRec(c), true
}

func (s ctxXsyncStore) remove(seq uint64) bool {
	c, ok := s.m.LoadAndDelete(seq)
	if ok {
		ctxPool.Put(c)
	}
	return ok
}

type ctxSyncMapStore struct{ m *sync.Map }

func newCtxSyncMapStore(int) ctxStore { return ctxSyncMapStore{new(sync.Map)} }

func (s ctxSyncMapStore) insert(seq uint64, m *ctxMeta, frame, user []byte) bool {
	c := newCtxRec(m, frame, user)
	if _, loaded := s.m.LoadOrStore(seq, c); loaded {
		ctxPool.Put(c)
		return false
	}
	return true
}

func (s ctxSyncMapStore) touch(seq uint64) (uint64, bool) {
	v, ok := s.m.Load(seq)
	if !ok {
		return 0, false
	}
	return touchCtxRec(v.(*ctxRec)), true
}

func (s ctxSyncMapStore) remove(seq uint64) bool {
	v, ok := s.m.LoadAndDelete(seq)
	if ok {
		ctxPool.Put(v.(*ctxRec))
	}
	return ok
}

// ctxShardedStore is 64 mutex-guarded Go maps, sharded by the low bits.
type ctxShardedStore struct{ shards *[64]ctxMapShard }

type ctxMapShard struct {
	mu sync.Mutex
	m  map[uint64]*ctxRec
	_  [40]byte
}

func newCtxShardedStore(capacity int) ctxStore {
	s := ctxShardedStore{new([64]ctxMapShard)}
	for i := range s.shards {
		s.shards[i].m = make(map[uint64]*ctxRec, capacity/64)
	}
	return s
}

func (s ctxShardedStore) insert(seq uint64, m *ctxMeta, frame, user []byte) bool {
	sh := &s.shards[seq&63]
	sh.mu.Lock()
	if _, ok := sh.m[seq]; ok {
		sh.mu.Unlock()
		return false
	}
	sh.m[seq] = newCtxRec(m, frame, user)
	sh.mu.Unlock()
	return true
}

func (s ctxShardedStore) touch(seq uint64) (uint64, bool) {
	sh := &s.shards[seq&63]
	sh.mu.Lock()
	c, ok := sh.m[seq]
	sh.mu.Unlock()
	if !ok {
		return 0, false
	}
	return touchCtxRec(c), true
}

func (s ctxShardedStore) remove(seq uint64) bool {
	sh := &s.shards[seq&63]
	sh.mu.Lock()
	c, ok := sh.m[seq]
	if ok {
		delete(sh.m, seq)
	}
	sh.mu.Unlock()
	if ok {
		ctxPool.Put(c)
	}
	return ok
}

// ctxStores run in this order so that the peers' figures of the same run
// are known when ctxtable reports its speedups.
var ctxStores = []struct {
	name string
	make func(capacity int) ctxStore
}{
	{"xsync.MapOf", newCtxXsyncStore},
	{"sync.Map", newCtxSyncMapStore},
	{"64-mutex-maps", newCtxShardedStore},
	{"ctxtable", newCtxTableStore},
}

// ---- workload ----

// ctxFixture is a store kept full across the b.N rounds of a benchmark.
// Worker w of P owns sequence numbers k·P + w, so the workers' numbers
// interleave like senders drawing from one counter.
type ctxFixture struct {
	store ctxStore
	win   []ctxWindow
	next  atomic.Int32
}

type ctxWindow struct {
	_    [64]byte // keep workers' windows on separate cache lines
	hi   uint64   // next k to insert
	w, p uint64
	ans  arrival.Order // the order the answers to this worker's sends arrive in, as in ctxtable's own benchmarks
	m    ctxMeta       // the meta handed to insert, kept here so it does not escape per op
}

func (w *ctxWindow) seq(k uint64) uint64 { return k*w.p + w.w }

var (
	ctxFixMu    sync.Mutex
	ctxFixKey   string
	ctxFixture0 *ctxFixture
	ctxSink     atomic.Uint64
)

// getCtxFixture returns the filled store of the named kind with the given
// number of workers' windows (1 for single-goroutine runs: one counter, as in
// the engine); one lives at a time so memory stays bounded.
func getCtxFixture(b *testing.B, name string, mk func(int) ctxStore, workers int) *ctxFixture {
	ctxFixMu.Lock()
	defer ctxFixMu.Unlock()
	key := fmt.Sprint(name, "/", workers)
	if ctxFixKey == key {
		ctxFixture0.next.Store(0)
		return ctxFixture0
	}
	ctxFixture0, ctxFixKey = nil, ""
	runtime.GC()
	p := workers
	f := &ctxFixture{store: mk(ctxResident + 4096), win: make([]ctxWindow, p)}
	per := uint64(ctxResident / p)
	for w := range f.win {
		f.win[w] = ctxWindow{hi: per, w: uint64(w), p: uint64(p)}
	}
	m := new(ctxMeta)
	for k := range per {
		for w := range f.win {
			s := f.win[w].seq(k)
			m.AsyncID = s
			if !f.store.insert(s, m, ctxFrame, ctxUser) {
				b.Fatal("fill failed")
			}
		}
	}
	// Settle the heap now (the previous fixture is garbage) so that GC and
	// the scavenger do not run inside the timed loop.
	debug.FreeOSMemory()
	ctxFixture0, ctxFixKey = f, key
	return f
}

// ctxCycle is one read's life: store the new context, take the answer
// that arrives next, release its context.
//
// It reports a failure with b.Error and ok == false, never b.Fatal: it runs
// on RunParallel's goroutines, where FailNow is not allowed.
func ctxCycle(b *testing.B, s ctxStore, w *ctxWindow) (uint64, bool) {
	seq := w.seq(w.hi)
	w.m = ctxMeta{AsyncID: seq, Command: 7}
	if !s.insert(seq, &w.m, ctxFrame, ctxUser) {
		b.Error("insert failed")
		return 0, false
	}
	w.hi++
	seq = w.seq(w.ans.Take())
	v, ok := s.touch(seq)
	if !ok || !s.remove(seq) {
		b.Error("resident context missing")
		return 0, false
	}
	return v, true
}

// ctxPeerNs holds the ns/op of the peers' latest run, by benchmark name,
// for ctxtable's speedup metrics.
var ctxPeerNs = map[string]float64{}

// ctxReport records a store's ns/op and, for ctxtable, reports how many
// times faster than xsync.MapOf and sync.Map it was in this run.
func ctxReport(b *testing.B, kind, store string) {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	ctxPeerNs[kind+"/"+store] = ns
	if store != "ctxtable" || ns <= 0 {
		return
	}
	for _, peer := range []string{"xsync.MapOf", "sync.Map"} {
		if p := ctxPeerNs[kind+"/"+peer]; p > 0 {
			b.ReportMetric(p/ns, "x-vs-"+peer)
		}
	}
}

// BenchmarkCtxCycle: insert + lookup/update/read + delete per op, 500,000
// resident, single goroutine and all Ps, in the engine's send/answer
// order (arrival.Order).
func BenchmarkCtxCycle(b *testing.B) {
	for _, st := range ctxStores {
		b.Run(st.name+"/single", func(b *testing.B) {
			f := getCtxFixture(b, st.name, st.make, 1)
			w := &f.win[0]
			var v uint64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				x, ok := ctxCycle(b, f.store, w)
				if !ok {
					return
				}
				v += x
			}
			b.StopTimer()
			ctxSink.Add(v)
			ctxReport(b, "cycle/single", st.name)
		})
		b.Run(st.name+"/parallel", func(b *testing.B) {
			f := getCtxFixture(b, st.name, st.make, runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &f.win[int(f.next.Add(1)-1)%len(f.win)]
				var v uint64
				for pb.Next() {
					x, ok := ctxCycle(b, f.store, w)
					if !ok {
						return
					}
					v += x
				}
				ctxSink.Add(v)
			})
			b.StopTimer()
			ctxReport(b, "cycle/parallel", st.name)
		})
	}
}

// BenchmarkCtxLookup: lookup/update/read of resident contexts in send order,
// 500,000 resident.
func BenchmarkCtxLookup(b *testing.B) {
	for _, st := range ctxStores {
		b.Run(st.name+"/single", func(b *testing.B) {
			f := getCtxFixture(b, st.name, st.make, 1)
			w := &f.win[0]
			lo := w.ans.Front() + 1
			span := w.hi - lo
			var v uint64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range uint64(b.N) {
				x, ok := f.store.touch(w.seq(lo + i%span))
				if !ok {
					b.Fatal("missing")
				}
				v += x
			}
			ctxSink.Add(v)
		})
		b.Run(st.name+"/parallel", func(b *testing.B) {
			f := getCtxFixture(b, st.name, st.make, runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &f.win[int(f.next.Add(1)-1)%len(f.win)]
				lo := w.ans.Front() + 1
				span := w.hi - lo
				var v uint64
				for i := uint64(0); pb.Next(); i++ {
					x, ok := f.store.touch(w.seq(lo + i%span))
					if !ok {
						b.Error("missing") // not Fatal: RunParallel goroutine
						return
					}
					v += x
				}
				ctxSink.Add(v)
			})
		})
	}
}

// ctxScannable returns the heap bytes the GC has to scan.
func ctxScannable() uint64 {
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// ctxGCPause returns the fastest of several forced GC cycles.
func ctxGCPause() time.Duration {
	best := time.Duration(1 << 62)
	for range 5 {
		start := time.Now()
		runtime.GC()
		best = min(best, time.Since(start))
	}
	return best
}

// BenchmarkCtxMemory fills each store with 500,000 contexts and reports heap
// bytes per context beyond frame + user buffer + the 96-byte meta, heap
// objects per context, heap bytes the GC must scan per context, and the
// forced-GC cycle with the store full minus the same with it empty. The
// timed part is the fill (ns/op per round).
func BenchmarkCtxMemory(b *testing.B) {
	for _, st := range ctxStores {
		b.Run(st.name, func(b *testing.B) {
			ctxFixMu.Lock()
			ctxFixture0, ctxFixKey = nil, ""
			ctxFixMu.Unlock()
			var ms runtime.MemStats
			payload := float64(len(ctxFrame) + len(ctxUser) + 96)
			for range b.N {
				b.StopTimer()
				runtime.GC() // twice: the second empties sync.Pool's victim cache
				runtime.GC()
				runtime.ReadMemStats(&ms)
				heap0, obj0, scan0 := ms.HeapAlloc, ms.HeapObjects, ctxScannable()
				s := st.make(ctxResident)
				gcEmpty := ctxGCPause()
				m := new(ctxMeta)
				b.StartTimer()
				for seq := range uint64(ctxResident) {
					m.AsyncID = seq
					if !s.insert(seq, m, ctxFrame, ctxUser) {
						b.Fatal("fill failed")
					}
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				scan1 := ctxScannable()
				gcFull := ctxGCPause()
				n := float64(ctxResident)
				b.ReportMetric((float64(ms.HeapAlloc-heap0)-n*payload)/n, "overhead-B/ctx")
				b.ReportMetric(float64(ms.HeapObjects-obj0)/n, "heapobj/ctx")
				b.ReportMetric((float64(scan1)-float64(scan0))/n, "gcscan-B/ctx")
				b.ReportMetric(float64((gcFull - gcEmpty).Microseconds()), "gc-µs-delta")
				runtime.KeepAlive(s)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCtxPayload compares where a context's payload (frame + user
// buffer) lives, the choice ctxtable made for its slabs: ctxtable's
// size-class slabs (a Table with an empty meta, so the figures are the
// payload plus the table's own index and header) versus one
// bytebufferpool.ByteBuffer per context, kept in a slice indexed by
// position (no index at all, so its ns/op is a lower bound). Each op
// releases the oldest payload and stores a new one, with 500,000 resident.
// The memory figures are taken after the fill.
func BenchmarkCtxPayload(b *testing.B) {
	type empty struct{}
	b.Run("ctxtable-slabs", func(b *testing.B) {
		ctxFixMu.Lock()
		ctxFixture0, ctxFixKey = nil, ""
		ctxFixMu.Unlock()
		runtime.GC()
		before := ctxMemSnapshot()
		t, err := ctxtable.New[empty](ctxtable.Config{})
		if err != nil {
			b.Fatal(err)
		}
		for seq := range uint64(ctxResident) {
			if _, err := t.Insert(seq, empty{}, ctxFrame, ctxUser, 0); err != nil {
				b.Fatal(err)
			}
		}
		after := ctxMemSnapshot()
		debug.FreeOSMemory()
		lo, hi := uint64(0), uint64(ctxResident)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if !t.Delete(lo) {
				b.Fatal("delete missed")
			}
			lo++
			if _, err := t.Insert(hi, empty{}, ctxFrame, ctxUser, 0); err != nil {
				b.Fatal(err)
			}
			hi++
		}
		b.StopTimer()
		after.report(b, before) // after the loop: ResetTimer drops metrics
	})
	b.Run("bytebufferpool", func(b *testing.B) {
		runtime.GC()
		before := ctxMemSnapshot()
		var pool bytebufferpool.Pool
		bufs := make([]*bytebufferpool.ByteBuffer, ctxResident)
		for i := range bufs {
			bb := pool.Get()
			bb.B = append(append(bb.B[:0], ctxFrame...), ctxUser...)
			bufs[i] = bb
		}
		after := ctxMemSnapshot()
		debug.FreeOSMemory()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			k := i % ctxResident
			pool.Put(bufs[k])
			bb := pool.Get()
			bb.B = append(append(bb.B[:0], ctxFrame...), ctxUser...)
			bufs[k] = bb
		}
		b.StopTimer()
		after.report(b, before)
		runtime.KeepAlive(bufs)
	})
}

type ctxMem struct{ heap, objects, scan uint64 }

func ctxMemSnapshot() ctxMem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ctxMem{ms.HeapAlloc, ms.HeapObjects, ctxScannable()}
}

// report records bytes beyond frame + user buffer, heap objects and
// GC-scanned bytes per context since before.
func (m ctxMem) report(b *testing.B, before ctxMem) {
	n := float64(ctxResident)
	b.ReportMetric((float64(m.heap)-float64(before.heap))/n-float64(len(ctxFrame)+len(ctxUser)), "overhead-B/ctx")
	b.ReportMetric((float64(m.objects)-float64(before.objects))/n, "heapobj/ctx")
	b.ReportMetric((float64(m.scan)-float64(before.scan))/n, "gcscan-B/ctx")
}
