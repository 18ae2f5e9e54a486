package backoff

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

const ms = time.Millisecond

// row builds an Attempt from the seed's millisecond columns: number, RPC
// timeout, retry delay, call start, call end.
func row(n int, timeout, delay, start, end time.Duration) Attempt {
	return Attempt{Number: n, RPCTimeout: timeout * ms, Delay: delay * ms, Start: start * ms, End: end * ms}
}

// TestPlanSeed002 reproduces the worked tables of seed 002 (SPEC G5), jitter
// off, every attempt timing out.
func TestPlanSeed002(t *testing.T) {
	cases := []struct {
		name string
		s    Settings
		want []Attempt
	}{
		{
			// "No retry": TotalTimeout 5000 ms with MaxAttempts 1, the other
			// settings left at their defaults.
			name: "no retry, MaxAttempts 1",
			s:    Settings{TotalTimeout: 5000 * ms, MaxAttempts: 1},
			want: []Attempt{row(1, 5000, 0, 0, 5000)},
		},
		{
			// The same table through the LogicalTimeout shortcut.
			name: "no retry, LogicalTimeout",
			s:    LogicalTimeout(5000 * ms),
			want: []Attempt{row(1, 5000, 0, 0, 5000)},
		},
		{
			// "Retry example": no third attempt, because 4700 + 400 > 5000.
			name: "total 5000 ms",
			s: Settings{
				InitialRetryDelay: 200 * ms, RetryDelayMultiplier: 2, MaxRetryDelay: 500 * ms,
				InitialRPCTimeout: 1500 * ms, RPCTimeoutMultiplier: 2, MaxRPCTimeout: 3000 * ms,
				TotalTimeout: 5000 * ms,
			},
			want: []Attempt{
				row(1, 1500, 0, 0, 1500),
				row(2, 3000, 200, 1700, 4700),
			},
		},
		{
			// "Longer total timeout". The seed's table shows a third attempt
			// of 4900 ms (5100→10000), which contradicts its own
			// MaxRPCTimeout of 3000 ms: 3000 × 2 = 6000 is capped to 3000
			// before the total-timeout cut. SPEC G5 pins the G2 result: the
			// third attempt runs 3000 ms (5100→8100), and a fourth starts
			// after min(400 × 2, 500) = 500 ms, at 8600, with the 1400 ms
			// left of the total.
			name: "total 10000 ms (SPEC G5 decision)",
			s: Settings{
				InitialRetryDelay: 200 * ms, RetryDelayMultiplier: 2, MaxRetryDelay: 500 * ms,
				InitialRPCTimeout: 1500 * ms, RPCTimeoutMultiplier: 2, MaxRPCTimeout: 3000 * ms,
				TotalTimeout: 10000 * ms,
			},
			want: []Attempt{
				row(1, 1500, 0, 0, 1500),
				row(2, 3000, 200, 1700, 4700),
				row(3, 3000, 400, 5100, 8100),
				row(4, 1400, 500, 8600, 10000),
			},
		},
		{
			// "Capped RPC timeout": the third attempt gets the 1900 ms left
			// of the 4000 ms total instead of 2000 ms.
			name: "capped RPC timeout",
			s: Settings{
				InitialRetryDelay: 200 * ms, RetryDelayMultiplier: 2, MaxRetryDelay: 500 * ms,
				InitialRPCTimeout: 500 * ms, RPCTimeoutMultiplier: 2, MaxRPCTimeout: 2000 * ms,
				TotalTimeout: 4000 * ms,
			},
			want: []Attempt{
				row(1, 500, 0, 0, 500),
				row(2, 1000, 200, 700, 1700),
				row(3, 1900, 400, 2100, 4000),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.s.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := c.s.Plan()
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Plan:\n got  %+v\n want %+v", got, c.want)
			}
		})
	}
}

