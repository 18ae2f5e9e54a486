package ctxtable

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestChurn keeps the table at a steady size through 10 million operations
// (a Delete of a random live context, then an Insert of a new one): with
// backward-shift deletion there are no tombstones, so the index does not
// grow without bound nor slow down, and the longest probe stays bounded.
// Random deletion order is the hard case for PlaceCounter's ring: a third of
// the contexts outlive a lap and live in the overflow index. Under the race
// detector the sizes shrink 20× (contexts) and 50× (operations).
func TestChurn(t *testing.T) {
	capacity, ops := benchResident, 10_000_000
	if raceEnabled {
		capacity, ops = benchResident/20, 10_000_000/50
	}
	tab := mustNew[uint64](t, Config{})
	live := make([]uint64, 0, capacity)
	next := uint64(0)
	for range capacity {
		if _, err := tab.Insert(next, next, nil, nil, 0); err != nil {
			t.Fatal(err)
		}
		live = append(live, next)
		next++
	}
	cells := tab.Stats().IndexCells
	rng := rand.New(rand.NewPCG(11, 0))
	for op := 0; op < ops; op += 2 {
		i := rng.IntN(len(live))
		if !tab.Delete(live[i]) {
			t.Fatalf("op %d: live %d not deleted", op, live[i])
		}
		if _, err := tab.Insert(next, next, nil, nil, 0); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		live[i] = next
		next++
	}
	st := tab.Stats()
	t.Logf("%d ops at %d contexts: max probe %d, %d index cells, %d contexts in overflow",
		ops, capacity, st.MaxProbe, st.IndexCells, st.Overflow)
	if st.Len != capacity || st.IndexCells > 2*cells {
		t.Fatalf("after churn: Len %d (want %d), index %d cells (was %d)", st.Len, capacity, st.IndexCells, cells)
	}
	if st.MaxProbe >= 128 {
		t.Fatalf("max probe %d", st.MaxProbe)
	}
	for _, s := range live[:1000] {
		if r, ok := tab.Lookup(s); !ok || *r.Meta() != s {
			t.Fatalf("%d lost", s)
		}
	}
}

// TestFillDrainHeap inserts 500,000 contexts (25,000 under the race
// detector), deletes them all, and checks that the table is empty and the
// heap is back near where it started: slab chunks go back to the Go heap
// and the shard indexes shrink.
func TestFillDrainHeap(t *testing.T) {
	n := benchResident
	if raceEnabled {
		n = benchResident / 20
	}
	frame, user := make([]byte, 110), make([]byte, 24)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	start := ms.HeapAlloc
	tab := mustNew[testMeta](t, Config{})
	for s := range uint64(n) {
		if _, err := tab.Insert(s, testMeta{Seq: s}, frame, user, 0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	full := ms.HeapAlloc
	for s := range uint64(n) {
		if !tab.Delete(s) {
			t.Fatalf("delete %d", s)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	end := ms.HeapAlloc
	st := tab.Stats()
	t.Logf("heap: start %d KiB, %d contexts %d KiB, after delete %d KiB; %+v", start>>10, n, full>>10, end>>10, st)
	if tab.Len() != 0 || st.Len != 0 || st.PayloadBlocks != 0 {
		t.Fatalf("not empty: %+v", st)
	}
	// What may stay: one spare chunk per size class used and shard (≤ 256
	// KiB each) and the minimum indexes.
	if limit := uint64(chunkMaxBytes*tab.Shards()) + 1<<20; end > start+limit {
		t.Fatalf("heap grew %d KiB after everything was deleted (limit %d KiB)", (end-start)>>10, limit>>10)
	}
	runtime.KeepAlive(tab)
}
