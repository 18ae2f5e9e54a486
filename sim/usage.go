package sim

import (
	"math"
	"runtime/metrics"
	"time"
)

// Usage is a snapshot of this process's resource use, for the figures a
// run reports about a client's cost: CPU time, heap and goroutine stacks,
// and the garbage collector's pauses. Take one before and one after, and
// subtract.
type Usage struct {
	// CPU is the process's user plus system CPU time since it started (0
	// where the platform does not report it).
	CPU time.Duration
	// HeapObjects is the bytes of heap objects, live or not yet swept
	// (runtime/metrics /memory/classes/heap/objects:bytes).
	HeapObjects uint64
	// Stacks is the bytes of goroutine stacks (/memory/classes/heap/stacks:bytes).
	Stacks uint64
	// LiveHeap is the heap the last garbage collection found live
	// (/gc/heap/live:bytes): exact right after runtime.GC().
	LiveHeap uint64
	// Goroutines is the number of goroutines (/sched/goroutines:goroutines).
	Goroutines uint64
	// pauses is the distribution of stop-the-world pauses of the garbage
	// collector so far (/sched/pauses/total/gc:seconds).
	pauses *metrics.Float64Histogram
}

var usageMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/gc/heap/live:bytes",
	"/sched/goroutines:goroutines",
	"/sched/pauses/total/gc:seconds",
}

// ReadUsage returns the process's resource use now. It allocates a little
// (the metrics' samples); take it outside measured loops.
func ReadUsage() Usage {
	s := make([]metrics.Sample, len(usageMetrics))
	for i, name := range usageMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	u := Usage{CPU: processCPU()}
	val := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	u.HeapObjects, u.Stacks, u.LiveHeap, u.Goroutines = val(0), val(1), val(2), val(3)
	if s[4].Value.Kind() == metrics.KindFloat64Histogram {
		u.pauses = s[4].Value.Float64Histogram()
	}
	return u
}

// GCPausesSince returns how many stop-the-world pauses the garbage
// collector made between prev and u, and their 99th percentile (the upper
// bound of the histogram bucket it falls in; 0 with no pause).
func (u Usage) GCPausesSince(prev Usage) (count uint64, p99 time.Duration) {
	if u.pauses == nil {
		return 0, 0
	}
	counts := make([]uint64, len(u.pauses.Counts))
	for i, c := range u.pauses.Counts {
		counts[i] = c
		if prev.pauses != nil && i < len(prev.pauses.Counts) {
			counts[i] -= prev.pauses.Counts[i]
		}
		count += counts[i]
	}
	if count == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(0.99 * float64(count)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			hi := u.pauses.Buckets[i+1]
			if math.IsInf(hi, 1) {
				hi = u.pauses.Buckets[i]
			}
			return count, time.Duration(hi * float64(time.Second))
		}
	}
	return count, 0
}
