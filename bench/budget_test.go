package bench

// The retry budget's hot paths (SPEC B4; issues 7, 11 item 6, 13), each
// against baselines measured in the same run:
//
//   - record: what every call pays, counting one request. Baselines: one
//     shared atomic counter (the floor of any shared count), the
//     stack-address sharding the budget used before issue 13 (a counter per
//     cache line, picked by the address of the caller's stack), and
//     failsafe-go's budget (RecordExecution + ReleaseExecution: it counts
//     executions in flight).
//   - tryretry: what a failing call pays, counting its request and asking
//     for a retry (9 in 10 refused at the 10% ratio). Baselines: a budget
//     of two shared atomics without any window (retries < 10% of all
//     requests ever: the cheapest possible check, and wrong after a burst),
//     and failsafe-go's TryAcquirePermit (+ ReleasePermit when granted),
//     which bounds retries in flight rather than over a window; and one
//     clock read alone, the part of TryRetry's cost that knowing the time
//     takes (TryRetryAt, with the caller's time, does without it).
//
// Every readretry line reports its ratio to the baselines as "x-<baseline>"
// (ns/op over the baseline's ns/op): below 1 is faster.

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	fsbudget "github.com/failsafe-go/failsafe-go/budget"

	"github.com/readretry/readretry/retry/budget"
)

var (
	sinkBool   atomic.Bool
	sinkShared atomic.Int64
)

// failsafeBudget is the part of failsafe-go's budget that its retry policy
// calls; the methods are exported on an unexported type.
type failsafeBudget interface {
	RecordExecution()
	ReleaseExecution()
	TryAcquirePermit() bool
	ReleasePermit()
}

// nsPerOp holds the ns/op of the sub-benchmarks that have run, by name; a
// sub-benchmark's last (largest) run wins.
var nsPerOp = map[string]float64{}

func record(b *testing.B, name string) {
	nsPerOp[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// reportRatios reports this run's ns/op over each baseline's.
func reportRatios(b *testing.B, baselines ...string) {
	own := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	for _, base := range baselines {
		if ns, ok := nsPerOp[base]; ok && ns > 0 {
			b.ReportMetric(own/ns, "x-"+base)
		}
	}
}

// stackSharded is the request counter of the budget before issue 13: 256
// counters on their own 128-byte lines, picked by a hash of the caller's
// stack address (stable per goroutine, differing between goroutines).
type stackSharded struct {
	shards [256]struct {
		n atomic.Int64
		_ [120]byte
	}
}

func (s *stackSharded) add() {
	var x byte
	h := uint64(uintptr(unsafe.Pointer(&x)) >> 11)
	s.shards[(h*0x9E3779B97F4A7C15)>>56].n.Add(1)
}

func (s *stackSharded) sum() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].n.Load()
	}
	return n
}

// naiveBudget is the windowless baseline: retries < 10% of all requests.
type naiveBudget struct {
	requests, retries atomic.Int64
}

func (n *naiveBudget) tryRetry() bool {
	if float64(n.retries.Load()+1) > 0.1*float64(n.requests.Load()) {
		return false
	}
	n.retries.Add(1)
	return true
}

func newFailsafe(b *testing.B) failsafeBudget {
	fb, ok := fsbudget.NewBuilder().WithMaxRate(0.1).Build().(failsafeBudget)
	if !ok {
		b.Fatal("failsafe-go budget API changed")
	}
	return fb
}

