package budget

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
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
func (c *fakeClock) Elapsed() time.Duration  { return time.Duration(c.ns.Load()) }

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
		{Window: 15 * time.Millisecond}, // 16 slots of 1 ms at least
		{Window: 3 * time.Millisecond, Slots: 4},
		{Window: -time.Second},
		{Window: MaxWindow + 1},
		{Slots: 1},
		{Slots: 3},
		{Slots: -16},
		{Slots: 2 * MaxSlots},
		{Shards: -1},
		{Shards: 6},
		{Shards: 2 * MaxShards},
		{MinRetriesPerSecond: -2},
		{MinRetriesPerSecond: math.Inf(1)},
		{MinRetriesPerSecond: math.NaN()},
	}
	for _, c := range bad {
		if b, err := New(c); !errors.Is(err, ErrInvalidConfig) || b != nil {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig", c, b, err)
		}
	}
	for _, c := range []Config{{Window: 16 * time.Millisecond}, {Window: 2 * time.Millisecond, Slots: 2}, {Window: MaxWindow, Slots: MaxSlots}, {Shards: 1}, {Shards: MaxShards}} {
		if _, err := New(c); err != nil {
			t.Errorf("New(%+v): %v", c, err)
		}
	}
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.ratio != DefaultRatio || b.slot*DefaultSlots != DefaultWindow || len(b.ring) != DefaultSlots || len(b.shards) != DefaultShards ||
		b.floor != DefaultMinRetriesPerSecond*DefaultWindow.Seconds() {
		t.Fatalf("defaults: ratio %v slot %v slots %d floor %v", b.ratio, b.slot, len(b.ring), b.floor)
	}
	if s := b.Stats(); s.Allowance != 100 || s.WindowRequests != 0 || s.WindowRetries != 0 {
		t.Fatalf("fresh default budget: %+v", s)
	}
}

// TestRatio: with no floor, 1,000 requests allow exactly 100 retries, at
// once, and ten more requests exactly one more.
func TestRatio(t *testing.T) {
	b, _ := newBudget(t, Config{MinRetriesPerSecond: NoFloor})
	if n := grant(b); n != 0 {
		t.Fatalf("no requests, no floor: granted %d", n)
	}
	for range 1000 {
		b.Request()
	}
	if n := grant(b); n != 100 {
		t.Fatalf("granted %d retries for 1000 requests, want 100", n)
	}
	want := Stats{Requests: 1000, Retries: 100, Denied: 2, WindowRequests: 1000, WindowRetries: 100, Allowance: 100}
	if s := b.Stats(); s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
	for range 10 {
		b.Request()
	}
	if n := grant(b); n != 1 {
		t.Fatalf("granted %d after 10 more requests, want 1", n)
	}
}

// TestFloor: a quiet client still gets MinRetriesPerSecond × window retries,
// and gets them again as soon as they have left the window.
func TestFloor(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: 2, Window: 10 * time.Second})
	if n := grant(b); n != 20 {
		t.Fatalf("floor granted %d, want 20", n)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if n := grant(b); n != 0 {
		t.Fatalf("granted %d while the first 20 are in the window", n)
	}
	// The 20 were granted at time 0; at 10 s the window is (0, 10 s].
	clk.Advance(time.Nanosecond)
	if n := grant(b); n != 20 {
		t.Fatalf("at 10 s granted %d, want 20", n)
	}
}

// TestBurstThenSilence is issue 13's input: 50,000 requests within 0.4 s,
// 12 s with no traffic, then 10,000 retry checks. The last window saw no
// request, so the ratio grants nothing: with NoFloor no retry at all, with
// the default floor exactly the floor (10/s × 10 s = 100). Before the fix,
// 2,440 (2,540) were granted.
func TestBurstThenSilence(t *testing.T) {
	for _, c := range []struct {
		floor float64
		want  int
	}{{NoFloor, 0}, {0, 100}} {
		b, clk := newBudget(t, Config{Ratio: 0.1, Window: 10 * time.Second, MinRetriesPerSecond: c.floor})
		for range 50000 {
			b.Request()
			clk.Advance(400 * time.Millisecond / 50000)
		}
		clk.Advance(12 * time.Second)
		granted := 0
		for range 10000 {
			if b.TryRetry() {
				granted++
			}
		}
		if granted != c.want {
			t.Errorf("floor %v: granted %d of 10,000 after the silence, want %d", c.floor, granted, c.want)
		}
		if s := b.Stats(); s.Requests != 50000 || s.WindowRequests != 0 || s.Denied != uint64(10000-c.want) {
			t.Errorf("floor %v: stats %+v", c.floor, s)
		}
	}
}

