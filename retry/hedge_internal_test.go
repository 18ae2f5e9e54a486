package retry

import (
	"testing"
	"time"
)

// BenchmarkHedgeRecord is the poller's cost per answer of the R21 estimate:
// one bucket increment, a recompute (a scan of 2×168 counters) every 64
// answers, a rotation every half window. The fixed log-bucketed histogram
// keeps it to a few ns and 0 allocs, against the ~1 µs a simple read
// costs (BenchmarkSimpleRead): no per-sample storage, no sort, and senders
// read the published estimate with one atomic load (BenchmarkHedgeFirst).
func BenchmarkHedgeRecord(b *testing.B) {
	c := &Client{hedge: Hedge{Percentile: 0.95, Window: DefaultHedgeWindow, MinSamples: DefaultHedgeSamples}}
	h := &hedgeEst{}
	now := int64(0)
	// Warm up past MinSamples so that the estimate exists at any b.N
	// (CI runs every benchmark once) and the loop measures the steady state.
	for i := range 4 * DefaultHedgeSamples {
		now += int64(10 * time.Microsecond)
		h.record(c, int64(time.Millisecond)+int64(i%1024)*int64(time.Microsecond), now)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now += int64(10 * time.Microsecond)
		h.record(c, int64(time.Millisecond)+int64(i%1024)*int64(time.Microsecond), now)
	}
	if h.d.Load() == 0 {
		b.Fatal("no estimate")
	}
}

// BenchmarkHedgeFirst is the sender's cost: the first segment from the
// published estimate.
func BenchmarkHedgeFirst(b *testing.B) {
	z := &zone{hedge: &hedgeEst{}}
	z.hedge.d.Store(int64(20 * time.Millisecond))
	var sum time.Duration
	b.ReportAllocs()
	for b.Loop() {
		d, _ := z.firstSegment(3*time.Second, 2)
		sum += d
	}
	if sum == 0 {
		b.Fatal("no segment")
	}
}

// TestBucketBounds: every latency falls in a bucket whose upper bound is
// above it and at most 5/4 of it (the estimate's resolution), from
// 1 ms to 100 s.
func TestBucketBounds(t *testing.T) {
	for ns := int64(time.Millisecond); ns < int64(100*time.Second); ns = ns*107/100 + 1 {
		top := bucketTop(bucketOf(ns))
		if top <= ns || float64(top) > float64(ns)*1.25+1024 {
			t.Fatalf("%v: bucket top %v", time.Duration(ns), time.Duration(top))
		}
	}
}