// TestExponentialDelaysSeed002 is the seed's backoff list: 100, 200, 400,
// 500, 500 ms for initial 100 ms, ×2, max 500 ms.
func TestExponentialDelaysSeed002(t *testing.T) {
	s := Settings{InitialRetryDelay: 100 * ms, RetryDelayMultiplier: 2, MaxRetryDelay: 500 * ms, MaxAttempts: 7}
	want := []time.Duration{0, 100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms, 500 * ms}
	var got []time.Duration
	for _, a := range s.Plan() {
		got = append(got, a.Delay)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

// TestJitterSeed002 checks G3: with jitter on, the delay before retry k is in
// [1 ms, nominal delay], and the samples do cover the interval.
func TestJitterSeed002(t *testing.T) {
	s := Settings{InitialRetryDelay: 100 * ms, RetryDelayMultiplier: 2, MaxRetryDelay: 500 * ms, MaxAttempts: 6}
	nominal := []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms}
	const samples = 10000
	lo := make([]time.Duration, len(nominal))
	hi := make([]time.Duration, len(nominal))
	for i := range lo {
		lo[i] = MaxDuration
	}
	for range samples {
		it := Iterator{Settings: s}
		if _, ok := it.Next(0); !ok {
			t.Fatal("first attempt refused")
		}
		for k, want := range nominal {
			a, ok := it.Next(0)
			if !ok {
				t.Fatalf("retry %d refused", k+1)
			}
			if a.Delay < ms || a.Delay > want {
				t.Fatalf("retry %d: delay %v outside [1ms, %v]", k+1, a.Delay, want)
			}
			lo[k], hi[k] = min(lo[k], a.Delay), max(hi[k], a.Delay)
		}
	}
	for k, want := range nominal {
		// 10,000 uniform samples reach within 1% of both ends with
		// overwhelming probability (a miss has probability ~e^-100).
		if lo[k] > ms+want/100 || hi[k] < want-want/100 {
			t.Errorf("retry %d: samples span [%v, %v], want close to [1ms, %v]", k+1, lo[k], hi[k], want)
		}
	}
}

func TestJitterSmallDelays(t *testing.T) {
	for _, d := range []time.Duration{0, 1, ms - 1, ms} {
		if got := Jitter(d); got != d {
			t.Errorf("Jitter(%v) = %v, want it unchanged", d, got)
		}
	}
	if got := Jitter(-1); got != 0 {
		t.Errorf("Jitter(-1ns) = %v, want 0 (never negative)", got)
	}
	for range 10000 {
		if got := Jitter(ms + 1); got < ms || got > ms+1 {
			t.Fatalf("Jitter(1ms+1ns) = %v", got)
		}
		if got := Jitter(MaxDuration); got < ms {
			t.Fatalf("Jitter(MaxDuration) = %v", got)
		}
	}
}

// TestIteratorElapsed drives the iterator with real elapsed times, as
// retry/call does: an attempt that fails early leaves more of the total for
// the next, and the RPC timeout is cut to what is left.
func TestIteratorElapsed(t *testing.T) {
	it := Iterator{
		Settings: Settings{
			InitialRetryDelay: 100 * ms, RetryDelayMultiplier: 2, MaxRetryDelay: time.Second,
			InitialRPCTimeout: 300 * ms, RPCTimeoutMultiplier: 2, MaxRPCTimeout: time.Second,
			TotalTimeout: 1000 * ms, MaxAttempts: 5,
		},
		NoJitter: true,
	}
	steps := []struct {
		elapsed time.Duration
		want    Attempt
		ok      bool
	}{
		{0, row(1, 300, 0, 0, 300), true},
		{10 * ms, row(2, 600, 100, 110, 710), true},   // failed fast after 10 ms
		{120 * ms, row(3, 680, 200, 320, 1000), true}, // 1000 ms (capped) cut to the 680 ms left
		{700 * ms, Attempt{}, false},                  // 700 + 400 >= 1000
		{0, Attempt{}, false},                         // sticky until Reset
	}
	for i, st := range steps {
		got, ok := it.Next(st.elapsed)
		if ok != st.ok || got != st.want {
			t.Fatalf("step %d: Next(%v) = %+v, %v; want %+v, %v", i, st.elapsed, got, ok, st.want, st.ok)
		}
	}
	if it.Attempts() != 3 {
		t.Fatalf("Attempts() = %d, want 3", it.Attempts())
	}
	it.Reset()
	if a, ok := it.Next(0); !ok || a.Number != 1 {
		t.Fatalf("after Reset: %+v %v", a, ok)
	}
}

func TestIteratorStrategyAndMaxAttempts(t *testing.T) {
	it := Iterator{Settings: Settings{MaxAttempts: 3}, Strategy: Constant{Wait: 7 * ms}}
	var got []time.Duration
	for {
		a, ok := it.Next(0)
		if !ok {
			break
		}
		got = append(got, a.Delay)
	}
	// A Strategy is used as it is: no G3 jitter on top.
	if want := []time.Duration{0, 7 * ms, 7 * ms}; !reflect.DeepEqual(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
	// MaxAttempts 1: exactly one attempt.
	one := Iterator{Settings: Settings{MaxAttempts: 1}}
	if _, ok := one.Next(0); !ok {
		t.Fatal("first attempt refused")
	}
	if _, ok := one.Next(0); ok {
		t.Fatal("second attempt allowed with MaxAttempts 1")
	}
}

// misbehaving returns negative delays; the iterator must not.
type misbehaving struct{}

func (misbehaving) Delay(int, time.Duration) time.Duration { return -time.Hour }

func TestIteratorClampsStrategy(t *testing.T) {
	it := Iterator{Strategy: misbehaving{}, Settings: Settings{MaxAttempts: 2}}
	it.Next(0)
	if a, _ := it.Next(5 * ms); a.Delay != 0 || a.Start != 5*ms {
		t.Fatalf("got %+v", a)
	}
}

func TestPlanBounded(t *testing.T) {
	// Neither MaxAttempts nor TotalTimeout: the plan is cut, not endless.
	p := Settings{InitialRetryDelay: ms}.Plan()
	if len(p) != MaxPlanAttempts {
		t.Fatalf("len = %d, want %d", len(p), MaxPlanAttempts)
	}
	// Huge growth saturates instead of wrapping.
	p = Settings{
		InitialRetryDelay: time.Hour, RetryDelayMultiplier: 1e9,
		InitialRPCTimeout: time.Hour, RPCTimeoutMultiplier: 1e9,
	}.Plan()
	for i, a := range p {
		if a.Delay < 0 || a.RPCTimeout < 0 || a.Start < 0 || a.End < a.Start {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
	}
	if last := p[len(p)-1]; last.End != MaxDuration {
		t.Fatalf("last attempt %+v, want End saturated at MaxDuration", last)
	}
}

func TestValidate(t *testing.T) {
	bad := []Settings{
		{InitialRetryDelay: -1},
		{MaxRetryDelay: -1},
		{InitialRPCTimeout: -1},
		{MaxRPCTimeout: -1},
		{TotalTimeout: -1},
		{RetryDelayMultiplier: 0.5},
		{RetryDelayMultiplier: -2},
		{RetryDelayMultiplier: math.NaN()},
		{RPCTimeoutMultiplier: math.Inf(1)},
		{MaxAttempts: -1},
	}
	for _, s := range bad {
		if err := s.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidConfig", s, err)
		}
	}
	good := []Settings{{}, LogicalTimeout(time.Second), {RetryDelayMultiplier: 1, RPCTimeoutMultiplier: 1.5, MaxAttempts: 3}}
	for _, s := range good {
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	// Invalid settings still give a sane plan (negative read as 0, bad
	// multiplier as 1).
	p := Settings{InitialRetryDelay: -ms, RetryDelayMultiplier: math.NaN(), InitialRPCTimeout: 10 * ms,
		RPCTimeoutMultiplier: -3, TotalTimeout: 25 * ms}.Plan()
	want := []Attempt{
		{Number: 1, RPCTimeout: 10 * ms, Start: 0, End: 10 * ms},
		{Number: 2, RPCTimeout: 10 * ms, Start: 10 * ms, End: 20 * ms},
		{Number: 3, RPCTimeout: 5 * ms, Start: 20 * ms, End: 25 * ms},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("plan %+v, want %+v", p, want)
	}
}

func TestIteratorNoAlloc(t *testing.T) {
	s := Settings{InitialRetryDelay: ms, RetryDelayMultiplier: 2, MaxRetryDelay: 50 * ms, MaxAttempts: 10, TotalTimeout: time.Second}
	allocs := testing.AllocsPerRun(100, func() {
		it := Iterator{Settings: s}
		for {
			if _, ok := it.Next(0); !ok {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per operation", allocs)
	}
}

var sinkAttempt Attempt

func BenchmarkIteratorNext(b *testing.B) {
	s := Settings{InitialRetryDelay: ms, RetryDelayMultiplier: 2, MaxRetryDelay: 50 * ms,
		InitialRPCTimeout: 10 * ms, RPCTimeoutMultiplier: 1.5, MaxRPCTimeout: 100 * ms, TotalTimeout: time.Hour}
	b.ReportAllocs()
	it := Iterator{Settings: s}
	for i := 0; i < b.N; i++ {
		a, ok := it.Next(time.Duration(i))
		if !ok || a.Number > 64 {
			it.Reset()
		}
		sinkAttempt = a
	}
}
