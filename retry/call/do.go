package call

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
)

// Do calls fn until it returns nil or the policy says stop (SPEC M1), and
// returns nil or the error that ended the call:
//   - the context is done before the first attempt: ctx.Err(), and fn never
//     runs;
//   - the last attempt's error is not retryable ([Policy.Retryable]), the
//     attempts or the total timeout are used up, or the budget refuses the
//     retry: that error, unchanged;
//   - the context ends between attempts, or its deadline would pass before
//     the next attempt could start: a [*ContextError] that wraps both the
//     context's error and the last attempt's error, so errors.Is works for
//     both. Do never sleeps past the deadline and never starts an attempt
//     after the context is done (SPEC B7).
//
// fn gets ctx itself for the first attempt and, for retries, a context
// derived from ctx that carries the attempt number ([Attempt], [Inject]);
// with per-attempt RPC timeouts ([WithSettings]) every attempt's context also
// carries the attempt's deadline, and is cancelled when fn returns. p nil
// means the defaults. When the first attempt succeeds and the policy has no
// per-attempt or total timeout, Do allocates nothing; each call that retries
// allocates one small object, whatever the number of attempts, plus what
// per-attempt timeouts cost (context.WithTimeout).
func Do(ctx context.Context, p *Policy, fn func(context.Context) error) error {
	if p == nil {
		p = defaultPolicy
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.budget != nil {
		p.budget.Request()
	}
	if p.timed {
		_, err := valueTimed(ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }, nil)
		return err
	}
	err := fn(ctx)
	if err == nil {
		return nil
	}
	// Only the slow paths go through the generic loop: on the success path
	// the adapter closure would cost Do a few ns (measured).
	_, err = valueRetry(ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }, nil, struct{}{}, err)
	return err
}

// DoValue is [Do] for a function that returns a value (SPEC M1). It returns
// the value and error of the last attempt, with the error replaced as Do
// describes; if the context is done before the first attempt it returns the
// zero value and ctx.Err().
//
// With [RetryIf], an attempt that returns a nil error and a value the
// predicate rejects is retried like a network error (SPEC M3); if the call
// ends on such an attempt (attempts used up, budget refused, context done),
// DoValue returns that value with [ErrRetryableResult] (or a *ContextError
// wrapping it).
func DoValue[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), opts ...ValueOption[T]) (T, error) {
	if p == nil {
		p = defaultPolicy
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	if p.budget != nil {
		p.budget.Request()
	}
	retryIf := retryIfOf(opts)
	if p.timed {
		return valueTimed(ctx, p, fn, retryIf)
	}
	v, err := fn(ctx)
	if err = judge(v, err, retryIf); err == nil {
		return v, nil
	}
	return valueRetry(ctx, p, fn, retryIf, v, err)
}

// judge returns the error an attempt counts as: its own, or
// ErrRetryableResult for a value retryIf rejects.
func judge[T any](v T, err error, retryIf func(T) bool) error {
	if err == nil && retryIf != nil && retryIf(v) {
		return ErrRetryableResult
	}
	return err
}

func valueTimed[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), retryIf func(T) bool) (T, error) {
	var r runner
	v, err := fn(r.begin(ctx, p))
	r.end()
	if err = judge(v, err, retryIf); err == nil {
		return v, nil
	}
	return valueLoop(&r, fn, retryIf, v, err)
}

func valueRetry[T any](ctx context.Context, p *Policy, fn func(context.Context) (T, error), retryIf func(T) bool, v T, err error) (T, error) {
	var r runner
	r.resume(ctx, p)
	return valueLoop(&r, fn, retryIf, v, err)
}

func valueLoop[T any](r *runner, fn func(context.Context) (T, error), retryIf func(T) bool, v T, err error) (T, error) {
	for {
		actx, stop := r.next(err)
		if stop != nil {
			return v, stop
		}
		v, err = fn(actx)
		r.end()
		if err = judge(v, err, retryIf); err == nil {
			return v, nil
		}
	}
}