// model is an exact sliding window over a timeline of requests and grants,
// kept by the test independently of the budget: it records when each request
// and each grant happened, and counts them over any interval.
type model struct {
	window, slot time.Duration
	slots        int64
	ratio, floor float64

	reqs     []time.Duration // request times, ascending
	reqFloor []int64         // slot of the budget's last clock reading before each request
	grants   []time.Duration // grant times (cancelled ones removed), ascending
	lastRead time.Duration   // time of the last call that reads the budget's clock

	granted, denied, cancelled uint64
}

// count returns how many of xs (ascending) are in (from, to].
func count(xs []time.Duration, from, to time.Duration) int {
	lo := sort.Search(len(xs), func(i int) bool { return xs[i] > from })
	hi := sort.Search(len(xs), func(i int) bool { return xs[i] > to })
	return hi - lo
}

func (m *model) slotOf(t time.Duration) int64 { return int64(t / m.slot) }

// surelyCounted is how many requests the budget counts for certain at time
// t: a request counts from the slot of the last clock reading before it (or
// a later one), and the window is t's slot and the slots−1 before it.
func (m *model) surelyCounted(t time.Duration) int {
	first := m.slotOf(t) - m.slots + 1
	lo := sort.Search(len(m.reqFloor), func(i int) bool { return m.reqFloor[i] >= first })
	return len(m.reqFloor) - lo
}

const eps = 1e-6

// checkGrant: after a grant at t, the retries of the window less its first
// slot are within Ratio × the window's requests + floor (SPEC B4).
func (m *model) checkGrant(t time.Duration) error {
	r := count(m.grants, t-m.window+m.slot, t)
	q := count(m.reqs, t-m.window, t)
	if float64(r) > m.ratio*float64(q)+m.floor+eps {
		return fmt.Errorf("at %v: granted, making %d retries in (t-W+slot, t] for %d requests in (t-W, t]: over %.2f",
			t, r, q, m.ratio*float64(q)+m.floor)
	}
	return nil
}

// checkRefusal: a refusal at t is justified by the window: one more retry
// would exceed what the surely counted requests allow.
func (m *model) checkRefusal(t time.Duration) error {
	r := count(m.grants, t-m.window, t)
	q := m.surelyCounted(t)
	if float64(r+1) <= m.ratio*float64(q)+m.floor-eps {
		return fmt.Errorf("at %v: refused with %d retries in the window and %d requests surely counted (allowance %.2f)",
			t, r, q, m.ratio*float64(q)+m.floor)
	}
	return nil
}

func (m *model) checkStats(t time.Duration, s Stats) error {
	lowQ, highQ := m.surelyCounted(t), count(m.reqs, t-m.window, t)
	lowR, highR := count(m.grants, t-m.window+m.slot, t), count(m.grants, t-m.window, t)
	switch {
	case s.Requests != uint64(len(m.reqs)) || s.Retries != m.granted || s.Denied != m.denied || s.Cancelled != m.cancelled:
		return fmt.Errorf("at %v: totals %+v, want %d requests, %d granted, %d denied, %d cancelled",
			t, s, len(m.reqs), m.granted, m.denied, m.cancelled)
	case s.WindowRequests < uint64(lowQ) || s.WindowRequests > uint64(highQ):
		return fmt.Errorf("at %v: %d requests in the window, want [%d, %d]", t, s.WindowRequests, lowQ, highQ)
	case s.WindowRetries < uint64(lowR) || s.WindowRetries > uint64(highR):
		return fmt.Errorf("at %v: %d retries in the window, want [%d, %d]", t, s.WindowRetries, lowR, highR)
	}
	return nil
}

