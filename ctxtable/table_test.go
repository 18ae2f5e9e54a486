package ctxtable

import (
	"errors"

	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

func mustNew[M any](t testing.TB, cfg Config) *Table[M] {
	t.Helper()
	tab, err := New[M](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestNewRejectsPointers(t *testing.T) {
	type inner struct {
		A [2]uint64
		P *int
	}
	type fine struct {
		A  [3]uint32
		B  struct{ X, Y int64 }
		C  [0]*int // zero-length: holds no pointer
		F  float64
		Cx complex128
	}
	check := func(name string, err error, wantPointers bool) {
		t.Helper()
		if got := errors.Is(err, ErrMetaPointers); got != wantPointers {
			t.Errorf("%s: err %v, want ErrMetaPointers=%v", name, err, wantPointers)
		}
	}
	_, err := New[*int](Config{})
	check("*int", err, true)
	_, err = New[string](Config{})
	check("string", err, true)
	_, err = New[[]byte](Config{})
	check("[]byte", err, true)
	_, err = New[map[int]int](Config{})
	check("map", err, true)
	_, err = New[chan int](Config{})
	check("chan", err, true)
	_, err = New[func()](Config{})
	check("func", err, true)
	_, err = New[any](Config{})
	check("interface", err, true)
	_, err = New[unsafe.Pointer](Config{})
	check("unsafe.Pointer", err, true)
	_, err = New[[4]inner](Config{})
	check("[4]inner", err, true)
	if err != nil && err.Error() == ErrMetaPointers.Error() {
		t.Errorf("error %q does not say where the pointer is", err)
	}
	_, err = New[fine](Config{})
	check("fine", err, false)
	_, err = New[struct{}](Config{})
	check("struct{}", err, false)
	_, err = New[uint64](Config{})
	check("uint64", err, false)
}

func TestNewConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Shards: -1}, {Shards: 3}, {Shards: 12}, {Shards: MaxShards * 2},
	} {
		if _, err := New[uint64](cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): err %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if _, err := New[struct{ X [2]complex128 }](Config{}); err != nil {
		t.Errorf("meta aligned to 8: %v", err)
	}
	tab := mustNew[uint64](t, Config{})
	if tab.Shards() != DefaultShards() {
		t.Errorf("zero Config: shards %d, want %d", tab.Shards(), DefaultShards())
	}
	if s := DefaultShards(); s < 4 || s&(s-1) != 0 || s < 2*runtime.GOMAXPROCS(0) {
		t.Errorf("DefaultShards() = %d", s)
	}
}

func TestInsertErrorsChangeNothing(t *testing.T) {
	tab := mustNew[testMeta](t, Config{Shards: 2})
	if _, err := tab.Insert(1, testMeta{Seq: 1}, []byte("frame"), []byte("user"), -1); !errors.Is(err, ErrSize) {
		t.Fatalf("negative scratch: err %v", err)
	}
	if tab.Len() != 0 {
		t.Fatalf("Len %d after failed insert", tab.Len())
	}
	if _, err := tab.Insert(1, testMeta{Seq: 1}, []byte("frame"), []byte("user"), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Insert(1, testMeta{Seq: 99}, []byte("other"), nil, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: err %v", err)
	}
	r, ok := tab.Lookup(1)
	if !ok || r.Meta().Seq != 1 || string(r.Frame()) != "frame" || string(r.UserBuf()) != "user" || len(r.Scratch()) != 3 {
		t.Fatalf("duplicate insert changed the context: %+v %q %q", *r.Meta(), r.Frame(), r.UserBuf())
	}
	if tab.Len() != 1 {
		t.Fatalf("Len %d", tab.Len())
	}
}

// TestCollisions: sequence numbers that share a ring cell — a lap of the
// ring apart, or the same counter value with other high bits — never see
// each other's context.
func TestCollisions(t *testing.T) {
	for _, pattern := range []string{"lap", "highbits"} {
		tab := mustNew[testMeta](t, Config{Shards: 1})
		if _, err := tab.Insert(1, testMeta{Seq: 1}, nil, nil, 0); err != nil {
			t.Fatal(err)
		}
		n := tab.shards[0].ring.n
		var seqs []uint64
		for k := range uint64(40) {
			if pattern == "lap" {
				seqs = append(seqs, 5+k*n)
			} else {
				seqs = append(seqs, 5|k<<40)
			}
		}
		inserted := map[uint64]bool{1: true}
		for i, s := range seqs {
			inserted[s] = true
			if _, err := tab.Insert(s, testMeta{Seq: s}, payloadFor(s, 1, 20+i), nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		if tab.shards[0].ring.n != n {
			t.Fatal("the ring grew: the keys no longer share a cell")
		}
		check := func() {
			t.Helper()
			for i, s := range seqs {
				r, ok := tab.Lookup(s)
				if s == 0 {
					if ok {
						t.Fatal("deleted context found")
					}
					continue
				}
				if !ok || r.Meta().Seq != s || len(r.Frame()) != 20+i || r.Frame()[0] != payloadFor(s, 1, 1)[0] {
					t.Fatalf("%s: seq %d: wrong context", pattern, s)
				}
				// A neighbour that was never inserted is not found.
				if _, ok := tab.Lookup(s + 1); ok && !inserted[s+1] {
					t.Fatalf("seq %d found, never inserted", s+1)
				}
			}
		}
		check()
		if st := tab.Stats(); st.Overflow != len(seqs)-1 {
			t.Fatalf("%s: %d in overflow, want %d", pattern, st.Overflow, len(seqs)-1)
		}
		// Remove every third (backward shift moves the others).
		for i := 0; i < len(seqs); i += 3 {
			if !tab.Delete(seqs[i]) {
				t.Fatalf("delete %d", seqs[i])
			}
			seqs[i] = 0
		}
		check()
		if st := tab.Stats(); st.MaxProbe > len(seqs)-1 { // n colliding keys sit at most n-1 cells from home
			t.Fatalf("probe %d for %d colliding keys", st.MaxProbe, len(seqs))
		}
	}
}

// TestIndexSameProbeKey drives the index directly with many sequence numbers
// sharing one probe key: Robin Hood placement and backward-shift deletion
// keep every one findable, and no tombstone survives.
func TestIndexSameProbeKey(t *testing.T) {
	var ix index
	ix.init(257)
	const p = 0xdeadbeef
	live := map[uint64]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := 20_000
	if raceEnabled {
		ops = 3000
	}
	for op := range ops {
		s := rng.Uint64N(150)
		if live[s] {
			i, _, found := ix.findOrPlace(s, p)
			if !found {
				t.Fatalf("op %d: %d lost", op, s)
			}
			ix.removeAt(i)
			delete(live, s)
		} else if ix.count < ix.growAt {
			pos, dist, found := ix.findOrPlace(s, p)
			if found {
				t.Fatalf("op %d: %d found before insert", op, s)
			}
			ix.place(pos, dist, s, uint32(s)+1)
			live[s] = true
		}
		for q := range uint64(150) {
			i, _, found := ix.findOrPlace(q, p)
			if found != live[q] || (found && ix.cells[i].ref != uint32(q)+1) {
				t.Fatalf("op %d: find(%d) = %d %v, live %v", op, q, i, found, live[q])
			}
		}
	}
	// Cells in use = live entries: nothing else occupies a cell.
	used := 0
	for _, e := range ix.cells {
		if e.ref != 0 {
			used++
		}
	}
	if used != len(live) || ix.count != len(live) {
		t.Fatalf("%d cells used, count %d, %d live", used, ix.count, len(live))
	}
}

func TestHomeIsMod(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{65, 131, 1001, 79385, 1<<20 + 1, 1<<31 - 1} {
		var ix index
		ix.n = uint64(n)
		ix.magic = ^uint64(0)/ix.n + 1
		for _, p := range []uint32{0, 1, uint32(n - 1), uint32(n), 1<<32 - 1} {
			if got := ix.home(p); got != uint64(p)%uint64(n) {
				t.Fatalf("home(%d) mod %d = %d", p, n, got)
			}
		}
		for range 10_000 {
			p := rng.Uint32()
			if got := ix.home(p); got != uint64(p)%uint64(n) {
				t.Fatalf("home(%d) mod %d = %d", p, n, got)
			}
		}
	}
}

func TestSizeClasses(t *testing.T) {
	for n := 1; n <= maxClassSize; n++ {
		k := classOf[(n+7)>>3]
		if classSizes[k] < uint32(n) || (k > 1 && classSizes[k-1] >= uint32(n)) {
			t.Fatalf("payload %d: class %d (%d bytes)", n, k, classSizes[k])
		}
		if waste := float64(classSizes[k]-uint32(n)) / float64(n); n > 256 && waste > 0.125 {
			t.Fatalf("payload %d wastes %.1f%%", n, waste*100)
		}
	}
}

// TestRandomDisplacement: random keys at the index's highest load (7/8,
// where it grows) keep Robin Hood displacements short.
func TestRandomDisplacement(t *testing.T) {
	n := 1<<20 + 1
	if raceEnabled {
		n = 1<<16 + 1
	}
	var ix index
	ix.init(n)
	rng := rand.New(rand.NewPCG(5, 6))
	for ix.count < ix.growAt {
		s := rng.Uint64()
		pos, dist, found := ix.findOrPlace(s, uint32(s>>32))
		if !found {
			ix.place(pos, dist, s, 1)
		}
	}
	t.Logf("random keys, %d cells at load 7/8: max displacement %d", n, ix.maxDist)
	if ix.maxDist >= 128 {
		t.Fatalf("max displacement %d", ix.maxDist)
	}
}

// TestStragglers: two counters whose live ranges overlap in the rings, and
// contexts that outlive many laps of the ring, go to the overflow index;
// lookups stay exact and probes short, and everything drains.
func TestStragglers(t *testing.T) {
	tab := mustNew[uint64](t, Config{Shards: 4})
	var seqs []uint64
	for k := range uint64(40_000) {
		s := (k&1)<<40 | k>>1
		if _, err := tab.Insert(s, s, nil, nil, 0); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
	}
	// A FIFO stream with every 100th context kept for 20 laps of the ring.
	next := uint64(1 << 50)
	var window, kept []uint64
	for range 400_000 {
		if _, err := tab.Insert(next, next, nil, nil, 0); err != nil {
			t.Fatal(err)
		}
		window = append(window, next)
		next++
		if len(window) > 2000 {
			s := window[0]
			window = window[1:]
			if s%100 == 0 {
				kept = append(kept, s)
				continue
			}
			if !tab.Delete(s) {
				t.Fatalf("delete %d", s)
			}
		}
	}
	st := tab.Stats()
	t.Logf("two counters + stragglers: %+v", st)
	if st.Overflow == 0 || st.MaxProbe >= 128 {
		t.Fatalf("overflow %d, max probe %d", st.Overflow, st.MaxProbe)
	}
	for _, list := range [][]uint64{seqs, window, kept} {
		for _, s := range list {
			if r, ok := tab.Lookup(s); !ok || *r.Meta() != s {
				t.Fatalf("%d lost", s)
			}
		}
		for _, s := range list {
			if !tab.Delete(s) {
				t.Fatalf("delete %d", s)
			}
		}
	}
	if st := tab.Stats(); st.Len != 0 || st.Overflow != 0 || tab.Len() != 0 {
		t.Fatalf("not empty: %+v", st)
	}
}

// TestRefStable: a Ref keeps pointing at the same memory while other
// contexts come and go and the shard's index grows, shrinks and spreads.
func TestRefStable(t *testing.T) {
	tab := mustNew[testMeta](t, Config{Shards: 1})
	r, err := tab.Insert(7, testMeta{Seq: 7}, []byte("frame-7"), []byte("user-7"), 4)
	if err != nil {
		t.Fatal(err)
	}
	meta, frame := r.Meta(), &r.Frame()[0]
	meta.Retries = 3
	r.Scratch()[2] = 9
	for round := range 3 {
		for k := range uint64(20_000) {
			s := 1000 + k*uint64(1+round*4096) // round 2: strided, spreads
			if _, err := tab.Insert(s, testMeta{Seq: s}, payloadFor(s, 0, 100), nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		for k := range uint64(20_000) {
			tab.Delete(1000 + k*uint64(1+round*4096))
		}
		got, ok := tab.Lookup(7)
		if !ok || got.Meta() != meta || &got.Frame()[0] != frame {
			t.Fatalf("round %d: context moved", round)
		}
		if got.Meta().Retries != 3 || got.Scratch()[2] != 9 || string(got.Frame()) != "frame-7" || string(got.UserBuf()) != "user-7" {
			t.Fatalf("round %d: context changed", round)
		}
	}
	if st := tab.Stats(); st.IndexCells > 1000 {
		t.Fatalf("index did not shrink back: %d cells", st.IndexCells)
	}
}

// TestBuffersReturned: every payload block handed out comes back to its
// slab on Delete, chunks go back to the Go heap, and large payloads are
// counted.
func TestBuffersReturned(t *testing.T) {
	tab := mustNew[testMeta](t, Config{Shards: 4})
	rng := rand.New(rand.NewPCG(7, 8))
	large := 0
	for s := range uint64(20_000) {
		n := rng.IntN(600)
		if s%500 == 0 {
			n = 9000
			large++
		}
		if _, err := tab.Insert(s, testMeta{Seq: s}, payloadFor(s, 0, n), []byte("u"), int(s%3)); err != nil {
			t.Fatal(err)
		}
	}
	st := tab.Stats()
	if st.PayloadBlocks != 20_000-large || st.LargeInUse != large || st.LargeAllocs != uint64(large) {
		t.Fatalf("full: %+v", st)
	}
	for s := range uint64(20_000) {
		if !tab.Delete(s) {
			t.Fatalf("delete %d", s)
		}
	}
	st = tab.Stats()
	if st.Len != 0 || st.PayloadBlocks != 0 || st.LargeInUse != 0 || st.PayloadAllocs != st.PayloadFrees || st.PayloadAllocs != uint64(20_000-large) {
		t.Fatalf("empty: %+v", st)
	}
	// At most one spare chunk per slab is kept.
	classes := 0
	for i := range tab.shards {
		for _, bc := range tab.shards[i].classes {
			if bc != nil {
				classes++
			}
		}
	}
	if st.PayloadChunks > classes {
		t.Fatalf("chunks kept: %d (%d classes)", st.PayloadChunks, classes)
	}
}

// TestRangeAndPanic: Range visits every context once, lets fn delete, and a
// panic in fn leaves no shard locked.
func TestRangeAndPanic(t *testing.T) {
	tab := mustNew[uint64](t, Config{Shards: 8})
	for s := range uint64(5000) {
		if _, err := tab.Insert(s, s*2, nil, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		n := 0
		tab.Range(func(uint64, Ref[uint64]) bool {
			if n++; n == 77 {
				panic("callback")
			}
			return true
		})
	}()
	seen := make([]bool, 5000)
	tab.Range(func(seq uint64, r Ref[uint64]) bool {
		if seen[seq] || *r.Meta() != seq*2 {
			t.Fatalf("seq %d: seen %v meta %d", seq, seen[seq], *r.Meta())
		}
		seen[seq] = true
		if seq%2 == 0 {
			tab.Delete(seq)
		}
		return true
	})
	for s, ok := range seen {
		if !ok {
			t.Fatalf("%d not visited", s)
		}
	}
	if tab.Len() != 2500 {
		t.Fatalf("Len %d", tab.Len())
	}
	stopped := 0
	tab.Range(func(uint64, Ref[uint64]) bool { stopped++; return stopped < 10 })
	if stopped != 10 {
		t.Fatalf("Range went on after false: %d", stopped)
	}
}

// TestConcurrentSendersPoller is the engine's pattern: senders insert, one
// poller looks each context up, updates it in place and deletes it. Every
// context is delivered exactly once with its own payload (SPEC R12).
func TestConcurrentSendersPoller(t *testing.T) {
	senders, per := 6, 20_000
	if raceEnabled {
		per = 3000
	}
	tab := mustNew[testMeta](t, Config{Shards: 8})
	var seq atomic.Uint64
	sent := make(chan uint64, 1024)
	var wg sync.WaitGroup
	var fulls atomic.Int64
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				s := seq.Add(1)
				_, err := tab.Insert(s, testMeta{Seq: s}, payloadFor(s, 1, int(s%200)), payloadFor(s, 2, 8), 2)
				switch {
				case errors.Is(err, ErrFull):
					fulls.Add(1) // sent without a context: nothing to deliver
					continue
				case err != nil:
					t.Error(err)
					return
				}
				sent <- s
			}
		}()
	}
	go func() { wg.Wait(); close(sent) }()
	delivered := 0
	for s := range sent {
		r, ok := tab.Lookup(s)
		if !ok {
			t.Fatalf("context %d missing", s)
		}
		m := r.Meta()
		if m.Seq != s || len(r.Frame()) != int(s%200) || string(r.UserBuf()) != string(payloadFor(s, 2, 8)) {
			t.Fatalf("context %d: wrong content", s)
		}
		m.Retries++
		r.Scratch()[0] = 1
		if !tab.Delete(s) {
			t.Fatalf("delete %d", s)
		}
		if tab.Delete(s) {
			t.Fatalf("second delete of %d", s)
		}
		delivered++
	}
	if delivered+int(fulls.Load()) != senders*per || tab.Len() != 0 {
		t.Fatalf("delivered %d + full %d, want %d; Len %d", delivered, fulls.Load(), senders*per, tab.Len())
	}
}

// TestConcurrentMixed hammers all methods from several goroutines; each
// goroutine owns its sequence numbers, so it can check what it reads.
func TestConcurrentMixed(t *testing.T) {
	workers, ops := 4, 30_000
	if raceEnabled {
		ops = 5000
	}
	tab := mustNew[testMeta](t, Config{Shards: 4})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // Len, Stats and Range alongside
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = tab.Len()
			_ = tab.Stats()
			tab.Range(func(seq uint64, r Ref[testMeta]) bool { return seq%7 != 0 })
			runtime.Gosched()
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			live := map[uint64]bool{}
			for range ops {
				s := uint64(w) + uint64(workers)*rng.Uint64N(600)
				if live[s] {
					r, ok := tab.Lookup(s)
					if !ok || r.Meta().Seq != s || len(r.Frame()) != int(s%50) {
						t.Errorf("worker %d: %d wrong or missing", w, s)
						return
					}
					r.Meta().Retries++
					if rng.IntN(2) == 0 {
						if !tab.Delete(s) {
							t.Errorf("worker %d: delete %d", w, s)
							return
						}
						delete(live, s)
					}
					continue
				}
				_, err := tab.Insert(s, testMeta{Seq: s}, payloadFor(s, 0, int(s%50)), nil, 0)
				switch {
				case err == nil:
					live[s] = true
				default:
					t.Errorf("worker %d: insert %d: %v", w, s, err)
					return
				}
			}
			for s := range live {
				tab.Delete(s)
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	if tab.Len() != 0 {
		t.Fatalf("Len %d", tab.Len())
	}
}

// TestLookupLastBlockOfChunk looks up every context of a size class, the
// ones in the last blocks of full chunks and of the table among them, whose
// prefetch reaches past the chunk's end, and checks each against what was
// inserted (SPEC R12). It also pins when Lookup prefetches at all: not
// while the class's contexts fit in prefetchMinBytes (the stream
// bookkeeping is not even consulted), and once they outgrow it, in send
// order, it does.
func TestLookupLastBlockOfChunk(t *testing.T) {
	tab := mustNew[testMeta](t, Config{Shards: 1})
	frame := make([]byte, 256-int(hdrSize)-int(metaBytes[testMeta]()))
	// 256-byte blocks: the first chunk (4 KiB) holds 16, so context 15 is
	// in the last block of a chunk; the later chunks fill up the same way.
	check := func(n uint64) {
		t.Helper()
		for s := uint64(0); s < n; s++ {
			r, ok := tab.Lookup(s)
			if !ok || r.Meta().Seq != s || string(r.Frame()) != string(payloadFor(s, 3, len(frame))) {
				t.Fatalf("context %d missing or wrong", s)
			}
		}
		if st := tab.Stats(); st.PayloadBlocks != int(n) {
			t.Fatalf("%d blocks in use, want %d", st.PayloadBlocks, n)
		}
	}
	var inserted uint64
	fill := func(n uint64) {
		t.Helper()
		for ; inserted < n; inserted++ {
			copy(frame, payloadFor(inserted, 3, len(frame)))
			if _, err := tab.Insert(inserted, testMeta{Seq: inserted}, frame, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	small := uint64(16 + 16 + 32) // 16 KiB of contexts: within one core's cache
	fill(small)
	check(small)
	if pf := tab.shards[0].pf; pf.score != 0 || pf.turn != 0 {
		t.Fatalf("below %d bytes the stream bookkeeping ran (score %d, %d lookups)", prefetchMinBytes, pf.score, pf.turn)
	}
	large := uint64(prefetchMinBytes/256 + 64) // past the threshold
	fill(large)
	check(large)
	if pf := tab.shards[0].pf; pf.score <= 0 {
		t.Fatalf("%d contexts looked up in send order: stream score %d, want positive (prefetching)", large, pf.score)
	}
}

// TestStreamsFollow checks when a shard prefetches after a Lookup: while
// its recent Lookups continue streams through memory (each lands within
// two blocks after one of the last four answered blocks), and not when they
// scatter, where a prefetch would only add memory traffic. The expected
// switch points follow from the rule in streams' comment: a continued
// stream raises the score by one, anything else lowers it, prefetch while
// it is positive, the score bounded by ±streamScore.
func TestStreamsFollow(t *testing.T) {
	const sz = 256
	base := uintptr(1 << 30)
	run := func(s *streams, addrs []uintptr) []bool {
		out := make([]bool, len(addrs))
		for i, a := range addrs {
			out[i] = s.follow(a, sz)
		}
		return out
	}
	seqAddrs := func(from, n int) []uintptr {
		var a []uintptr
		for i := range n {
			a = append(a, base+uintptr(from+i)*sz)
		}
		return a
	}
	scattered := func(n int) []uintptr {
		var a []uintptr
		for i := range n {
			a = append(a, base+uintptr((i*7919)%100_003)*sz)
		}
		return a
	}

	// One stream: the first Lookup has nothing to continue (score -1),
	// the next two raise it to +1: prefetch from the third on.
	var s streams
	got := run(&s, seqAddrs(0, 50))
	for i, p := range got {
		if want := i >= 2; p != want {
			t.Fatalf("one stream, lookup %d: prefetch %v, want %v", i, p, want)
		}
	}

	// Scattered after it: the score falls from +8 by one a Lookup, so
	// prefetching stops at the 8th and stays off.
	got = run(&s, scattered(200))
	for i, p := range got {
		if want := i < 7; p != want {
			t.Fatalf("scattered after a stream, lookup %d: prefetch %v, want %v", i, p, want)
		}
	}

	// Two streams 320 blocks apart, alternating, each skipping a block now
	// and then (a straggler left in place): on again once the score,
	// at -8, has climbed back above 0.
	var two []uintptr
	for i := range 100 {
		step := i + i/10 // a skipped block every tenth step: still within two blocks
		two = append(two, base+uintptr(step)*sz, base+uintptr(320+step)*sz)
	}
	got = run(&s, two)
	for i, p := range got {
		if i > 20 && !p {
			t.Fatalf("two interleaved streams, lookup %d: no prefetch", i)
		}
	}

	// Five interleaved streams, more than it remembers: no prefetch, as
	// before the table prefetched at all.
	var five []uintptr
	for i := range 60 {
		for k := range 5 {
			five = append(five, base+uintptr(1000*k+i)*sz)
		}
	}
	s = streams{}
	for i, p := range run(&s, five) {
		if p {
			t.Fatalf("five streams, lookup %d: prefetch", i)
		}
	}
}
