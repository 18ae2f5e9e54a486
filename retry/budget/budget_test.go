package budget

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test moves by hand; safe for concurrent reads.
type fakeClock struct{ ns atomic.Int64 }

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) Now() time.Time          { return epoch.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func newBudget(t testing.TB, c Config) (*Budget, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	c.Clock = clk.Now
	b, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return b, clk
}

// grant calls TryRetry until it refuses and returns how many it granted.
func grant(b *Budget) int {
	n := 0
	for b.TryRetry() {
		n++
	}
	return n
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Ratio: -0.1},
		{Ratio: math.NaN()},
		{Ratio: MaxRatio + 1},
		{Window: time.Millisecond},
		{Window: -time.Second},
		{MinRetriesPerSecond: -2},
		{MinRetriesPerSecond: math.Inf(1)},
		{MinRetriesPerSecond: math.NaN()},
	}
	for _, c := range bad {
		if b, err := New(c); !errors.Is(err, ErrInvalidConfig) || b != nil {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig", c, b, err)
		}
	}
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.ratio != DefaultRatio || b.window != DefaultWindow || b.floor != DefaultMinRetriesPerSecond*DefaultWindow.Seconds() {
		t.Fatalf("defaults: ratio %v window %v floor %v", b.ratio, b.window, b.floor)
	}
	if s := b.Stats(); s.Allowance != 100 || s.Requests != 0 || s.Retries != 0 {
		t.Fatalf("fresh default budget: %+v", s)
	}
}

// TestRatio: with no floor, 1,000 requests allow exactly 100 retries.
func TestRatio(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor})
	if n := grant(b); n != 0 {
		t.Fatalf("no requests, no floor: granted %d", n)
	}
	for range 1000 {
		b.Request()
	}
	// New requests count from the next recomputation of the allowance, at
	// most a tick (10 ms for a 10 s window) later.
	if n := grant(b); n != 0 {
		t.Fatalf("granted %d within the tick", n)
	}
	clk.Advance(b.tick)
	if n := grant(b); n != 100 {
		t.Fatalf("granted %d retries for 1000 requests, want 100", n)
	}
	s := b.Stats()
	if s.Requests != 1000 || s.Retries != 100 || s.Allowance != 100 || s.Denied != 3 {
		t.Fatalf("stats %+v", s)
	}
	// Ten more requests earn exactly one more retry.
	for range 10 {
		b.Request()
	}
	clk.Advance(b.tick)
	if n := grant(b); n != 1 {
		t.Fatalf("granted %d after 10 more requests, want 1", n)
	}
}

// TestFloor: a quiet client still gets MinRetriesPerSecond × window retries,
// and gets them again once they have left the window.
func TestFloor(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: 2, Window: 10 * time.Second})
	if n := grant(b); n != 20 {
		t.Fatalf("floor granted %d, want 20", n)
	}
	// Half a window later the same retries are still in the window.
	clk.Advance(5 * time.Second)
	if n := grant(b); n != 0 {
		t.Fatalf("granted %d within the window", n)
	}
	// The retries were made between the budget's start and the mark taken
	// at 5 s (nothing happened in between to place them more precisely), so
	// they count until that mark is a window old: a quiet client's retries
	// leave the window late, never early.
	clk.Advance(6 * time.Second)
	if n := grant(b); n != 0 {
		t.Fatalf("granted %d at 11 s", n)
	}
	clk.Advance(5 * time.Second)
	if n := grant(b); n != 20 {
		t.Fatalf("at 16 s granted %d, want 20", n)
	}
}

// TestRelease: a retry granted and released is given back.
func TestRelease(t *testing.T) {
	b, _ := newBudget(t, Config{MinRetriesPerSecond: NoFloor})
	for range 100 {
		b.Request()
	}
	if n := grant(b); n != 10 {
		t.Fatalf("granted %d, want 10", n)
	}
	b.Release()
	b.Release()
	if n := grant(b); n != 2 {
		t.Fatalf("after two releases granted %d, want 2", n)
	}
}

// TestSlidingWindow runs a steady load for a minute of fake time, every
// request failing and asking for a retry, and checks that the retries in any
// window stay at Ratio of the requests in it (plus the floor).
func TestSlidingWindow(t *testing.T) {
	const (
		window  = 10 * time.Second
		tick    = 50 * time.Millisecond
		perTick = 40 // 800 requests per second
		floor   = 1.0
	)
	b, clk := newBudget(t, Config{Ratio: 0.1, Window: window, MinRetriesPerSecond: floor})
	type point struct {
		at, requests, retries int
	}
	var hist []point
	requests, retries := 0, 0
	for at := 0; at < 60000; at += int(tick / time.Millisecond) {
		for range perTick {
			b.Request()
			requests++
			if b.TryRetry() {
				retries++
			}
		}
		hist = append(hist, point{at, requests, retries})
		clk.Advance(tick)
	}
	ticksPerWindow := int(window / tick)
	for i := ticksPerWindow; i < len(hist); i++ {
		r := hist[i].requests - hist[i-ticksPerWindow].requests
		q := hist[i].retries - hist[i-ticksPerWindow].retries
		// The window slides by slots of window/16; one slot of requests is
		// the most the count can be off by, plus the floor.
		slop := float64(r) / slots
		if limit := 0.1*(float64(r)+slop) + floor*window.Seconds(); float64(q) > limit {
			t.Fatalf("at %d ms: %d retries for %d requests in the window, limit %.0f", hist[i].at, q, r, limit)
		}
		if low := 0.1*(float64(r)-slop) - 1; float64(q) < low {
			t.Fatalf("at %d ms: only %d retries for %d requests in the window, want ≥ %.0f", hist[i].at, q, r, low)
		}
	}
	ratio := float64(retries) / float64(requests)
	if ratio < 0.09 || ratio > 0.115 {
		t.Fatalf("overall %d retries / %d requests = %.3f, want ≈ 0.1", retries, requests, ratio)
	}
}