// TestModel drives budgets through random timelines — bursts of requests,
// silences short and long, failing stretches where every request asks for a
// retry, reservations given back — and checks every decision and snapshot
// against the exact sliding window of the model.
func TestModel(t *testing.T) {
	configs := []Config{
		{},
		{MinRetriesPerSecond: NoFloor},
		{Ratio: 0.5, Window: time.Second, Slots: 4, Shards: 1, MinRetriesPerSecond: 3},
		{Ratio: 1, Window: 2 * time.Second, Slots: 2, Shards: 2, MinRetriesPerSecond: NoFloor},
		{Ratio: 0.05, Window: 30 * time.Second, Slots: 64, MinRetriesPerSecond: 0.5},
		{Ratio: 0.1, Window: 1600 * time.Millisecond, Slots: 16, MinRetriesPerSecond: NoFloor},
	}
	seeds := 8
	if testing.Short() || raceEnabled { // sequential: the race detector adds nothing
		seeds = 2
	}
	for ci, c := range configs {
		for seed := range seeds {
			at := seed%2 == 1 // TryRetryAt with the clock's time, or TryRetry
			t.Run(fmt.Sprintf("config%d/seed%d", ci, seed), func(t *testing.T) {
				runModel(t, c, uint64(ci*100+seed), at)
			})
		}
	}
}

func runModel(t *testing.T, c Config, seed uint64, at bool) {
	b, clk := newBudget(t, c)
	m := &model{
		window: b.slot * time.Duration(len(b.ring)), slot: b.slot, slots: int64(len(b.ring)),
		ratio: b.ratio, floor: b.floor,
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dur := func(max time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(max) + 1)) }
	request := func() {
		b.Request()
		m.reqs = append(m.reqs, clk.Elapsed())
		m.reqFloor = append(m.reqFloor, m.slotOf(m.lastRead))
	}
	try := func(reserve bool) {
		now := clk.Elapsed()
		var ok bool
		var r Reservation
		switch {
		case reserve:
			r, ok = b.Reserve()
		case at:
			ok = b.TryRetryAt(clk.Now())
		default:
			ok = b.TryRetry()
		}
		m.lastRead = now
		if !ok {
			m.denied++
			if err := m.checkRefusal(now); err != nil {
				t.Fatal(err)
			}
			return
		}
		m.granted++
		m.grants = append(m.grants, now)
		if err := m.checkGrant(now); err != nil {
			t.Fatal(err)
		}
		if reserve {
			// Given back at once (the context ended during the backoff).
			r.Cancel()
			m.cancelled++
			m.grants = m.grants[:len(m.grants)-1]
		}
	}
	for range 3000 {
		switch p := rng.IntN(100); {
		case p < 25: // a burst
			n, step := 1+rng.IntN(400), dur(m.slot/100)
			for range n {
				request()
				clk.Advance(step)
			}
		case p < 40: // a failing stretch: every request asks for a retry
			n, step := 1+rng.IntN(200), dur(m.slot/20)
			for range n {
				request()
				try(false)
				clk.Advance(step)
			}
		case p < 55: // retry checks alone
			n, step := 1+rng.IntN(50), dur(m.slot/10)
			for range n {
				try(false)
				clk.Advance(step)
			}
		case p < 60:
			try(true)
		case p < 75:
			clk.Advance(dur(m.slot))
		case p < 85:
			clk.Advance(dur(m.window))
		case p < 90: // a silence longer than the window
			clk.Advance(m.window + dur(3*m.window))
		default:
			s := b.Stats()
			m.lastRead = clk.Elapsed()
			if err := m.checkStats(m.lastRead, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.granted == 0 || m.denied == 0 {
		t.Fatalf("timeline exercised too little: %d granted, %d denied", m.granted, m.denied)
	}
}

// TestReserveCancel: a cancelled reservation is given back; one whose slot
// has left the window has nothing to give back; the zero one is a no-op.
func TestReserveCancel(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor, Window: 10 * time.Second})
	for range 100 {
		b.Request()
	}
	var rs []Reservation
	for {
		r, ok := b.Reserve()
		if !ok {
			break
		}
		rs = append(rs, r)
	}
	if len(rs) != 10 {
		t.Fatalf("reserved %d, want 10", len(rs))
	}
	rs[0].Cancel()
	rs[1].Cancel()
	if n := grant(b); n != 2 {
		t.Fatalf("after two cancels granted %d, want 2", n)
	}
	Reservation{}.Cancel()
	clk.Advance(10 * time.Second) // the window (0, 10 s] has no request
	rs[2].Cancel()                // its slot left the window: nothing to give
	if s := b.Stats(); s.Cancelled != 2 || s.Retries != 12 || s.WindowRetries != 0 {
		t.Fatalf("stats %+v", s)
	}
	if n := grant(b); n != 0 {
		t.Fatalf("granted %d with an empty window", n)
	}
}