func newBudget(b *testing.B) *budget.Budget {
	bg, err := budget.New(budget.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return bg
}

// BenchmarkBudgetRecord: counting one request, one goroutine and
// b.RunParallel. Issue 11 item 6 compares "stack-sharded" with
// "shared-atomic" under RunParallel.
func BenchmarkBudgetRecord(b *testing.B) {
	b.Run("shared-atomic", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			n.Add(1)
		}
		sinkShared.Add(n.Load())
		record(b, "shared-atomic")
	})
	b.Run("failsafe-go", func(b *testing.B) {
		fb := newFailsafe(b)
		b.ReportAllocs()
		for b.Loop() {
			fb.RecordExecution()
			fb.ReleaseExecution()
		}
		record(b, "failsafe-go")
	})
	b.Run("readretry", func(b *testing.B) {
		bg := newBudget(b)
		b.ReportAllocs()
		for b.Loop() {
			bg.Request()
		}
		if s := bg.Stats(); s.Requests != uint64(b.N) {
			b.Fatalf("%d requests counted, %d made", s.Requests, b.N)
		}
		reportRatios(b, "shared-atomic", "failsafe-go")
	})

	b.Run("parallel/shared-atomic", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
		sinkShared.Add(n.Load())
		record(b, "parallel-shared-atomic")
	})
	b.Run("parallel/stack-sharded", func(b *testing.B) {
		s := new(stackSharded)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.add()
			}
		})
		sinkShared.Add(s.sum())
		record(b, "parallel-stack-sharded")
		reportRatios(b, "parallel-shared-atomic")
	})
	b.Run("parallel/failsafe-go", func(b *testing.B) {
		fb := newFailsafe(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				fb.RecordExecution()
				fb.ReleaseExecution()
			}
		})
		record(b, "parallel-failsafe-go")
	})
	b.Run("parallel/readretry", func(b *testing.B) {
		bg := newBudget(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bg.Request()
			}
		})
		if s := bg.Stats(); s.Requests != uint64(b.N) {
			b.Fatalf("%d requests counted, %d made", s.Requests, b.N)
		}
		reportRatios(b, "parallel-shared-atomic", "parallel-stack-sharded", "parallel-failsafe-go")
	})
}

// BenchmarkBudgetTryRetry: a failing downstream, every call counting its
// request and asking for a retry; one goroutine and b.RunParallel.
func BenchmarkBudgetTryRetry(b *testing.B) {
	b.Run("shared-atomic", func(b *testing.B) {
		var nb naiveBudget
		b.ReportAllocs()
		for b.Loop() {
			nb.requests.Add(1)
			sinkBool.Store(nb.tryRetry())
		}
		record(b, "try-shared-atomic")
	})
	b.Run("failsafe-go", func(b *testing.B) {
		fb := newFailsafe(b)
		b.ReportAllocs()
		for b.Loop() {
			fb.RecordExecution()
			if fb.TryAcquirePermit() {
				fb.ReleasePermit()
			}
			fb.ReleaseExecution()
		}
		record(b, "try-failsafe-go")
	})
	// clock: one monotonic clock read, what TryRetry pays to know which
	// slot of the window it is in (failsafe-go reads no clock: it bounds
	// retries in flight, not over a window of time).
	b.Run("clock", func(b *testing.B) {
		start := time.Now()
		var sum time.Duration
		b.ReportAllocs()
		for b.Loop() {
			sum += time.Since(start)
		}
		sinkShared.Add(int64(sum))
		record(b, "try-clock")
	})
	b.Run("readretry", func(b *testing.B) {
		bg := newBudget(b)
		b.ReportAllocs()
		granted := 0
		for b.Loop() {
			bg.Request()
			if bg.TryRetry() {
				granted++
			}
		}
		b.ReportMetric(float64(granted)/float64(b.N), "granted/op")
		reportRatios(b, "try-shared-atomic", "try-failsafe-go", "try-clock")
	})
	// TryRetryAt: the caller's cached clock, as the engine's poll loop
	// passes it in (one clock read per 1,024 calls here).
	b.Run("readretry-at", func(b *testing.B) {
		bg := newBudget(b)
		b.ReportAllocs()
		granted := 0
		now := time.Now()
		for i := 0; b.Loop(); i++ {
			if i%1024 == 0 {
				now = time.Now()
			}
			bg.Request()
			if bg.TryRetryAt(now) {
				granted++
			}
		}
		b.ReportMetric(float64(granted)/float64(b.N), "granted/op")
		reportRatios(b, "try-shared-atomic", "try-failsafe-go")
	})

	b.Run("parallel/shared-atomic", func(b *testing.B) {
		var nb naiveBudget
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				nb.requests.Add(1)
				if nb.tryRetry() {
					sinkBool.Store(true)
				}
			}
		})
		record(b, "parallel-try-shared-atomic")
	})
	b.Run("parallel/failsafe-go", func(b *testing.B) {
		fb := newFailsafe(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				fb.RecordExecution()
				if fb.TryAcquirePermit() {
					fb.ReleasePermit()
				}
				fb.ReleaseExecution()
			}
		})
		record(b, "parallel-try-failsafe-go")
	})
	b.Run("parallel/readretry", func(b *testing.B) {
		bg := newBudget(b)
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var n int64
			for pb.Next() {
				bg.Request()
				if bg.TryRetry() {
					n++
				}
			}
			granted.Add(n)
		})
		b.ReportMetric(float64(granted.Load())/float64(b.N), "granted/op")
		reportRatios(b, "parallel-try-shared-atomic", "parallel-try-failsafe-go")
	})
}