// Wrap returns fn decorated with policy p (SPEC M1): the typed, reflection-
// free form of seed 001's decorator, for any function of the shape
// func(context.Context, Req) (Resp, error). The returned function behaves as
// [DoValue] over fn(ctx, req), opts included, and allocates nothing per call
// when the first attempt succeeds (Wrap itself allocates the closure once).
// p nil means the defaults; p and opts are fixed when Wrap is called.
func Wrap[Req, Resp any](p *Policy, fn func(context.Context, Req) (Resp, error), opts ...ValueOption[Resp]) func(context.Context, Req) (Resp, error) {
	p = orDefault(p)
	retryIf := retryIfOf(opts)
	return func(ctx context.Context, req Req) (Resp, error) {
		if err := ctx.Err(); err != nil {
			var zero Resp
			return zero, err
		}
		if p.budget != nil {
			p.budget.Request()
		}
		if p.timed {
			return valueTimed(ctx, p, func(ctx context.Context) (Resp, error) { return fn(ctx, req) }, retryIf)
		}
		resp, err := fn(ctx, req)
		if err = judge(resp, err, retryIf); err == nil {
			return resp, nil
		}
		return valueRetry(ctx, p, func(ctx context.Context) (Resp, error) { return fn(ctx, req) }, retryIf, resp, err)
	}
}

// ValueOption configures how [DoValue], [Wrap] and [Retry] judge the values
// of type T a call returns. Build one with [RetryIf].
type ValueOption[T any] struct {
	retryIf func(T) bool
}

// RetryIf retries an attempt that succeeded (nil error) but returned a value
// for which pred is true — a business code in the response that says "try
// again", seed 001's needRetryErr (SPEC M3). Such an attempt counts as a
// network error ([ErrRetryableResult], class Network) for every rule of the
// policy: the attempt bound, the delays, the budget, the flags of B5, the
// non-critical switch. pred must be safe for concurrent use when the
// decorated function is shared. With several RetryIf options the last wins.
func RetryIf[T any](pred func(v T) bool) ValueOption[T] {
	return ValueOption[T]{retryIf: pred}
}

func retryIfOf[T any](opts []ValueOption[T]) func(T) bool {
	var f func(T) bool
	for _, o := range opts {
		if o.retryIf != nil {
			f = o.retryIf
		}
	}
	return f
}

// ErrRetryableResult is the error of an attempt whose value a [RetryIf]
// predicate rejected. A call that ends on such an attempt returns the value
// with this error, or with a *ContextError wrapping it: errors.Is(err,
// ErrRetryableResult) reports that the predicate still wanted a retry when
// the attempts, the budget or the context ran out. Its class is Network,
// whatever the policy's classifier says.
var ErrRetryableResult error = &classError{"call: the result still asks for a retry (RetryIf)", Network}

// Attempts runs the retry loop of one call step by step, for a caller whose
// attempt is not one function call: a gRPC stream, whose attempt goes on
// after the call that opened it has returned (SPEC M2), or an HTTP response
// whose body the caller reads after the round trip (package httpcall). It
// applies the policy as [Do] does — budget, classes, flags, bounds, delays,
// context — and numbers the attempts ([Attempt]). The zero value is ready
// for Begin. An Attempts serves one call, from one goroutine at a time, and
// must not be copied after Begin.
type Attempts struct {
	r runner
	// What Decide chose for Next: the wait before the next attempt, its
	// RPC timeout, and the error of the attempt that failed.
	wait, timeout time.Duration
	last          error
}

// Begin starts the call under ctx with policy p (nil: the defaults): it
// records the request with the policy's budget and returns the context of
// the first attempt — ctx itself, or a child carrying the attempt's RPC
// timeout. It returns ctx.Err() if ctx is already done.
func (a *Attempts) Begin(ctx context.Context, p *Policy) (context.Context, error) {
	p = orDefault(p)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.budget != nil {
		p.budget.Request()
	}
	return a.r.begin(ctx, p), nil
}

// Retry ends the current attempt, which failed with err, and decides whether
// another is made: [Attempts.Decide] then [Attempts.Next]. If so, it waits
// the delay and returns the next attempt's context, which carries the
// attempt's number and RPC timeout. If not, it returns the error the call
// ends with: err itself, or a [*ContextError] when the context ended or its
// deadline would pass first (SPEC B7). After an error the call is over: do
// not call Retry again.
func (a *Attempts) Retry(err error) (context.Context, error) {
	if stop := a.Decide(err); stop != nil {
		a.End()
		return nil, stop
	}
	return a.Next()
}

