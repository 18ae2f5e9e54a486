package call

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errNet      = Mark(errors.New("connection reset"), Network)
	errTimeout  = Mark(errors.New("attempt timed out"), Timeout)
	errBusiness = Mark(errors.New("insufficient balance"), Business)
)

// sleeps records the waits of a policy instead of sleeping them.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) hook(p *Policy) *Policy {
	p.sleep = func(ctx context.Context, d time.Duration) error {
		s.mu.Lock()
		s.d = append(s.d, d)
		s.mu.Unlock()
		return ctx.Err()
	}
	return p
}

func (s *sleeps) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}

func mustPolicy(t testing.TB, opts ...Option) *Policy {
	t.Helper()
	p, err := NewPolicy(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// failN returns a function that fails with err its first n calls, counting
// all calls in *calls.
func failN(n int, err error, calls *atomic.Int32) func(context.Context) error {
	return func(context.Context) error {
		if int(calls.Add(1)) <= n {
			return err
		}
		return nil
	}
}

func TestDoFirstAttemptSucceeds(t *testing.T) {
	var calls atomic.Int32
	if err := Do(context.Background(), nil, failN(0, nil, &calls)); err != nil || calls.Load() != 1 {
		t.Fatalf("err %v, calls %d", err, calls.Load())
	}
}

// TestDoExactlyNCalls: N attempts, N−1 sleeps, the last error returned as is.
func TestDoExactlyNCalls(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7} {
		var s sleeps
		p := s.hook(mustPolicy(t, WithMaxAttempts(n), WithBackoff(backoff.Constant{Wait: 3 * time.Millisecond})))
		var calls atomic.Int32
		err := Do(context.Background(), p, failN(100, errNet, &calls))
		if err != errNet {
			t.Fatalf("n=%d: err %v, want errNet itself", n, err)
		}
		if int(calls.Load()) != n || s.count() != n-1 {
			t.Fatalf("n=%d: %d calls, %d sleeps", n, calls.Load(), s.count())
		}
		for _, d := range s.d {
			if d != 3*time.Millisecond {
				t.Fatalf("slept %v", d)
			}
		}
	}
}

func TestDefaultIsThreeAttempts(t *testing.T) {
	var s sleeps
	p := s.hook(mustPolicy(t))
	var calls atomic.Int32
	Do(context.Background(), p, failN(100, errNet, &calls))
	if calls.Load() != DefaultMaxAttempts || DefaultMaxAttempts != 3 {
		t.Fatalf("%d calls", calls.Load())
	}
	// Jittered (G3): in [1 ms, 100 ms] then [1 ms, 200 ms].
	if s.d[0] < time.Millisecond || s.d[0] > 100*time.Millisecond || s.d[1] < time.Millisecond || s.d[1] > 200*time.Millisecond {
		t.Fatalf("waits %v", s.d)
	}
}

func TestDoSucceedsOnThirdAttempt(t *testing.T) {
	var calls atomic.Int32
	var seen []int
	p := mustPolicy(t, WithBackoff(backoff.None{}))
	err := Do(context.Background(), p, func(ctx context.Context) error {
		seen = append(seen, Attempt(ctx))
		return failN(2, errNet, &calls)(ctx)
	})
	if err != nil || calls.Load() != 3 {
		t.Fatalf("err %v, calls %d", err, calls.Load())
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Fatalf("attempt numbers %v", seen)
	}
}

func TestDoValueAndWrap(t *testing.T) {
	p := mustPolicy(t, WithBackoff(backoff.None{}))
	n := 0
	v, err := DoValue(context.Background(), p, func(ctx context.Context) (string, error) {
		n++
		if n < 2 {
			return "partial", errNet
		}
		return "ok", nil
	})
	if v != "ok" || err != nil || n != 2 {
		t.Fatalf("DoValue = %q, %v after %d", v, err, n)
	}
	// On failure DoValue returns the last attempt's value and error.
	v, err = DoValue(context.Background(), p, func(ctx context.Context) (string, error) {
		return "last", errBusiness
	})
	if v != "last" || err != errBusiness {
		t.Fatalf("DoValue failure = %q, %v", v, err)
	}

	calls := 0
	get := Wrap(p, func(ctx context.Context, key int) (string, error) {
		calls++
		if calls%3 != 0 {
			return "", errNet
		}
		return fmt.Sprint("value-", key, "-attempt-", Attempt(ctx)), nil
	})
	got, err := get(context.Background(), 7)
	if got != "value-7-attempt-3" || err != nil {
		t.Fatalf("wrapped = %q, %v", got, err)
	}
}

// TestNeverRetried: business, service-quality and unknown errors end the
// call after one attempt (B2).
func TestNeverRetried(t *testing.T) {
	p := mustPolicy(t, WithBackoff(backoff.None{}))
	for _, err := range []error{
		errBusiness, ErrThrottled, ErrRejected, ErrCircuitOpen,
		fmt.Errorf("wrapped: %w", ErrCircuitOpen),
		errors.New("no idea"), context.Canceled,
	} {
		var calls atomic.Int32
		if got := Do(context.Background(), p, failN(100, err, &calls)); got != err || calls.Load() != 1 {
			t.Errorf("%v: %d calls, returned %v", err, calls.Load(), got)
		}
	}
}

// TestTimeoutsOnlyAtEntrance (B5): a timeout is retried by the entrance (or
// a program that is the origin of the chain), not by a service in the middle.
func TestTimeoutsOnlyAtEntrance(t *testing.T) {
	p := mustPolicy(t, WithBackoff(backoff.None{}))
	cases := []struct {
		name string
		ctx  context.Context
		want int32
	}{
		{"origin (no flags)", context.Background(), 3},
		{"entrance", WithEntrance(context.Background()), 3},
		{"extracted without header", Extract(context.Background(), mapCarrier{}), 3},
		{"middle of the chain", Extract(context.Background(), mapCarrier{HeaderAttempt: "1"}), 1},
		{"flags without entrance", WithFlags(context.Background(), Flags{Attempt: 1}), 1},
	}
	for _, c := range cases {
		var calls atomic.Int32
		Do(c.ctx, p, failN(100, errTimeout, &calls))
		if calls.Load() != c.want {
			t.Errorf("%s: %d calls, want %d", c.name, calls.Load(), c.want)
		}
		// Network errors are retried everywhere in the chain.
		calls.Store(0)
		Do(c.ctx, p, failN(100, errNet, &calls))
		if calls.Load() != 3 {
			t.Errorf("%s: network error: %d calls, want 3", c.name, calls.Load())
		}
	}
}

// TestIncomingRetryNotRetriedDownstream (B5, seed 003).
func TestIncomingRetryNotRetriedDownstream(t *testing.T) {
	p := mustPolicy(t, WithBackoff(backoff.None{}))
	for _, v := range []string{"2", "3", "garbage", "-1", "0"} {
		ctx := Extract(context.Background(), mapCarrier{HeaderAttempt: v})
		var calls atomic.Int32
		if err := Do(ctx, p, failN(100, errNet, &calls)); err != errNet || calls.Load() != 1 {
			t.Errorf("attempt header %q: %d calls, err %v", v, calls.Load(), err)
		}
	}
}

func TestRequireRetryFlag(t *testing.T) {
	p := mustPolicy(t, WithBackoff(backoff.None{}), RequireRetryFlag())
	var calls atomic.Int32
	Do(context.Background(), p, failN(100, errNet, &calls))
	if calls.Load() != 1 {
		t.Fatalf("without flag: %d calls", calls.Load())
	}
	calls.Store(0)
	Do(WithRetryFlag(context.Background(), "checkout"), p, failN(100, errNet, &calls))
	if calls.Load() != 3 {
		t.Fatalf("with flag: %d calls", calls.Load())
	}
}

func TestNonCritical(t *testing.T) {
	p := mustPolicy(t, NonCritical())
	var calls atomic.Int32
	if err := Do(context.Background(), p, failN(100, errNet, &calls)); err != errNet || calls.Load() != 1 {
		t.Fatalf("%d calls, %v", calls.Load(), err)
	}
}

// TestRetryableCodes (G4): a listed code is retried, an unlisted one not,
// and business or service-quality errors stay unretried whatever their code.
func TestRetryableCodes(t *testing.T) {
	const unavailable, invalidArgument, deadlineExceeded = 14, 3, 4
	p := mustPolicy(t, WithBackoff(backoff.None{}), WithRetryableCodes(unavailable, deadlineExceeded, unavailable))
	cases := []struct {
		err  error
		want int32
	}{
		{WithCode(errors.New("unavailable"), unavailable), 3},
		{WithCode(errors.New("bad"), invalidArgument), 1},
		{WithCode(errNet, invalidArgument), 1}, // network, but code not listed
		{WithCode(errBusiness, unavailable), 1},
		{WithCode(ErrThrottled, unavailable), 1},
		{errNet, 3}, // no code: the class decides
		{fmt.Errorf("rpc: %w", WithCode(errTimeout, deadlineExceeded)), 3},
	}
	for _, c := range cases {
		var calls atomic.Int32
		Do(context.Background(), p, failN(100, c.err, &calls))
		if calls.Load() != c.want {
			t.Errorf("%v: %d calls, want %d", c.err, calls.Load(), c.want)
		}
	}
	if WithCode(nil, 1) != nil || Mark(nil, Network) != nil {
		t.Fatal("nil error wrapped")
	}
}

// TestCancelledBeforeFirstAttempt (B7): fn never runs.
func TestCancelledBeforeFirstAttempt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	fn := func(context.Context) error { ran = true; return nil }
	if err := Do(ctx, nil, fn); err != context.Canceled || ran {
		t.Fatalf("Do: %v, ran %v", err, ran)
	}
	if _, err := DoValue(ctx, nil, func(context.Context) (int, error) { ran = true; return 1, nil }); err != context.Canceled || ran {
		t.Fatalf("DoValue: %v, ran %v", err, ran)
	}
	w := Wrap(nil, func(context.Context, int) (int, error) { ran = true; return 1, nil })
	if _, err := w(ctx, 1); err != context.Canceled || ran {
		t.Fatalf("Wrap: %v, ran %v", err, ran)
	}
}

