package backoff

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// strategies lists every B1 strategy with its cap, including extreme ones.
func strategies() []struct {
	name string
	s    Strategy
	cap  time.Duration
} {
	return []struct {
		name string
		s    Strategy
		cap  time.Duration
	}{
		{"None", None{}, 0},
		{"Constant", Constant{Wait: 50 * ms}, 50 * ms},
		{"Constant negative", Constant{Wait: -ms}, 0},
		{"Random", Random{Min: 10 * ms, Max: 20 * ms}, 20 * ms},
		{"Random inverted", Random{Min: 20 * ms, Max: 10 * ms}, 20 * ms},
		{"Random full range", Random{Max: MaxDuration}, MaxDuration},
		{"Exponential", Exponential{Base: 100 * ms, Max: 10 * time.Second}, 10 * time.Second},
		{"Exponential x3", Exponential{Base: ms, Multiplier: 3, Max: time.Minute}, time.Minute},
		{"Exponential uncapped", Exponential{Base: ms}, MaxDuration},
		{"Exponential huge multiplier", Exponential{Base: ms, Multiplier: 1e300, Max: time.Hour}, time.Hour},
		{"Exponential NaN multiplier", Exponential{Base: ms, Multiplier: math.NaN(), Max: time.Hour}, time.Hour},
		{"Exponential base above max", Exponential{Base: time.Hour, Max: time.Second}, time.Second},
		{"FullJitter", FullJitter{Base: 100 * ms, Max: 10 * time.Second}, 10 * time.Second},
		{"FullJitter uncapped", FullJitter{Base: time.Second}, MaxDuration},
		{"Decorrelated", Decorrelated{Base: 10 * ms, Max: 5 * time.Second}, 5 * time.Second},
		{"Decorrelated uncapped", Decorrelated{Base: time.Hour}, MaxDuration},
		{"Decorrelated base above max", Decorrelated{Base: time.Hour, Max: time.Second}, time.Second},
		{"Settings", Settings{InitialRetryDelay: ms, RetryDelayMultiplier: 2, MaxRetryDelay: time.Second}, time.Second},
		{"Settings uncapped", Settings{InitialRetryDelay: ms, RetryDelayMultiplier: 10}, MaxDuration},
	}
}

// TestStrategyBounds checks B1 for every strategy: never negative, never above
// the cap, no overflow at retry 64, 1,000 or 10⁶ (nor at the int limits), with
// prev fed back as an iterator does.
func TestStrategyBounds(t *testing.T) {
	retries := []int{math.MinInt, -1, 0, 1, 2, 3, 10, 62, 63, 64, 65, 100, 1000, 1_000_000, math.MaxInt32, math.MaxInt}
	for _, c := range strategies() {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range retries {
				for _, prev := range []time.Duration{0, ms, c.cap, MaxDuration, -time.Hour} {
					for range 20 {
						d := c.s.Delay(n, prev)
						if d < 0 || d > c.cap {
							t.Fatalf("Delay(%d, %v) = %v, want in [0, %v]", n, prev, d, c.cap)
						}
						if n < 1 && d != 0 {
							t.Fatalf("Delay(%d) = %v, want 0 for retry < 1", n, d)
						}
					}
				}
			}
			// A long chain, prev fed back.
			var prev time.Duration
			for n := 1; n <= 2000; n++ {
				d := c.s.Delay(n, prev)
				if d < 0 || d > c.cap {
					t.Fatalf("chain: Delay(%d, %v) = %v", n, prev, d)
				}
				prev = d
			}
		})
	}
}