// Decide decides whether the current attempt, which failed with err, is
// followed by another, without waiting and without ending the attempt (the
// caller may still hand its result over, as an HTTP transport hands over
// the last response). It returns nil if another attempt is to be made: call
// [Attempts.Next] for it. Otherwise it returns the error the call ends with,
// as Retry does; the caller then ends the attempt ([Attempts.End] or
// [Attempts.Detach]). A retry granted by the policy's budget is held from
// Decide to Next.
func (a *Attempts) Decide(err error) error {
	wait, timeout, stop := a.r.plan(err)
	if stop != nil {
		return stop
	}
	a.wait, a.timeout, a.last = wait, timeout, err
	return nil
}

// Next ends the current attempt, waits the delay Decide chose and returns
// the next attempt's context. If the caller's context ends during the wait
// it returns a [*ContextError] instead (the budget's grant is given back,
// since the retry was not sent) and the call is over. Call it only after
// Decide returned nil.
func (a *Attempts) Next() (context.Context, error) {
	a.r.end()
	last := a.last
	a.last = nil
	return a.r.proceed(last, a.wait, a.timeout)
}

// End ends the current attempt, releasing its RPC timeout: call it when the
// attempt's work is over and the call succeeded (a stream read to its end).
// End is idempotent.
func (a *Attempts) End() { a.r.end() }

// Detach hands the current attempt's RPC timeout over to the caller: it
// returns the function that releases it, or nil if the attempt has none.
// End no longer releases it. It is for an attempt whose result outlives the
// call, as an HTTP response whose body the caller reads within the
// attempt's deadline; the caller must call the function when done.
func (a *Attempts) Detach() context.CancelFunc {
	cancel := a.r.cancel
	a.r.cancel = nil
	return cancel
}

// Number returns the number of the current attempt: 1 for the first.
func (a *Attempts) Number() int { return a.r.made }

// ContextError is returned when a call stops because its context ended
// between attempts (SPEC B7). It wraps both errors: errors.Is(err,
// context.DeadlineExceeded) and errors.Is(err, lastAttemptErr) both hold.
type ContextError struct {
	// Err is the context's error, or context.DeadlineExceeded when the
	// deadline would have passed before the next attempt could start (the
	// call returned at once instead of sleeping into it).
	Err error
	// Last is the error of the last attempt made.
	Last error
	// Attempts is the number of attempts made.
	Attempts int
}

// Error says which context error ended the retries, after how many
// attempts, and the last attempt's error.
func (e *ContextError) Error() string {
	s := "call: " + e.Err.Error() + " after " + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	if e.Last != nil {
		s += ", last error: " + e.Last.Error()
	}
	return s
}

// Unwrap returns the context's error and the last attempt's error.
func (e *ContextError) Unwrap() []error { return []error{e.Err, e.Last} }

// runner is the state of one call past its first attempt: the iterator over
// the policy's schedule, the attempt context, the running attempt's timeout.
// It lives on the caller's stack.
type runner struct {
	p      *Policy
	ctx    context.Context // the caller's
	it     backoff.Iterator
	t0     time.Time // start of the call, if p.clock
	made   int       // attempts made
	actx   *attemptCtx
	cancel context.CancelFunc // the running attempt's timeout
	grant  budget.Reservation // the budget's grant for the retry being waited for
}

// begin sets r up for a timed policy and returns the first attempt's context.
func (r *runner) begin(ctx context.Context, p *Policy) context.Context {
	r.p, r.ctx, r.it, r.made = p, ctx, p.iter, 1
	if p.clock {
		r.t0 = time.Now()
	}
	a, _ := r.it.Next(0)
	if a.RPCTimeout > 0 {
		var actx context.Context
		actx, r.cancel = context.WithTimeout(ctx, a.RPCTimeout)
		return actx
	}
	return ctx
}

// resume sets r up after an untimed first attempt that ran without it.
func (r *runner) resume(ctx context.Context, p *Policy) {
	r.p, r.ctx, r.it, r.made = p, ctx, p.iter, 1
	r.it.Next(0)
}

// end releases the finished attempt's timeout.
func (r *runner) end() {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
}

// next decides whether the attempt that failed with err is retried. If it
// is, next waits the delay and returns the next attempt's context; if not,
// it returns the error the call ends with.
func (r *runner) next(err error) (context.Context, error) {
	wait, timeout, stop := r.plan(err)
	if stop != nil {
		return nil, stop
	}
	return r.proceed(err, wait, timeout)
}