// TestTryRetryAt: a caller's own (fake) clock passed in, the same clock as
// Config.Clock.
func TestTryRetryAt(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor, Window: time.Second})
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
	// A second later the window is empty.
	if b.TryRetryAt(clk.Now().Add(time.Second)) {
		t.Fatal("granted for requests older than the window")
	}
	// A time behind the latest reading counts as that reading: the old
	// requests stay out of the window.
	if b.TryRetryAt(clk.Now()) {
		t.Fatal("granted at a time behind the latest reading")
	}
}

// TestClockBackwards: a clock that jumps back neither panics nor lets the
// retries exceed the ratio of the requests.
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

// TestLongSilence: silences of many windows, and one of 2^24 slots and more
// (the tags' range), leave nothing behind and nothing stuck.
func TestLongSilence(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor, Window: 16 * time.Millisecond})
	for _, silence := range []time.Duration{time.Second, time.Hour, (1 << 24) * time.Millisecond, (1<<24 + 3) * time.Millisecond, 100 * 24 * time.Hour} {
		for range 1000 {
			b.Request()
		}
		if n := grant(b); n != 100 {
			t.Fatalf("before a silence of %v: granted %d, want 100", silence, n)
		}
		clk.Advance(silence)
		if n := grant(b); n != 0 {
			t.Fatalf("after a silence of %v: granted %d, want 0", silence, n)
		}
	}
}

// TestConcurrent hammers one budget from many goroutines under -race while
// the clock moves: the totals add up, and the retries in the window stay
// within the allowance plus one per goroutine (grants racing across a slot
// boundary).
func TestConcurrent(t *testing.T) {
	const goroutines, perG = 16, 3000
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor, Window: 160 * time.Millisecond})
	var granted, cancelled atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Add(1)
	go func() { // the clock, in steps of a tenth of a slot
		defer ticker.Done()
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(time.Millisecond)
				runtime.Gosched()
			}
		}
	}()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				b.Request()
				if r, ok := b.Reserve(); ok {
					granted.Add(1)
					if i%7 == 0 {
						r.Cancel()
						cancelled.Add(1)
					}
				}
				if i%100 == 0 {
					s := b.Stats()
					if float64(s.WindowRetries) > s.Allowance+goroutines {
						t.Errorf("window: %d retries, allowance %.1f", s.WindowRetries, s.Allowance)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	ticker.Wait()
	s := b.Stats()
	if s.Requests != goroutines*perG || s.Retries != uint64(granted.Load()) || s.Cancelled > uint64(cancelled.Load()) {
		t.Fatalf("stats %+v; callers: %d requests, %d granted, %d cancelled", s, goroutines*perG, granted.Load(), cancelled.Load())
	}
	if s.Retries+s.Denied != goroutines*perG {
		t.Fatalf("%d granted + %d denied != %d asked", s.Retries, s.Denied, goroutines*perG)
	}
}

// TestStatsMonotonic: Requests never decreases between snapshots taken while
// other goroutines record requests and slots are zeroed.
func TestStatsMonotonic(t *testing.T) {
	b, clk := newBudget(t, Config{Window: 16 * time.Millisecond})
	var wg sync.WaitGroup
	var done atomic.Bool
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				b.Request()
				clk.Advance(time.Microsecond * 50)
			}
		}()
	}
	var last uint64
	for range 20000 {
		s := b.Stats()
		if s.Requests < last {
			t.Errorf("Requests went from %d to %d", last, s.Requests)
			break
		}
		last = s.Requests
	}
	done.Store(true)
	wg.Wait()
}

// TestNoAlloc: the hot paths allocate nothing.
func TestNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	b, clk := newBudget(t, Config{})
	if a := testing.AllocsPerRun(1000, b.Request); a != 0 {
		t.Errorf("Request: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() { b.TryRetry() }); a != 0 {
		t.Errorf("TryRetry: %v allocs", a)
	}
	now := clk.Now()
	if a := testing.AllocsPerRun(1000, func() { b.TryRetryAt(now) }); a != 0 {
		t.Errorf("TryRetryAt: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if r, ok := b.Reserve(); ok {
			r.Cancel()
		}
	}); a != 0 {
		t.Errorf("Reserve+Cancel: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		clk.Advance(time.Second)
		b.Stats()
	}); a != 0 {
		t.Errorf("Stats: %v allocs", a)
	}
}