// TestOldRequestsLeaveTheWindow: a burst of requests, then silence; once the
// window has passed, only the floor is left.
func TestOldRequestsLeaveTheWindow(t *testing.T) {
	b, clk := newBudget(t, Config{Window: 10 * time.Second, MinRetriesPerSecond: NoFloor})
	for range 10000 {
		b.Request()
	}
	if s := b.Stats(); s.Requests != 10000 {
		t.Fatalf("stats %+v", s)
	}
	// Quiet for two windows, looked at once a second (each look takes a
	// mark, as retries would).
	for range 25 {
		clk.Advance(time.Second)
		b.Stats()
	}
	if s := b.Stats(); s.Requests != 0 || s.Allowance != 0 {
		t.Fatalf("after the window: %+v", s)
	}
	if b.TryRetry() {
		t.Fatal("retry granted with an empty window and no floor")
	}
}

// TestQuietEstimate: after a long period without any mark, the requests since
// the last mark are spread evenly (an estimate, not a count).
func TestQuietEstimate(t *testing.T) {
	b, clk := newBudget(t, Config{Window: 10 * time.Second, MinRetriesPerSecond: NoFloor})
	for range 100 { // 100 × 200 requests spread over 100 s, no retry checks
		for range 200 {
			b.Request()
		}
		clk.Advance(time.Second)
	}
	s := b.Stats()
	// 20,000 requests over 100 s → 2,000 in a 10 s window, give or take the
	// marks that Request took every 256 requests per shard.
	if s.Requests < 1800 || s.Requests > 2200 {
		t.Fatalf("estimated %v requests in the window, want ≈ 2000", s.Requests)
	}
}

// TestClockBackwards: a clock that jumps back neither panics nor lets the
// retries exceed the ratio of all requests.
func TestClockBackwards(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor})
	requests, granted := 0, 0
	for _, step := range []time.Duration{time.Minute, -2 * time.Minute, time.Second, -time.Hour, 3 * time.Hour} {
		clk.Advance(step)
		for range 100 {
			b.Request()
			requests++
		}
		granted += grant(b)
	}
	if granted == 0 || float64(granted) > 0.1*float64(requests) {
		t.Fatalf("granted %d retries for %d requests", granted, requests)
	}
}

// TestConcurrent hammers one budget from many goroutines under -race: the
// retries granted stay within the allowance plus the goroutines that raced.
func TestConcurrent(t *testing.T) {
	const goroutines, perG = 64, 2000
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor, Window: time.Hour})
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				b.Request()
				if b.TryRetry() {
					granted.Add(1)
					if i%7 == 0 { // not sent after all
						b.Release()
						granted.Add(-1)
					}
				}
				if g == 0 && i%100 == 0 {
					clk.Advance(time.Second)
				}
			}
		}()
	}
	wg.Wait()
	s := b.Stats()
	if s.Requests != goroutines*perG {
		t.Fatalf("requests %v, want %d", s.Requests, goroutines*perG)
	}
	if s.Retries != granted.Load() {
		t.Fatalf("budget counts %d retries, callers hold %d", s.Retries, granted.Load())
	}
	if limit := 0.1*goroutines*perG + goroutines; float64(granted.Load()) > limit {
		t.Fatalf("granted %d, limit %.0f", granted.Load(), limit)
	}
}

func TestNoAlloc(t *testing.T) {
	b, _ := newBudget(t, Config{})
	if a := testing.AllocsPerRun(1000, b.Request); a != 0 {
		t.Errorf("Request: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if b.TryRetry() {
			b.Release()
		}
	}); a != 0 {
		t.Errorf("TryRetry: %v allocs", a)
	}
}

func BenchmarkRequest(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		bg.Request()
	}
}

func BenchmarkTryRetry(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		bg.Request()
		if bg.TryRetry() {
			bg.Release()
		}
	}
}

func ExampleBudget() {
	b, err := New(Config{Ratio: 0.1, MinRetriesPerSecond: NoFloor})
	if err != nil {
		panic(err)
	}
	for range 50 {
		b.Request() // every call's first attempt
	}
	granted := 0
	for b.TryRetry() { // every call failed and wants a retry
		granted++
	}
	fmt.Println("retries granted for 50 requests:", granted)
	fmt.Printf("%+v\n", b.Stats())
	// Output:
	// retries granted for 50 requests: 5
	// {Requests:50 Retries:5 Allowance:5 Denied:1}
}

func TestTryRetryAt(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor})
	for range 100 {
		b.Request()
	}
	n := 0
	for b.TryRetryAt(clk.Now()) {
		n++
	}
	if n != 10 {
		t.Fatalf("granted %d, want 10", n)
	}
	// Before the budget's origin: read as the origin, no panic.
	if b.TryRetryAt(time.Time{}) {
		t.Fatal("granted past the allowance")
	}
}

func BenchmarkRequestParallel(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bg.Request()
		}
	})
}

// BenchmarkTryRetryParallel is a failing downstream: every call records its
// request and asks for a retry; 9 in 10 are refused.
func BenchmarkTryRetryParallel(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bg.Request()
			bg.TryRetry()
		}
	})
}