// plan decides whether the attempt that failed with err is retried, in this
// order: the caller's context (B7), the policy's judgement of the error (B2,
// B5, B6, G4), the attempt bound and total timeout (B3, G2), the server's
// Retry-After, the context's deadline against the wait (B7), the budget
// (B4). It returns the wait and the next attempt's RPC timeout, or the error
// to end the call with. A budget grant is held from here on; proceed
// cancels it if the retry is not sent.
func (r *runner) plan(err error) (wait, timeout time.Duration, stop error) {
	p := r.p
	if cerr := r.ctx.Err(); cerr != nil {
		return 0, 0, r.contextError(cerr, err)
	}
	if !p.Retryable(r.ctx, err) {
		return 0, 0, err
	}
	var elapsed time.Duration
	if p.clock {
		elapsed = time.Since(r.t0)
	}
	a, ok := r.it.Next(elapsed)
	if !ok {
		return 0, 0, err
	}
	wait, timeout = a.Delay, a.RPCTimeout
	if ra, ok := retryAfterOf(err); ok && p.maxRetryAfter > 0 {
		if ra = min(ra, p.maxRetryAfter); ra > wait {
			wait = ra
			if total := p.iter.Settings.TotalTimeout; total > 0 {
				start := elapsed + wait
				if start >= total {
					return 0, 0, err
				}
				if left := total - start; timeout == 0 || timeout > left {
					timeout = left
				}
			}
		}
	}
	if deadline, ok := r.ctx.Deadline(); ok && time.Until(deadline) <= wait {
		return 0, 0, r.contextError(context.DeadlineExceeded, err)
	}
	if p.budget != nil {
		grant, ok := p.budget.Reserve()
		if !ok {
			return 0, 0, err
		}
		r.grant = grant
	}
	return wait, timeout, nil
}

// proceed sleeps wait and returns the next attempt's context, or a
// *ContextError if the caller's context ends first (releasing the budget's
// grant, since the retry was never sent).
func (r *runner) proceed(last error, wait, timeout time.Duration) (context.Context, error) {
	if cerr := r.sleep(wait); cerr != nil {
		r.grant.Cancel()
		return nil, r.contextError(cerr, last)
	}
	r.grant = budget.Reservation{}
	if r.actx == nil {
		r.actx = &attemptCtx{Context: r.ctx}
	}
	r.made++
	r.actx.n.Store(int32(r.made))
	if timeout > 0 {
		var actx context.Context
		actx, r.cancel = context.WithTimeout(r.actx, timeout)
		return actx, nil
	}
	return r.actx, nil
}

func (r *runner) contextError(cerr, last error) error {
	return &ContextError{Err: cerr, Last: last, Attempts: r.made}
}

// sleep waits d or until the caller's context is done, and returns the
// context's error if it is done by then.
func (r *runner) sleep(d time.Duration) error {
	if r.p.sleep != nil {
		return r.p.sleep(r.ctx, d)
	}
	return sleepCtx(r.ctx, d)
}

// timers holds stopped or fired timers for reuse: a retry sleeps without
// allocating a timer (Go 1.23+ timers: after Stop or a receive, Reset leaves
// no stale tick in the channel).
var timers sync.Pool

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := ctx.Done()
	if done == nil {
		// A context that can never end: the goroutine's own sleep timer,
		// no channel, no pool.
		time.Sleep(d)
		return nil
	}
	t, _ := timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C:
	case <-done:
		t.Stop()
	}
	timers.Put(t)
	// Checked after the timer too: never start an attempt after the
	// context is done, even if both happened at once.
	return ctx.Err()
}

// RetryAfter is implemented by errors that carry the server's requested
// wait before a retry, such as httpcall.StatusError for an HTTP Retry-After
// or a gRPC retry pushback. The call waits at least that long (capped by
// [WithMaxRetryAfter]).
type RetryAfter interface {
	error
	RetryAfter() time.Duration
}

func retryAfterOf(err error) (time.Duration, bool) {
	ra, ok := as[RetryAfter](err)
	if !ok {
		return 0, false
	}
	d := ra.RetryAfter()
	return d, d > 0
}
