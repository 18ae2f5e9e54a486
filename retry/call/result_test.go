package call

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
)

// bizResp is seed 001's response with a business code (GetBizCode).
type bizResp struct {
	BizCode string
	Data    string
}

// retryBizCodes is seed 001's RetryBizCode list.
var retryBizCodes = []string{"err_01", "err_02"}

func needRetry(r bizResp) bool { return slices.Contains(retryBizCodes, r.BizCode) }

// replies returns a function answering the given business codes in turn
// (the last one repeated), counting its calls.
func replies(calls *atomic.Int32, codes ...string) func(context.Context) (bizResp, error) {
	return func(context.Context) (bizResp, error) {
		n := int(calls.Add(1))
		code := codes[min(n, len(codes))-1]
		return bizResp{BizCode: code, Data: "attempt " + string(rune('0'+n))}, nil
	}
}

// TestRetryIfSeed is seed 001's example (SPEC M3): a response carrying
// "err_01" is retried, "ok" is not.
func TestRetryIfSeed(t *testing.T) {
	p := fastPolicy(t)
	var calls atomic.Int32
	v, err := DoValue(context.Background(), p, replies(&calls, "err_01", "ok"), RetryIf(needRetry))
	if err != nil || v.BizCode != "ok" || calls.Load() != 2 {
		t.Fatalf("%+v, %v after %d calls; want ok after 2", v, err, calls.Load())
	}
	calls.Store(0)
	v, err = DoValue(context.Background(), p, replies(&calls, "ok"), RetryIf(needRetry))
	if err != nil || v.BizCode != "ok" || calls.Load() != 1 {
		t.Fatalf("%+v, %v after %d calls; want ok after 1", v, err, calls.Load())
	}
	// A business code not in the list is the caller's answer.
	calls.Store(0)
	v, err = DoValue(context.Background(), p, replies(&calls, "err_99"), RetryIf(needRetry))
	if err != nil || v.BizCode != "err_99" || calls.Load() != 1 {
		t.Fatalf("%+v, %v after %d calls", v, err, calls.Load())
	}
}

// TestRetryIfExhausted: when the attempts run out on a rejected result, the
// caller gets the last result and ErrRetryableResult.
func TestRetryIfExhausted(t *testing.T) {
	var calls atomic.Int32
	v, err := DoValue(context.Background(), fastPolicy(t), replies(&calls, "err_01", "err_02"), RetryIf(needRetry))
	if !errors.Is(err, ErrRetryableResult) || v.BizCode != "err_02" || v.Data != "attempt 3" || calls.Load() != 3 {
		t.Fatalf("%+v, %v after %d calls", v, err, calls.Load())
	}
	// MaxAttempts 1: no retry, the rejected result and the error at once.
	calls.Store(0)
	v, err = DoValue(context.Background(), fastPolicy(t, WithMaxAttempts(1)), replies(&calls, "err_01"), RetryIf(needRetry))
	if err != ErrRetryableResult || v.BizCode != "err_01" || calls.Load() != 1 {
		t.Fatalf("%+v, %v after %d calls", v, err, calls.Load())
	}
}

// TestRetryIfWrap: the decorator and the endpoint middleware take the
// predicate too, per call.
func TestRetryIfWrap(t *testing.T) {
	var calls atomic.Int32
	rpc := func(_ context.Context, codes []string) (bizResp, error) {
		n := int(calls.Add(1))
		return bizResp{BizCode: codes[min(n, len(codes))-1]}, nil
	}
	get := Wrap(fastPolicy(t), rpc, RetryIf(needRetry))
	if v, err := get(context.Background(), []string{"err_01", "err_02", "ok"}); err != nil || v.BizCode != "ok" || calls.Load() != 3 {
		t.Fatalf("%+v %v after %d calls", v, err, calls.Load())
	}
	calls.Store(0)
	if v, err := get(context.Background(), []string{"ok"}); err != nil || v.BizCode != "ok" || calls.Load() != 1 {
		t.Fatalf("%+v %v after %d calls", v, err, calls.Load())
	}
	calls.Store(0)
	ep := Retry[[]string, bizResp](fastPolicy(t), RetryIf(needRetry))(rpc)
	if v, err := ep(context.Background(), []string{"err_01", "err_01", "err_01"}); !errors.Is(err, ErrRetryableResult) || v.BizCode != "err_01" || calls.Load() != 3 {
		t.Fatalf("%+v %v after %d calls", v, err, calls.Load())
	}
	// The last RetryIf wins; a zero ValueOption is ignored.
	calls.Store(0)
	get = Wrap(fastPolicy(t), rpc, RetryIf(needRetry), RetryIf(func(bizResp) bool { return false }), ValueOption[bizResp]{})
	if _, err := get(context.Background(), []string{"err_01", "ok"}); err != nil || calls.Load() != 1 {
		t.Fatalf("%v after %d calls", err, calls.Load())
	}
}