// TestCancelledDuringBackoff (B7): Do returns as soon as the context is
// cancelled in the middle of a long delay, with an error that wraps both the
// context's error and the last attempt's; no goroutine or timer is left.
func TestCancelledDuringBackoff(t *testing.T) {
	defer goleak.VerifyNone(t)
	b, _ := budget.New(budget.Config{})
	p := mustPolicy(t, WithBackoff(backoff.Constant{Wait: time.Hour}), WithBudget(b))
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Do(ctx, p, func(context.Context) error {
			calls.Add(1)
			return errNet
		})
	}()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond) // let it reach the sleep
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return after cancel")
	}
	var ce *ContextError
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errNet) || !errors.As(err, &ce) || ce.Attempts != 1 {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d calls", calls.Load())
	}
	// The retry was granted by the budget, then not sent: given back.
	if s := b.Stats(); s.Retries != 1 || s.Cancelled != 1 || s.WindowRetries != 0 || s.Requests != 1 {
		t.Fatalf("budget after cancel: %+v", s)
	}
	if want := "call: context canceled after 1 attempt, last error: connection reset"; err.Error() != want {
		t.Fatalf("message %q", err.Error())
	}
}

// TestDeadlineShorterThanDelay (B7): when the next delay would pass the
// deadline, Do returns at once without sleeping.
func TestDeadlineShorterThanDelay(t *testing.T) {
	var s sleeps
	p := s.hook(mustPolicy(t, WithBackoff(backoff.Constant{Wait: time.Hour}), WithMaxAttempts(5)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var calls atomic.Int32
	err := Do(ctx, p, failN(100, errNet, &calls))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errNet) {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 1 || s.count() != 0 {
		t.Fatalf("%d calls, %d sleeps", calls.Load(), s.count())
	}
}

// TestDeadlineDuringAttempt: the context's deadline passes while an attempt
// runs; the next one is never started.
func TestDeadlineDuringAttempt(t *testing.T) {
	p := mustPolicy(t, WithBackoff(backoff.None{}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var calls atomic.Int32
	err := Do(ctx, p, func(ctx context.Context) error {
		calls.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	if calls.Load() != 1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%d calls, err %v", calls.Load(), err)
	}
}

// TestPerAttemptTimeout (G2): each attempt runs under its own RPC timeout
// and an attempt that times out is retried (at the entrance).
func TestPerAttemptTimeout(t *testing.T) {
	p := mustPolicy(t, WithSettings(backoff.Settings{
		InitialRPCTimeout: 10 * time.Millisecond, RPCTimeoutMultiplier: 2, MaxRPCTimeout: 30 * time.Millisecond,
		InitialRetryDelay: time.Millisecond, MaxAttempts: 3,
	}))
	var timeouts []time.Duration
	err := Do(context.Background(), p, func(ctx context.Context) error {
		deadline, ok := ctx.Deadline()
		if !ok {
			return errBusiness
		}
		timeouts = append(timeouts, time.Until(deadline))
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) || len(timeouts) != 3 {
		t.Fatalf("err %v, %d attempts", err, len(timeouts))
	}
	for i, max := range []time.Duration{10, 20, 30} {
		if timeouts[i] > max*time.Millisecond || timeouts[i] < max*time.Millisecond/2 {
			t.Errorf("attempt %d had %v, want about %v ms", i+1, timeouts[i], max)
		}
	}
}

// TestTotalTimeout (G2): no attempt starts at or after TotalTimeout.
func TestTotalTimeout(t *testing.T) {
	p := mustPolicy(t, WithSettings(backoff.Settings{
		InitialRetryDelay: 10 * time.Millisecond, RetryDelayMultiplier: 1,
		TotalTimeout: 35 * time.Millisecond,
	}), WithoutJitter())
	var calls atomic.Int32
	start := time.Now()
	err := Do(context.Background(), p, failN(1000, errNet, &calls))
	if err != errNet {
		t.Fatalf("err %v", err)
	}
	// At most 0, 10, 20, 30 ms: four attempts; at least one retry.
	if n := calls.Load(); n < 2 || n > 4 {
		t.Fatalf("%d attempts in %v", n, time.Since(start))
	}
}

type retryAfterErr struct{ d time.Duration }

func (e retryAfterErr) Error() string             { return "come back later" }
func (e retryAfterErr) RetryAfter() time.Duration { return e.d }
func (e retryAfterErr) RetryClass() Class         { return Network }

func TestRetryAfterHonouredAndCapped(t *testing.T) {
	var s sleeps
	p := s.hook(mustPolicy(t, WithBackoff(backoff.Constant{Wait: 2 * time.Millisecond}), WithMaxRetryAfter(50*time.Millisecond)))
	for _, c := range []struct{ asked, want time.Duration }{
		{time.Hour, 50 * time.Millisecond}, // capped
		{10 * time.Millisecond, 10 * time.Millisecond},
		{time.Millisecond, 2 * time.Millisecond}, // the backoff is longer
	} {
		s.d = nil
		var calls atomic.Int32
		Do(context.Background(), p, failN(1, retryAfterErr{c.asked}, &calls))
		if calls.Load() != 2 || len(s.d) != 1 || s.d[0] != c.want {
			t.Errorf("asked %v: %d calls, waits %v, want %v", c.asked, calls.Load(), s.d, c.want)
		}
	}
}

// TestBudgetUnderFailingDownstream (B4): with every call failing, the retries
// stay at about 10% of the requests.
func TestBudgetUnderFailingDownstream(t *testing.T) {
	clk := &fakeClock{}
	b, err := budget.New(budget.Config{Ratio: 0.1, Window: 10 * time.Second, MinRetriesPerSecond: 1, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	p := mustPolicy(t, WithBackoff(backoff.None{}), WithBudget(b))
	const calls = 20000
	var attempts atomic.Int32
	for range calls {
		Do(context.Background(), p, func(context.Context) error {
			attempts.Add(1)
			return errNet
		})
		clk.Advance(2 * time.Millisecond) // 500 calls per second, 40 s in all
	}
	retries := int(attempts.Load()) - calls
	ratio := float64(retries) / calls
	// 10% of requests plus the floor of 1/s (40 retries over 40 s: +0.2%).
	if ratio < 0.09 || ratio > 0.11 {
		t.Fatalf("%d retries for %d calls: %.3f, want ≈ 0.10", retries, calls, ratio)
	}
	// Without the budget every call would have made 3 attempts.
	t.Logf("retries/requests = %.4f (%d denied)", ratio, b.Stats().Denied)
}

// TestBudgetNeverFailsFirstAttempt: an exhausted budget still lets every
// call make its first attempt.
func TestBudgetNeverFailsFirstAttempt(t *testing.T) {
	b, _ := budget.New(budget.Config{MinRetriesPerSecond: budget.NoFloor})
	p := mustPolicy(t, WithBackoff(backoff.None{}), WithBudget(b))
	for b.TryRetry() {
	}
	var calls atomic.Int32
	for range 5 {
		if err := Do(context.Background(), p, failN(1000, errNet, &calls)); err != errNet {
			t.Fatal(err)
		}
	}
	if calls.Load() != 5 {
		t.Fatalf("%d calls, want 5 first attempts and no retry", calls.Load())
	}
}

// TestSharedPolicy: one policy (with a budget) shared by 1,000 goroutines
// under -race.
func TestSharedPolicy(t *testing.T) {
	b, _ := budget.New(budget.Config{Ratio: 1, MinRetriesPerSecond: 1000})
	p := mustPolicy(t, WithBackoff(backoff.FullJitter{Base: 50 * time.Microsecond, Max: time.Millisecond}), WithBudget(b))
	const goroutines = 1000
	var total atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var calls atomic.Int32
			v, err := DoValue(context.Background(), p, func(ctx context.Context) (int, error) {
				total.Add(1)
				if n := calls.Add(1); n <= int32(g%3) {
					return 0, errNet
				}
				return g, nil
			})
			if err != nil || v != g || int(calls.Load()) != g%3+1 {
				errs <- fmt.Errorf("goroutine %d: %v, %v after %d calls", g, v, err, calls.Load())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if want := int32(goroutines + 333*1 + 333*2); total.Load() != want { // g%3 is 1 or 2 for 333 goroutines each
		t.Fatalf("%d attempts in all, want %d", total.Load(), want)
	}
}

func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	ctx := context.Background()
	ok := func(context.Context) error { return nil }
	if a := testing.AllocsPerRun(1000, func() { Do(ctx, nil, ok) }); a != 0 {
		t.Errorf("Do success: %v allocs", a)
	}
	b, _ := budget.New(budget.Config{})
	pb := mustPolicy(t, WithBudget(b))
	if a := testing.AllocsPerRun(1000, func() { Do(ctx, pb, ok) }); a != 0 {
		t.Errorf("Do success with budget: %v allocs", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		DoValue(ctx, nil, func(context.Context) (int, error) { return 1, nil })
	}); a != 0 {
		t.Errorf("DoValue success: %v allocs", a)
	}
	w := Wrap(nil, func(_ context.Context, x int) (int, error) { return x, nil })
	if a := testing.AllocsPerRun(1000, func() { w(ctx, 1) }); a != 0 {
		t.Errorf("Wrap success: %v allocs", a)
	}
	p := mustPolicy(t, WithBackoff(backoff.Constant{Wait: 1}))
	n := 0
	third := func(context.Context) error {
		n++
		if n%3 != 0 {
			return errNet
		}
		return nil
	}
	if a := testing.AllocsPerRun(200, func() { Do(ctx, p, third) }); a > 1 {
		t.Errorf("Do third-attempt success: %v allocs, want ≤ 1", a)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a := testing.AllocsPerRun(200, func() { Do(cctx, p, third) }); a > 1 {
		t.Errorf("Do third-attempt success, cancellable context: %v allocs, want ≤ 1", a)
	}
}

func TestPolicyValidation(t *testing.T) {
	bad := [][]Option{
		{WithMaxAttempts(0)},
		{WithMaxAttempts(-1)},
		{WithSettings(backoff.Settings{})}, // no bound at all
		{WithSettings(backoff.Settings{MaxAttempts: -1})},
		{WithSettings(backoff.Settings{RetryDelayMultiplier: 0.5, MaxAttempts: 2})},
		{WithBackoff(nil)},
		{WithClassifier(nil)},
		{WithMaxRetryAfter(-1)},
		{Unbounded(), WithSettings(backoff.Settings{InitialRetryDelay: time.Second})}, // settings reset Unbounded
	}
	for i, opts := range bad {
		if p, err := NewPolicy(opts...); !errors.Is(err, ErrInvalidConfig) || p != nil {
			t.Errorf("case %d: %v, %v", i, p, err)
		}
	}
	good := [][]Option{
		nil,
		{Unbounded()},
		{WithSettings(backoff.Settings{TotalTimeout: time.Second})},
		{WithSettings(backoff.LogicalTimeout(time.Second))},
		{WithMaxAttempts(1), nil},
	}
	for i, opts := range good {
		if _, err := NewPolicy(opts...); err != nil {
			t.Errorf("case %d: %v", i, err)
		}
	}
	// With derives without touching the original.
	base := mustPolicy(t, WithRetryableCodes(1, 2))
	derived, err := base.With(WithMaxAttempts(5), WithRetryableCodes(3))
	if err != nil || derived.Settings().MaxAttempts != 5 || base.Settings().MaxAttempts != 3 ||
		fmt.Sprint(base.codes, derived.codes) != "[1 2] [3]" {
		t.Fatalf("With: %v %+v %+v", err, base, derived)
	}
	if _, err := (*Policy)(nil).With(WithMaxAttempts(0)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil.With: %v", err)
	}
	if (*Policy)(nil).Settings() != DefaultSettings() {
		t.Fatal("nil policy settings")
	}
}

func TestMustPolicyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	MustPolicy(WithMaxAttempts(0))
}

type netErr struct{ timeout bool }

func (e netErr) Error() string   { return "net" }
func (e netErr) Timeout() bool   { return e.timeout }
func (e netErr) Temporary() bool { return false }

func TestClassify(t *testing.T) {
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	cases := []struct {
		err  error
		want Class
	}{
		{nil, Unknown},
		{errors.New("x"), Unknown},
		{context.Canceled, Unknown},
		{context.DeadlineExceeded, Timeout},
		{fmt.Errorf("rpc: %w", context.DeadlineExceeded), Timeout},
		{os.ErrDeadlineExceeded, Timeout},
		{netErr{timeout: true}, Timeout},
		{netErr{}, Network},
		{opErr, Network},
		{syscall.ECONNREFUSED, Network},
		{fmt.Errorf("dial: %w", syscall.EHOSTUNREACH), Network},
		{syscall.ETIMEDOUT, Timeout},
		{syscall.EPIPE, Network},
		// A bare errno that is not a network failure is not retried (B2).
		{&os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, Unknown},
		{os.NewSyscallError("write", syscall.EACCES), Unknown},
		{syscall.EINVAL, Unknown},
		{net.ErrClosed, Network},
		{io.ErrUnexpectedEOF, Network},
		{io.EOF, Network},
		{net.ErrClosed, Network},
		{ErrThrottled, ServiceQuality},
		{ErrRejected, ServiceQuality},
		{ErrCircuitOpen, ServiceQuality},
		{errBusiness, Business},
		{Mark(context.DeadlineExceeded, Business), Business}, // the mark wins
		{errors.Join(errors.New("a"), errNet), Network},
		{errors.Join(errors.New("a"), errors.New("b")), Unknown},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { Classify(opErr); Classify(errNet); Classify(context.DeadlineExceeded) }); a != 0 {
		t.Errorf("Classify allocates %v", a)
	}
	names := []string{}
	for c := Unknown; c <= Timeout+1; c++ {
		names = append(names, c.String())
	}
	if got := strings.Join(names, ","); got != "unknown,business,service-quality,network,timeout,class(5)" {
		t.Errorf("names %s", got)
	}
}

func TestCustomClassifier(t *testing.T) {
	errRetryMe := errors.New("err_01") // a business code listed for retry, as in seed 001
	p := mustPolicy(t, WithBackoff(backoff.None{}), WithClassifier(func(err error) Class {
		if errors.Is(err, errRetryMe) {
			return Network
		}
		return Classify(err)
	}))
	var calls atomic.Int32
	Do(context.Background(), p, failN(100, errRetryMe, &calls))
	if calls.Load() != 3 {
		t.Fatalf("%d calls", calls.Load())
	}
}

// fakeClock drives budgets in tests.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(1700000000, 0).Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// mapCarrier is request metadata as a map, the shape of gRPC metadata.
type mapCarrier map[string]string

func (m mapCarrier) Get(k string) string { return m[k] }
func (m mapCarrier) Set(k, v string)     { m[k] = v }

func FuzzExtract(f *testing.F) {
	for _, s := range []string{"1", "2", " 3 ", "", "0", "-5", "abc", "1048576", "1048577", "99999999999999999999"} {
		f.Add(s, "checkout")
	}
	f.Fuzz(func(t *testing.T, attempt, flag string) {
		c := mapCarrier{HeaderAttempt: attempt, HeaderFlag: flag}
		fl, ok := FlagsFrom(Extract(context.Background(), c))
		if !ok {
			t.Fatal("no flags")
		}
		switch {
		case attempt == "" && (!fl.Entrance || fl.Attempt != 0):
			t.Fatalf("no header: %+v", fl)
		case attempt != "" && (fl.Entrance || fl.Attempt < 1 || fl.Attempt > maxAttemptHeader):
			t.Fatalf("header %q: %+v", attempt, fl)
		case len(flag) > MaxFlagLen && fl.Flag != "":
			t.Fatalf("long flag kept")
		case len(flag) <= MaxFlagLen && fl.Flag != flag:
			t.Fatalf("flag %q lost", flag)
		}
		// What is injected again reads back the same.
		out := mapCarrier{}
		Inject(WithFlags(context.Background(), fl), out)
		if out[HeaderAttempt] != "1" || out[HeaderFlag] != fl.Flag {
			t.Fatalf("inject %v from %+v", out, fl)
		}
	})
}

func fastPolicy(t testing.TB, opts ...Option) *Policy {
	return mustPolicy(t, append([]Option{WithBackoff(backoff.None{})}, opts...)...)
}

// TestAttemptsSteps: the loop step by step, as protocol glue runs it.
// Decide does not end the attempt (its deadline still holds); Next ends it
// and numbers the next one; Detach hands the attempt's timeout over, so End
// leaves it running until the caller releases it; a Decide that stops
// returns the attempt's own error once the attempts are used up (B3: 2 in
// all here).
func TestAttemptsSteps(t *testing.T) {
	p := mustPolicy(t, WithSettings(backoff.Settings{InitialRPCTimeout: time.Minute, MaxAttempts: 2}), WithBackoff(backoff.None{}))
	var a Attempts
	first, err := a.Begin(context.Background(), p)
	if err != nil || a.Number() != 1 {
		t.Fatalf("Begin: %v, attempt %d", err, a.Number())
	}
	if err := a.Decide(errNet); err != nil {
		t.Fatalf("Decide: %v, want a retry", err)
	}
	if first.Err() != nil {
		t.Fatal("Decide ended the attempt")
	}
	second, err := a.Next()
	if err != nil || a.Number() != 2 || Attempt(second) != 2 || first.Err() == nil {
		t.Fatalf("Next: %v, attempt %d (ctx %d), first attempt's context %v", err, a.Number(), Attempt(second), first.Err())
	}
	if err := a.Decide(errNet); err != errNet {
		t.Fatalf("Decide after the last attempt: %v, want errNet", err)
	}
	release := a.Detach()
	a.End()
	if release == nil || second.Err() != nil {
		t.Fatalf("Detach: %v, second attempt's context %v after End", release != nil, second.Err())
	}
	release()
	if second.Err() == nil {
		t.Fatal("the detached release did not end the attempt")
	}
	// An attempt without a timeout has nothing to hand over.
	var b Attempts
	if _, err := b.Begin(context.Background(), fastPolicy(t)); err != nil || b.Detach() != nil {
		t.Fatalf("no RPC timeout: %v", err)
	}
}
