package bench

// Side-by-side timer benchmarks (SPEC §5 "Timing wheel", issue 3): the
// standard library's time.AfterFunc + Stop, github.com/RussellLuo/timingwheel
// and readretry's timerwheel, on the same workload in one run:
//
//	go test -run '^$' -bench Timer -benchmem -count 3 .
//
// Each benchmark first makes 500,000 timers pending (deadlines 1 min +
// i%10000 ms, the spread of RussellLuo/timingwheel's own benchmark, pushed
// out so that none fires during the run), then times one operation: a
// timer one second out is started and stopped at once, the path of a read
// answered in time. The peers run their own goroutines (runtime timers, the
// wheel's poller), so timerwheel runs with its Driver advancing every 1 ms.
// B/timer is the heap taken per pending timer; x-vs-AfterFunc and
// x-vs-timingwheel are the speedups over the peers' ns/op in the same run.

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RussellLuo/timingwheel"

	"github.com/readretry/readretry/timerwheel"
)

const twPending = 500_000

// ns/op of the peers' latest run, for the speedup metrics.
var twAfterFuncNs, twRussellNs float64

func twNoop() {}

func twBackground(i int) time.Duration {
	return time.Minute + time.Duration(i%10000)*time.Millisecond
}

// twHeap returns the live heap in bytes after a GC.
func twHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func twNsPerOp(b *testing.B) float64 {
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// twReportSpeedup reports how many times faster than the peers this run
// was; the peers must have run first in the same process.
func twReportSpeedup(b *testing.B) {
	ns := twNsPerOp(b)
	if twAfterFuncNs > 0 && ns > 0 {
		b.ReportMetric(twAfterFuncNs/ns, "x-vs-AfterFunc")
	}
	if twRussellNs > 0 && ns > 0 {
		b.ReportMetric(twRussellNs/ns, "x-vs-timingwheel")
	}
}

func BenchmarkTimerScheduleCancel(b *testing.B) {
	b.Run("AfterFunc", func(b *testing.B) {
		before := twHeap()
		base := make([]*time.Timer, twPending)
		for i := range base {
			base[i] = time.AfterFunc(twBackground(i), twNoop)
		}
		perTimer := float64(twHeap()-before) / twPending
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			time.AfterFunc(time.Second, twNoop).Stop()
		}
		b.StopTimer()
		twAfterFuncNs = twNsPerOp(b)
		for _, t := range base {
			t.Stop()
		}
		b.ReportMetric(perTimer, "B/timer")
	})

	b.Run("timingwheel", func(b *testing.B) {
		tw := timingwheel.NewTimingWheel(time.Millisecond, 64)
		tw.Start()
		defer tw.Stop()
		before := twHeap()
		base := make([]*timingwheel.Timer, twPending)
		for i := range base {
			base[i] = tw.AfterFunc(twBackground(i), twNoop)
		}
		perTimer := float64(twHeap()-before) / twPending
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			tw.AfterFunc(time.Second, twNoop).Stop()
		}
		b.StopTimer()
		twRussellNs = twNsPerOp(b)
		for _, t := range base {
			t.Stop()
		}
		b.ReportMetric(perTimer, "B/timer")
	})

	// timerwheel as the engine configures it (one shard, per-P staging).
	b.Run("timerwheel", func(b *testing.B) {
		start := time.Now()
		before := twHeap()
		w, err := timerwheel.New(timerwheel.Config{Tick: time.Millisecond, Start: start})
		if err != nil {
			b.Fatal(err)
		}
		for i := range twPending {
			if _, err := w.ScheduleOffset(twBackground(i), uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
		perTimer := float64(twHeap()-before) / twPending
		d, err := timerwheel.NewDriver(w, time.Millisecond, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Stop()
		// The engine keeps times as nanoseconds since the wheel's Start
		// and reads its clock once per poll, not per read; refreshed
		// here every 1024 operations so the deadline stays a second out
		// however long the run.
		var deadline time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if i%1024 == 0 {
				deadline = time.Since(start) + time.Second
			}
			h, err := w.ScheduleOffset(deadline, uint64(i))
			if err != nil {
				b.Fatal(err)
			}
			if !w.Cancel(h) {
				b.Fatal("Cancel = false")
			}
		}
		b.StopTimer()
		twReportSpeedup(b)
		b.ReportMetric(perTimer, "B/timer")
	})
}

// BenchmarkTimerParallelScheduleCancel is the same operation from
// GOMAXPROCS goroutines at once (b.RunParallel).
func BenchmarkTimerParallelScheduleCancel(b *testing.B) {
	b.Run("AfterFunc", func(b *testing.B) {
		base := make([]*time.Timer, twPending)
		for i := range base {
			base[i] = time.AfterFunc(twBackground(i), twNoop)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				time.AfterFunc(time.Second, twNoop).Stop()
			}
		})
		b.StopTimer()
		twAfterFuncNs = twNsPerOp(b)
		for _, t := range base {
			t.Stop()
		}
	})

	b.Run("timingwheel", func(b *testing.B) {
		tw := timingwheel.NewTimingWheel(time.Millisecond, 64)
		tw.Start()
		defer tw.Stop()
		base := make([]*timingwheel.Timer, twPending)
		for i := range base {
			base[i] = tw.AfterFunc(twBackground(i), twNoop)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tw.AfterFunc(time.Second, twNoop).Stop()
			}
		})
		b.StopTimer()
		twRussellNs = twNsPerOp(b)
		for _, t := range base {
			t.Stop()
		}
	})

	for _, c := range []struct {
		name   string
		shards int
	}{{"timerwheel", 1}, {"timerwheel-shards4", 4}} {
		b.Run(c.name, func(b *testing.B) {
			start := time.Now()
			w, err := timerwheel.New(timerwheel.Config{Tick: time.Millisecond, Start: start, Shards: c.shards})
			if err != nil {
				b.Fatal(err)
			}
			for i := range twPending {
				if _, err := w.ScheduleOffset(twBackground(i), uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
			d, err := timerwheel.NewDriver(w, time.Millisecond, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Stop()
			var ids atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := ids.Add(1) << 40 // a distinct id range per goroutine
				var h timerwheel.Handle
				var deadline time.Duration
				for pb.Next() {
					if id%1024 == 0 {
						deadline = time.Since(start) + time.Second
					}
					id++
					var err error
					if h, err = w.ScheduleOffset(deadline, id); err != nil {
						b.Error(err)
						return
					}
					if !w.Cancel(h) {
						b.Error("cancel of a pending timer failed")
						return
					}
				}
			})
			b.StopTimer()
			twReportSpeedup(b)
		})
	}
}
