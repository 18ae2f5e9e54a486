package bench

// Side-by-side benchmarks of retry/call's Do against other Go retry
// libraries, all doing the same work in one run (SPEC §5, issue 7):
//
//   - DoSuccess: the operation succeeds at once (the common case; the
//     retry machinery should cost next to nothing);
//   - DoThirdAttempt: it fails twice with a retryable error and succeeds on
//     the third attempt, with a 1 ns delay, so the figure is the cost of the
//     loop, the decision and the sleeps, not of waiting.
//
// Each peer is set up the cheapest way its API allows: anything reusable
// (options, policies, executors, backoffs without state) is built once
// outside the loop. Compare ratios within one run; absolute times on shared
// machines are noise.

import (
	"context"
	"errors"
	"testing"
	"time"

	retrygo "github.com/avast/retry-go/v4"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethvargo "github.com/sethvargo/go-retry"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/call"
)

var (
	errTransientBase = errors.New("connection reset")
	// errTransient is the same error marked retryable for retry/call, whose
	// default classifier retries network errors only (SPEC B2).
	errTransient = call.Mark(errTransientBase, call.Network)
	sinkErr      error
	sinkInt      int
)

// flaky fails while n%period != 0 (period 1: never fails).
type flaky struct {
	n, period int
}

func (f *flaky) fail() bool {
	f.n++
	return f.n%f.period != 0
}

func benchDo(b *testing.B, period int) {
	ctx := context.Background()
	oneNS := time.Nanosecond

	b.Run("readretry", func(b *testing.B) {
		p := call.MustPolicy(call.WithMaxAttempts(3), call.WithBackoff(backoff.Constant{Wait: oneNS}))
		f := &flaky{period: period}
		fn := func(context.Context) error {
			if f.fail() {
				return errTransient
			}
			return nil
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := call.Do(ctx, p, fn); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("readretry-DoValue", func(b *testing.B) {
		p := call.MustPolicy(call.WithMaxAttempts(3), call.WithBackoff(backoff.Constant{Wait: oneNS}))
		f := &flaky{period: period}
		fn := func(context.Context) (int, error) {
			if f.fail() {
				return 0, errTransient
			}
			return f.n, nil
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			v, err := call.DoValue(ctx, p, fn)
			if err != nil {
				b.Fatal(err)
			}
			sinkInt += v
		}
	})

	b.Run("readretry-Wrap", func(b *testing.B) {
		p := call.MustPolicy(call.WithMaxAttempts(3), call.WithBackoff(backoff.Constant{Wait: oneNS}))
		f := &flaky{period: period}
		get := call.Wrap(p, func(_ context.Context, key int) (int, error) {
			if f.fail() {
				return 0, errTransient
			}
			return key, nil
		})
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			v, err := get(ctx, i)
			if err != nil {
				b.Fatal(err)
			}
			sinkInt += v
		}
	})

	b.Run("retry-go", func(b *testing.B) {
		f := &flaky{period: period}
		fn := func() error {
			if f.fail() {
				return errTransientBase
			}
			return nil
		}
		// Options built once and reused.
		opts := []retrygo.Option{
			retrygo.Attempts(3), retrygo.Delay(oneNS), retrygo.DelayType(retrygo.FixedDelay),
			retrygo.LastErrorOnly(true), retrygo.Context(ctx),
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := retrygo.Do(fn, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("cenkalti-backoff", func(b *testing.B) {
		f := &flaky{period: period}
		op := func() (int, error) {
			if f.fail() {
				return 0, errTransientBase
			}
			return f.n, nil
		}
		// ConstantBackOff has no state: one for all calls.
		opts := []cenkalti.RetryOption{
			cenkalti.WithBackOff(cenkalti.NewConstantBackOff(oneNS)), cenkalti.WithMaxTries(3),
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			v, err := cenkalti.Retry(ctx, op, opts...)
			if err != nil {
				b.Fatal(err)
			}
			sinkInt += v
		}
	})

	b.Run("sethvargo-retry", func(b *testing.B) {
		f := &flaky{period: period}
		fn := func(context.Context) error {
			if f.fail() {
				return sethvargo.RetryableError(errTransientBase)
			}
			return nil
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			// WithMaxRetries counts retries inside the Backoff, so a
			// Backoff serves one call only.
			bo := sethvargo.WithMaxRetries(2, sethvargo.NewConstant(oneNS))
			if err := sethvargo.Do(ctx, bo, fn); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("failsafe-go", func(b *testing.B) {
		f := &flaky{period: period}
		fn := func() error {
			if f.fail() {
				return errTransientBase
			}
			return nil
		}
		rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(3).WithDelay(oneNS).Build()
		exec := failsafe.With[any](rp).WithContext(ctx) // policy and executor reused
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := exec.Run(fn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDoSuccess: the first attempt succeeds.
func BenchmarkDoSuccess(b *testing.B) { benchDo(b, 1) }

// BenchmarkDoThirdAttempt: two retryable failures, success on attempt 3,
// 1 ns delay.
func BenchmarkDoThirdAttempt(b *testing.B) { benchDo(b, 3) }

// BenchmarkDoSuccessParallel: one policy shared by all goroutines, every
// call succeeding at once.
func BenchmarkDoSuccessParallel(b *testing.B) {
	p := call.MustPolicy()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := call.Do(ctx, p, fn); err != nil {
				sinkErr = err
			}
		}
	})
}
