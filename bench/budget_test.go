package bench

// The retry budget's hot paths under b.RunParallel (SPEC B4, issue 7):
// "record" is what every call pays (count one request), "allow" what a
// failing call pays (count the request, then ask for a retry). Baselines in
// the same run: one shared atomic counter (what a naive budget costs per
// request), a monotonic clock read (the floor of any check that slides a
// time window), and failsafe-go's budget, which limits in-flight retries
// rather than a rate over a window but sits at the same place in a call.

import (
	"sync/atomic"
	"testing"
	"time"

	fsbudget "github.com/failsafe-go/failsafe-go/budget"

	"github.com/readretry/readretry/retry/budget"
)

var (
	sinkBool   atomic.Bool
	sinkShared atomic.Int64
	clockBase  = time.Now()
)

// failsafeBudget is the part of failsafe-go's budget that its retry policy
// calls; the methods are exported on an unexported type.
type failsafeBudget interface {
	TryAcquirePermit() bool
	ReleasePermit()
}

func BenchmarkBudget(b *testing.B) {
	b.Run("readretry-record", func(b *testing.B) {
		bg, err := budget.New(budget.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bg.Request()
			}
		})
		s := bg.Stats()
		if s.Requests <= 0 {
			b.Fatalf("no requests counted: %+v", s)
		}
	})

	b.Run("readretry-allow", func(b *testing.B) {
		bg, err := budget.New(budget.Config{})
		if err != nil {
			b.Fatal(err)
		}
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
	})

	// The same with the caller's cached clock (TryRetryAt), as a poll loop
	// that already read the time passes it in.
	b.Run("readretry-allow-cached-clock", func(b *testing.B) {
		bg, err := budget.New(budget.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var n int64
			now := time.Now()
			for i := 0; pb.Next(); i++ {
				if i%1024 == 0 {
					now = time.Now()
				}
				bg.Request()
				if bg.TryRetryAt(now) {
					n++
				}
			}
			granted.Add(n)
		})
		b.ReportMetric(float64(granted.Load())/float64(b.N), "granted/op")
	})

	b.Run("baseline-shared-atomic", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sinkShared.Add(1)
			}
		})
	})

	b.Run("baseline-clock-read", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var d time.Duration
			for pb.Next() {
				d += time.Since(clockBase)
			}
			sinkShared.Add(int64(d))
		})
	})

	b.Run("failsafe-go-acquire-release", func(b *testing.B) {
		fb, ok := fsbudget.New().(failsafeBudget)
		if !ok {
			b.Skip("failsafe-go budget API changed")
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if fb.TryAcquirePermit() {
					fb.ReleasePermit()
				} else {
					sinkBool.Store(true)
				}
			}
		})
	})
}
