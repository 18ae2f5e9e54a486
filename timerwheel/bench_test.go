package timerwheel

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// pendingTimers is the load of the targets: one zone at the SPEC
// R2 default cap.
const pendingTimers = 500_000

// bt0 is the benchmarks' Start: a time.Now() reading, so that deadlines
// carry a monotonic clock reading as the engine's do (time.Time.Sub is
// faster on that path than on the wall clock's).
var bt0 = time.Now()

// backgroundDeadline spreads the pending timers like the peers' own
// benchmarks (RussellLuo/timingwheel): i%10000 ms, so every level of the
// wheel is populated.
func backgroundDeadline(start time.Time, i int) time.Time {
	return start.Add(time.Duration(1+i%10000) * time.Millisecond)
}

// fill returns a wheel with pendingTimers timers pending and the heap it
// takes per pending timer, in bytes (slab chunks, free bitmap, lists).
func fill(b *testing.B, shards int) (*Wheel, float64) {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w, err := New(Config{Tick: time.Millisecond, Start: bt0, Shards: shards})
	if err != nil {
		b.Fatal(err)
	}
	for i := range pendingTimers {
		if _, err := w.Schedule(backgroundDeadline(bt0, i), uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return w, float64(after.HeapAlloc-before.HeapAlloc) / pendingTimers
}

// BenchmarkScheduleCancel: with 500,000 timers pending, schedule a timer
// one second out and cancel it, the engine's path for a read answered in
// time (and the peers' StartStop benchmark).
func BenchmarkScheduleCancel(b *testing.B) {
	w, perTimer := fill(b, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h, err := w.ScheduleOffset(time.Second, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		if !w.Cancel(h) {
			b.Fatal("Cancel = false")
		}
	}
	b.ReportMetric(perTimer, "B/timer")
}

// BenchmarkScheduleCancelOldest: a ring of 500,000 pending timers; each op
// cancels the oldest and schedules a new one at a random deadline. The node
// cancelled was last touched 500,000 operations ago, so this is the
// cache-cold case (an answer arriving just before its deadline).
func BenchmarkScheduleCancelOldest(b *testing.B) {
	w, err := New(Config{Tick: time.Millisecond, Start: bt0})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	ring := make([]Handle, pendingTimers)
	for i := range ring {
		ring[i], _ = w.Schedule(bt0.Add(time.Duration(1+r.IntN(10_000))*time.Millisecond), uint64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		k := i % pendingTimers
		if !w.Cancel(ring[k]) {
			b.Fatal("Cancel = false")
		}
		h, err := w.Schedule(bt0.Add(time.Duration(1+r.IntN(10_000))*time.Millisecond), uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		ring[k] = h
	}
}

// BenchmarkReset: move one of 500,000 pending timers to a new deadline (the
// complex-read path, SPEC R10: each accepted packet re-arms the wait).
func BenchmarkReset(b *testing.B) {
	w, _ := fill(b, 1)
	h, err := w.Schedule(bt0.Add(time.Second), 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if !w.Reset(h, bt0.Add(time.Duration(1000+i%1000)*time.Millisecond)) {
			b.Fatal("Reset = false")
		}
	}
}

// BenchmarkScheduleFire: a steady state of about 500,000 pending timers;
// each op schedules one timer, and every 500 ops the clock moves one tick
// and Advance fires what is due (about 500 timers). ns/op is the whole life
// of a timer that fires; fire-ns/timer is Advance's share. Deadlines fall
// anywhere inside a tick, so late-ticks is the worst delay behind a
// deadline, in ticks (target ≤ 1; mean about 0.5 from rounding up); a timer
// that fires early fails the benchmark.
//
// Two deadline patterns: "engine" is the retry engine's, now + k·x with
// k in 1..3 (SPEC R6), so timers due together were scheduled together;
// "random" is uniform over 0..2 s, the cache-hostile case where the
// timers of one tick are scattered over the slab.
func BenchmarkScheduleFire(b *testing.B) {
	const perTick = pendingTimers / 1000
	patterns := []struct {
		name string
		next func(r *rand.Rand) time.Duration
	}{
		{"engine", func(r *rand.Rand) time.Duration {
			return time.Duration(1+r.IntN(3))*(500*time.Millisecond) + time.Duration(r.IntN(int(time.Millisecond)))
		}},
		{"random", func(r *rand.Rand) time.Duration {
			return time.Duration(1 + r.Int64N(int64(2*time.Second)))
		}},
	}
	for _, p := range patterns {
		b.Run(p.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			w, err := New(Config{Tick: time.Millisecond, Start: bt0})
			if err != nil {
				b.Fatal(err)
			}
			now := bt0
			// id is the deadline in ns since bt0, so fire can measure lateness.
			schedule := func() {
				d := p.next(r)
				if _, err := w.Schedule(now.Add(d), uint64(now.Sub(bt0)+d)); err != nil {
					b.Fatal(err)
				}
			}
			var late, maxLate time.Duration
			var fired int
			var nowNs time.Duration // now - bt0, set once per tick
			fire := func(id uint64) {
				l := nowNs - time.Duration(id)
				if l < 0 {
					b.Fatalf("timer fired %v early", -l)
				}
				late += l
				maxLate = max(maxLate, l)
				fired++
			}
			var longest time.Duration
			tick := func() time.Duration {
				now = now.Add(time.Millisecond)
				nowNs = now.Sub(bt0)
				t := time.Now()
				w.Advance(now, fire)
				d := time.Since(t)
				longest = max(longest, d)
				return d
			}
			// Warm up to the steady state: run the schedule long enough
			// that every pending timer was scheduled in it.
			for range 1500 {
				for range perTick {
					schedule()
				}
				tick()
			}
			late, maxLate, fired, longest = 0, 0, 0, 0
			var advancing time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				schedule()
				if i%perTick == perTick-1 {
					advancing += tick()
				}
			}
			b.StopTimer()
			if fired > 0 {
				b.ReportMetric(float64(advancing.Nanoseconds())/float64(fired), "fire-ns/timer")
				b.ReportMetric(float64(late.Nanoseconds())/float64(fired)/1e6, "mean-late-ticks")
				b.ReportMetric(float64(maxLate.Nanoseconds())/1e6, "late-ticks")
			}
			b.ReportMetric(float64(w.Len()), "pending")
			b.ReportMetric(float64(longest.Microseconds()), "max-advance-µs")
		})
	}
}

// BenchmarkFire: the cost per fired timer alone: 500,000 timers due over
// 1000 ticks, fired by an Advance every tick; ns/op is per timer. With
// several shards Advance merges them in deadline order, which costs one
// lock per shard per batch.
func BenchmarkFire(b *testing.B) {
	for _, shards := range []int{1, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			w, err := New(Config{Tick: time.Millisecond, Start: bt0, Shards: shards})
			if err != nil {
				b.Fatal(err)
			}
			fired := 0
			fire := func(uint64) { fired++ }
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				b.StopTimer()
				n := min(b.N-done, pendingTimers)
				base := bt0.Add(time.Duration(done/pendingTimers) * 2 * time.Second)
				for i := range n {
					if _, err := w.Schedule(base.Add(time.Duration(1+i%1000)*time.Millisecond), uint64(i)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				for ms := 1; ms <= 1000; ms++ {
					w.Advance(base.Add(time.Duration(ms)*time.Millisecond), fire)
				}
				done += n
			}
			if fired != b.N {
				b.Fatalf("fired %d, want %d", fired, b.N)
			}
		})
	}
}

// BenchmarkAdvanceIdle: the poller's fixed cost, an Advance by one tick
// with 500,000 timers pending and none due.
func BenchmarkAdvanceIdle(b *testing.B) {
	for _, shards := range []int{1, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			w, err := New(Config{Tick: time.Millisecond, Start: bt0, Shards: shards})
			if err != nil {
				b.Fatal(err)
			}
			far := bt0.Add(1000 * time.Hour)
			for i := range pendingTimers {
				if _, err := w.Schedule(far.Add(time.Duration(i)*time.Millisecond), uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
			fire := func(uint64) { b.Fatal("fired") }
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w.Advance(bt0.Add(time.Duration(i)*time.Millisecond), fire)
			}
		})
	}
}

// BenchmarkParallelScheduleCancel: Schedule+Cancel from GOMAXPROCS
// goroutines at 500,000 pending, for each shard count: the measurement
// behind the default of one shard.
func BenchmarkParallelScheduleCancel(b *testing.B) {
	for _, shards := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			w, perTimer := fill(b, shards)
			defer b.ReportMetric(perTimer, "B/timer")
			deadline := bt0.Add(time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := rand.Uint64()
				var h Handle
				for pb.Next() {
					id++
					var err error
					if h, err = w.Schedule(deadline, id); err != nil {
						b.Error(err)
						return
					}
					if !w.Cancel(h) {
						b.Error("cancel of a pending timer failed")
						return
					}
				}
			})
		})
	}
}

// BenchmarkIdle reports the heap of an idle wheel as the engine makes one
// (one shard), over 1,000 wheels (SPEC R15: an idle zone is
// cheap): never used (fresh-B/wheel), and after a burst of 10,000 timers
// that all fired and the lanes' next refill (burst-B/wheel). ns/op is
// making one wheel.
func BenchmarkIdle(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one lane, as in TestAllocIdleWheel
	for range b.N {
		w, err := New(Config{Tick: DefaultTick, Start: bt0})
		if err != nil {
			b.Fatal(err)
		}
		sinkWheel = w
	}
	b.StopTimer()
	b.ReportMetric(idleBytes(b, false), "fresh-B/wheel")
	b.ReportMetric(idleBytes(b, true), "burst-B/wheel")
}

var sinkWheel *Wheel