// TestRetryIfSameRules: a rejected result is retried under the same rules as
// a network error — the budget, the flags of B5, the non-critical switch,
// the context, per-attempt timeouts — whatever the classifier says.
func TestRetryIfSameRules(t *testing.T) {
	ctx := context.Background()
	always := RetryIf(func(bizResp) bool { return true })
	var calls atomic.Int32
	run := func(ctx context.Context, p *Policy) (bizResp, error) {
		calls.Store(0)
		return DoValue(ctx, p, replies(&calls, "err_01"), always)
	}

	// Budget: no floor, no requests before: the first call gets no retry.
	b, _ := budget.New(budget.Config{MinRetriesPerSecond: budget.NoFloor})
	if _, err := run(ctx, fastPolicy(t, WithBudget(b))); err != ErrRetryableResult || calls.Load() != 1 {
		t.Fatalf("budget: %v after %d calls", err, calls.Load())
	}
	if s := b.Stats(); s.Requests != 1 || s.Denied != 1 {
		t.Fatalf("budget stats %+v", s)
	}
	// Serving a retry (B5): no retry.
	if _, err := run(WithFlags(ctx, Flags{Attempt: 2}), fastPolicy(t)); err != ErrRetryableResult || calls.Load() != 1 {
		t.Fatalf("serving a retry: %v after %d calls", err, calls.Load())
	}
	// RequireRetryFlag without a flag, and with one.
	if _, err := run(ctx, fastPolicy(t, RequireRetryFlag())); calls.Load() != 1 || err != ErrRetryableResult {
		t.Fatalf("no flag: %v after %d calls", err, calls.Load())
	}
	if _, err := run(WithRetryFlag(ctx, "x"), fastPolicy(t, RequireRetryFlag())); calls.Load() != 3 || err != ErrRetryableResult {
		t.Fatalf("flag: %v after %d calls", err, calls.Load())
	}
	// Non-critical.
	if _, err := run(ctx, fastPolicy(t, NonCritical())); calls.Load() != 1 || err != ErrRetryableResult {
		t.Fatalf("non-critical: %v after %d calls", err, calls.Load())
	}
	// A classifier that knows nothing still retries a rejected result.
	if _, err := run(ctx, fastPolicy(t, WithClassifier(func(error) Class { return Unknown }))); calls.Load() != 3 {
		t.Fatalf("classifier: %v after %d calls", err, calls.Load())
	}
	// Listed codes (G4) do not stop it: it carries no code.
	if _, err := run(ctx, fastPolicy(t, WithRetryableCodes(503))); calls.Load() != 3 {
		t.Fatalf("codes: %v after %d calls", err, calls.Load())
	}
	// The context's deadline would pass during the delay: a ContextError
	// wrapping ErrRetryableResult, and the last value.
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	v, err := run(dctx, mustPolicy(t, WithBackoff(backoff.Constant{Wait: time.Hour})))
	var ce *ContextError
	if !errors.As(err, &ce) || !errors.Is(err, ErrRetryableResult) || !errors.Is(err, context.DeadlineExceeded) || v.BizCode != "err_01" || calls.Load() != 1 {
		t.Fatalf("deadline: %+v %v after %d calls", v, err, calls.Load())
	}
	// Per-attempt timeouts (the timed path).
	p := mustPolicy(t, WithSettings(backoff.Settings{InitialRPCTimeout: time.Second, MaxAttempts: 4}), WithoutJitter())
	if _, err := run(ctx, p); err != ErrRetryableResult || calls.Load() != 4 {
		t.Fatalf("timed: %v after %d calls", err, calls.Load())
	}
}

// TestAttempts: the step-wise loop numbers attempts, applies the policy and
// ends with the error Do would return.
func TestAttempts(t *testing.T) {
	var a Attempts
	ctx, err := a.Begin(context.Background(), fastPolicy(t))
	if err != nil || a.Number() != 1 || Attempt(ctx) != 1 {
		t.Fatalf("begin: %v, attempt %d", err, a.Number())
	}
	for want := 2; want <= 3; want++ {
		if ctx, err = a.Retry(errNet); err != nil || a.Number() != want || Attempt(ctx) != want {
			t.Fatalf("retry %d: %v, attempt %d / %d", want, err, a.Number(), Attempt(ctx))
		}
	}
	if _, err = a.Retry(errNet); err != errNet {
		t.Fatalf("after 3 attempts: %v", err)
	}
	a.End()

	// Business errors end the call at once.
	var b Attempts
	b.Begin(context.Background(), nil)
	if _, err := b.Retry(errBusiness); err != errBusiness {
		t.Fatalf("business: %v", err)
	}
	// A done context: Begin refuses.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	var c Attempts
	if _, err := c.Begin(cctx, nil); err != context.Canceled {
		t.Fatalf("done context: %v", err)
	}
	// Per-attempt timeouts: each attempt's context has its own deadline,
	// released by the next Retry or by End.
	var d Attempts
	p := mustPolicy(t, WithSettings(backoff.Settings{InitialRPCTimeout: time.Minute, MaxAttempts: 2}))
	first, _ := d.Begin(context.Background(), p)
	if _, ok := first.Deadline(); !ok {
		t.Fatal("first attempt without its timeout")
	}
	second, err := d.Retry(errNet)
	if err != nil || first.Err() == nil {
		t.Fatalf("first attempt not released: %v", err)
	}
	d.End()
	if second.Err() == nil {
		t.Fatal("End did not release the attempt")
	}
}

func TestRetryIfAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	ctx := context.Background()
	fn := func(context.Context) (bizResp, error) { return bizResp{BizCode: "ok"}, nil }
	opt := RetryIf(needRetry)
	if a := testing.AllocsPerRun(1000, func() { DoValue(ctx, nil, fn, opt) }); a != 0 {
		t.Errorf("DoValue with RetryIf, success: %v allocs", a)
	}
	w := Wrap(nil, func(context.Context, int) (bizResp, error) { return bizResp{BizCode: "ok"}, nil }, opt)
	if a := testing.AllocsPerRun(1000, func() { w(ctx, 1) }); a != 0 {
		t.Errorf("Wrap with RetryIf, success: %v allocs", a)
	}
}
