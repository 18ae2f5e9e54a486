package ctxtable

import (
	"runtime"
	"testing"
)

// TestAllocIdleTable: an idle table with the default shard count costs at
// most 4 KiB fresh, and not much more once 10,000 contexts came and went
// (SPEC R15: an idle zone is cheap; the package comment's figures).
func TestAllocIdleTable(t *testing.T) {
	if raceEnabled {
		t.Skip("heap figures under the race detector are not the product's")
	}
	fresh, burst := idleBytes(t, false), idleBytes(t, true)
	t.Logf("idle table, %d shards: %.0f bytes fresh, %.0f after a burst", DefaultShards(), fresh, burst)
	if fresh > 4096 {
		t.Fatalf("a fresh table takes %.0f bytes, want at most 4 KiB", fresh)
	}
	if burst > 16384 {
		t.Fatalf("a table that emptied takes %.0f bytes, want at most 16 KiB", burst)
	}
}

// TestAllocOverhead: the table's own bytes per context at 500,000 contexts
// (header, index, rounding, slack; not the meta, frame or user buffer) stay
// within the 40 bytes the engine's per-context budget gives the table
// (issue 15; the package comment's R15 figures).
func TestAllocOverhead(t *testing.T) {
	if raceEnabled {
		t.Skip("heap figures under the race detector are not the product's")
	}
	n := benchResident
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	tab := mustNew[benchMeta](t, Config{})
	for s := range uint64(n) {
		if _, err := tab.Insert(s, benchMeta{AsyncID: s}, benchFrame, benchUser, 0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := float64(ms.HeapAlloc-before)/float64(n) - float64(len(benchFrame)+len(benchUser)) - float64(metaBytes[benchMeta]())
	t.Logf("table overhead: %.1f bytes a context", per)
	if per > 40 {
		t.Fatalf("table overhead %.1f bytes a context, want at most 40", per)
	}
	runtime.KeepAlive(tab)
}