func TestExponentialValues(t *testing.T) {
	e := Exponential{Base: 100 * ms, Max: 1500 * ms}
	want := []time.Duration{0, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1500 * ms, 1500 * ms}
	for n, w := range want {
		if got := e.Delay(n, 0); got != w {
			t.Errorf("Delay(%d) = %v, want %v", n, got, w)
		}
	}
	// Exactly representable up to the last power before saturation.
	u := Exponential{Base: 1}
	for n := 1; n <= 63; n++ {
		want := time.Duration(1) << (n - 1)
		if got := u.Delay(n, 0); got != want {
			t.Fatalf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := u.Delay(64, 0); got != MaxDuration {
		t.Fatalf("Delay(64) = %v, want MaxDuration", got)
	}
}

// TestRandomCoverage samples 10,000 delays of each random strategy and
// checks they stay in bounds and cover the interval.
func TestRandomCoverage(t *testing.T) {
	cases := []struct {
		name   string
		s      Strategy
		n      int
		lo, hi time.Duration
	}{
		{"Random", Random{Min: 10 * ms, Max: 20 * ms}, 1, 10 * ms, 20 * ms},
		{"FullJitter retry 4", FullJitter{Base: 100 * ms, Max: time.Second}, 4, 0, 800 * ms},
		{"Decorrelated first", Decorrelated{Base: 10 * ms, Max: time.Second}, 1, 10 * ms, 30 * ms},
	}
	for _, c := range cases {
		lo, hi := MaxDuration, time.Duration(-1)
		for range 10000 {
			d := c.s.Delay(c.n, 0)
			if d < c.lo || d > c.hi {
				t.Fatalf("%s: %v outside [%v, %v]", c.name, d, c.lo, c.hi)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		span := c.hi - c.lo
		if lo > c.lo+span/100 || hi < c.hi-span/100 {
			t.Errorf("%s: samples span [%v, %v], want close to [%v, %v]", c.name, lo, hi, c.lo, c.hi)
		}
	}
}

func TestStrategiesNoAlloc(t *testing.T) {
	for _, c := range strategies() {
		allocs := testing.AllocsPerRun(100, func() {
			var prev time.Duration
			for n := 1; n < 10; n++ {
				prev = c.s.Delay(n, prev)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs", c.name, allocs)
		}
	}
}

var sinkDelay time.Duration

func BenchmarkStrategy(b *testing.B) {
	for _, c := range strategies()[:15] {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var prev time.Duration
			for i := 0; i < b.N; i++ {
				prev = c.s.Delay(i%16+1, prev)
			}
			sinkDelay = prev
		})
	}
}

func ExampleSettings_Plan() {
	// The "capped RPC timeout" table of seed 002 (SPEC G5).
	s := Settings{
		InitialRetryDelay:    200 * time.Millisecond,
		RetryDelayMultiplier: 2,
		MaxRetryDelay:        500 * time.Millisecond,
		InitialRPCTimeout:    500 * time.Millisecond,
		RPCTimeoutMultiplier: 2,
		MaxRPCTimeout:        2 * time.Second,
		TotalTimeout:         4 * time.Second,
	}
	for _, a := range s.Plan() {
		fmt.Printf("attempt %d: timeout %v, delay %v, %v → %v\n", a.Number, a.RPCTimeout, a.Delay, a.Start, a.End)
	}
	// Output:
	// attempt 1: timeout 500ms, delay 0s, 0s → 500ms
	// attempt 2: timeout 1s, delay 200ms, 700ms → 1.7s
	// attempt 3: timeout 1.9s, delay 400ms, 2.1s → 4s
}

func ExampleIterator() {
	// One operation driven by elapsed time, jitter off so the output is
	// stable. A real caller sleeps a.Delay, then runs the attempt with
	// a.RPCTimeout, then passes the time elapsed since the first attempt.
	it := Iterator{
		Settings: Settings{InitialRPCTimeout: time.Second, TotalTimeout: 3 * time.Second, MaxAttempts: 5},
		Strategy: Exponential{Base: 100 * time.Millisecond, Max: time.Second},
		NoJitter: true,
	}
	elapsed := time.Duration(0)
	for {
		a, ok := it.Next(elapsed)
		if !ok {
			break
		}
		fmt.Printf("attempt %d after %v, timeout %v\n", a.Number, a.Delay, a.RPCTimeout)
		elapsed = a.Start + 500*time.Millisecond // each attempt fails after 500 ms
	}
	// Output:
	// attempt 1 after 0s, timeout 1s
	// attempt 2 after 100ms, timeout 1s
	// attempt 3 after 200ms, timeout 1s
	// attempt 4 after 400ms, timeout 800ms
}

func ExampleExponential() {
	e := Exponential{Base: 100 * time.Millisecond, Max: time.Second}
	for _, n := range []int{1, 2, 3, 4, 5, 64, 1_000_000} {
		fmt.Println(n, e.Delay(n, 0))
	}
	// Output:
	// 1 100ms
	// 2 200ms
	// 3 400ms
	// 4 800ms
	// 5 1s
	// 64 1s
	// 1000000 1s
}