// TestAllocBytes: a budget at its defaults takes about 1 KiB of heap (an
// engine zone holds one; an idle zone must stay small, SPEC R15).
func TestAllocBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("heap sizes differ under -race")
	}
	const n = 1000
	keep := make([]*Budget, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		b, err := New(Config{})
		if err != nil {
			t.Fatal(err)
		}
		keep[i] = b
	}
	runtime.ReadMemStats(&after)
	per := float64(after.TotalAlloc-before.TotalAlloc) / n
	if per > 1280 {
		t.Fatalf("%.0f bytes per default budget, want about 1 KiB (≤ 1280)", per)
	}
	t.Logf("%.0f bytes per default budget", per)
	runtime.KeepAlive(keep)
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
	s := b.Stats()
	fmt.Printf("requests %d, retries %d, denied %d, allowance %.0f\n", s.Requests, s.Retries, s.Denied, s.Allowance)
	// Output:
	// retries granted for 50 requests: 5
	// requests 50, retries 5, denied 1, allowance 5
}

func BenchmarkRequest(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		bg.Request()
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

// BenchmarkTryRetry is a failing downstream: every call records its request
// and asks for a retry; 9 in 10 are refused.
func BenchmarkTryRetry(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	granted := 0
	for b.Loop() {
		bg.Request()
		if bg.TryRetry() {
			granted++
		}
	}
	b.ReportMetric(float64(granted)/float64(b.N), "granted/op")
}

func BenchmarkTryRetryParallel(b *testing.B) {
	bg, _ := New(Config{})
	b.ReportAllocs()
	var granted atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		n := int64(0)
		for pb.Next() {
			bg.Request()
			if bg.TryRetry() {
				n++
			}
		}
		granted.Add(n)
	})
	b.ReportMetric(float64(granted.Load())/float64(b.N), "granted/op")
}

// TestRequestsAlone: a client that records requests and never asks for a
// retry (nothing else reads the clock) still has them counted within a slot
// of the right time, at steady rates from a few per slot to many: the
// window holds at least the requests of its last Slots−1 slots, less the
// at most min(rate per slot, 255) that counted in the slot before them.
func TestRequestsAlone(t *testing.T) {
	for _, perSlot := range []int{3, 7, 50, 300, 1000, 20000} {
		b, clk := newBudget(t, Config{Window: 16 * time.Millisecond, MinRetriesPerSecond: NoFloor})
		step := b.slot / time.Duration(perSlot)
		var times []time.Duration
		for range 40 * perSlot { // 40 slots, 2.5 windows
			b.Request()
			times = append(times, clk.Elapsed())
			clk.Advance(step)
		}
		now, window := clk.Elapsed(), b.slot*time.Duration(len(b.ring))
		s := b.Stats()
		low := max(count(times, now-window+b.slot, now)-min(perSlot, sampleEvery-1), 0)
		high := count(times, now-window, now)
		if s.WindowRequests < uint64(low) || s.WindowRequests > uint64(high) {
			t.Errorf("%d per slot: %d requests in the window, want [%d, %d]", perSlot, s.WindowRequests, low, high)
		}
	}
}

// TestCancelOlderSlot: a grant given back after the ring has moved past its
// slot (still inside the window) is free again at once, although the
// window's older slots were already summed for the current slot. Expected
// values from SPEC B4: 100 requests at 10% allow 10 retries in the window.
func TestCancelOlderSlot(t *testing.T) {
	b, clk := newBudget(t, Config{MinRetriesPerSecond: NoFloor, Window: 16 * time.Second, Slots: 16})
	for range 100 {
		b.Request()
	}
	var rs []Reservation
	for {
		r, ok := b.Reserve()
		if !ok {
			break
		}
		rs = append(rs, r)
	}
	if len(rs) != 10 {
		t.Fatalf("reserved %d, want 10", len(rs))
	}
	clk.Advance(time.Second) // the next slot: slot 0 is now an older one
	if b.TryRetry() {
		t.Fatal("granted an 11th retry for 100 requests")
	}
	rs[0].Cancel()
	if n := grant(b); n != 1 {
		t.Fatalf("after a cancel in an older slot granted %d, want 1", n)
	}
}
