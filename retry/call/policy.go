package call

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
)

// DefaultMaxAttempts is the attempts in all (the first included) of a policy
// that sets no bound (SPEC B3).
const DefaultMaxAttempts = 3

// DefaultMaxRetryAfter caps the wait a server may ask for with Retry-After
// (or an error implementing RetryAfter) unless [WithMaxRetryAfter] says
// otherwise.
const DefaultMaxRetryAfter = 30 * time.Second

// DefaultSettings returns the retry settings of a policy built without
// [WithSettings] or [WithBackoff]: 3 attempts in all, delays of 100 ms, then
// 200 ms (×2, at most 5 s), jittered in [1 ms, delay] (G3); no per-attempt
// or total timeout (the caller's context bounds the call).
func DefaultSettings() backoff.Settings {
	return backoff.Settings{
		InitialRetryDelay:    100 * time.Millisecond,
		RetryDelayMultiplier: 2,
		MaxRetryDelay:        5 * time.Second,
		MaxAttempts:          DefaultMaxAttempts,
	}
}

// ErrInvalidConfig is wrapped by every error of [NewPolicy] and
// [Policy.With].
var ErrInvalidConfig = errors.New("call: invalid config")

// Policy says whether and when a failed call is retried: the attempt bound
// and delays (a [backoff.Settings] or a [backoff.Strategy]), the error
// classifier, the retryable codes, the retry budget, and the flags of B5 and
// B6. Build one with [NewPolicy] per RPC (or per service, refined per RPC
// with [Policy.With]) and share it: a Policy is immutable and safe for
// concurrent use by any number of goroutines. A nil *Policy means the
// defaults.
type Policy struct {
	iter          backoff.Iterator // template: Settings, Strategy, NoJitter; state unused
	classify      Classifier
	codes         []int // sorted, without duplicates
	budget        *budget.Budget
	nonCritical   bool
	requireFlag   bool
	unbounded     bool
	maxRetryAfter time.Duration

	// Derived in finish.
	timed bool // attempts have RPC timeouts or the operation a total timeout
	clock bool // TotalTimeout > 0: elapsed time is needed

	// sleep replaces the real sleep in tests; nil in production. It gets
	// the call's context, never the runner, so the runner stays on the
	// stack.
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a [Policy]. Options apply in order; a later option
// overrides an earlier one that sets the same thing.
type Option func(*Policy) error

// NewPolicy returns a policy with the defaults ([DefaultSettings], the
// [Classify] classifier, no codes, no budget) changed by opts. It fails with
// an error wrapping [ErrInvalidConfig] if an option is invalid, or if the
// policy would retry without bound — no attempt limit and no total timeout —
// without [Unbounded] (SPEC B3).
func NewPolicy(opts ...Option) (*Policy, error) {
	p := &Policy{
		iter:          backoff.Iterator{Settings: DefaultSettings()},
		classify:      Classify,
		maxRetryAfter: DefaultMaxRetryAfter,
	}
	return p.apply(opts)
}

// With returns a new policy: a copy of p changed by opts (per-RPC settings
// on top of a service's defaults, SPEC G4). p itself is not changed.
func (p *Policy) With(opts ...Option) (*Policy, error) {
	c := *orDefault(p)
	c.codes = slices.Clone(c.codes)
	return c.apply(opts)
}

func (p *Policy) apply(opts []Option) (*Policy, error) {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(p); err != nil {
			return nil, err
		}
	}
	s := p.iter.Settings
	if s.MaxAttempts == 0 && s.TotalTimeout == 0 && !p.unbounded {
		return nil, fmt.Errorf("%w: no attempt limit and no total timeout; use Unbounded to retry without bound", ErrInvalidConfig)
	}
	it := p.iter // the first attempt's timeout, as the runner will see it
	first, _ := it.Next(0)
	p.clock = s.TotalTimeout > 0
	p.timed = first.RPCTimeout > 0 || p.clock
	return p, nil
}

// MustPolicy is NewPolicy for policies built from constants: it panics if
// NewPolicy fails.
func MustPolicy(opts ...Option) *Policy {
	p, err := NewPolicy(opts...)
	if err != nil {
		panic(err)
	}
	return p
}

var defaultPolicy = MustPolicy()

func orDefault(p *Policy) *Policy {
	if p == nil {
		return defaultPolicy
	}
	return p
}

// WithMaxAttempts bounds the attempts of a call, the first included: 1 means
// no retry (SPEC B3). n must be at least 1.
func WithMaxAttempts(n int) Option {
	return func(p *Policy) error {
		if n < 1 {
			return fmt.Errorf("%w: MaxAttempts %d is below 1 (use Unbounded for no limit)", ErrInvalidConfig, n)
		}
		p.iter.Settings.MaxAttempts = n
		return nil
	}
}

// Unbounded removes the attempt limit: the call is retried until it
// succeeds, the error is not retryable, the total timeout or the context
// ends it. Unbounded retry must be asked for explicitly (SPEC B3).
func Unbounded() Option {
	return func(p *Policy) error {
		p.unbounded = true
		p.iter.Settings.MaxAttempts = 0
		return nil
	}
}

// WithSettings uses the per-RPC settings s (SPEC G1, G2): attempts, delays
// (jittered unless [WithoutJitter]), per-attempt RPC timeouts (each attempt
// runs under a context with that timeout) and the total timeout. It replaces
// the attempt limit and removes a strategy set by [WithBackoff]; s must pass
// [backoff.Settings.Validate].
func WithSettings(s backoff.Settings) Option {
	return func(p *Policy) error {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		p.iter.Settings = s
		p.iter.Strategy = nil
		p.unbounded = false
		return nil
	}
}

// WithBackoff uses strategy s for the delays (SPEC B1) instead of the
// settings' delays; attempt limit and timeouts are unchanged.
func WithBackoff(s backoff.Strategy) Option {
	return func(p *Policy) error {
		if s == nil {
			return fmt.Errorf("%w: nil backoff strategy", ErrInvalidConfig)
		}
		p.iter.Strategy = s
		return nil
	}
}

// WithoutJitter turns off the jitter of the settings' delays (SPEC G3), for
// tests and reproducible schedules.
func WithoutJitter() Option {
	return func(p *Policy) error {
		p.iter.NoJitter = true
		return nil
	}
}

// WithClassifier replaces [Classify] (SPEC B2).
func WithClassifier(c Classifier) Option {
	return func(p *Policy) error {
		if c == nil {
			return fmt.Errorf("%w: nil classifier", ErrInvalidConfig)
		}
		p.classify = c
		return nil
	}
}

// WithRetryableCodes lists the status codes this RPC retries (SPEC G4): an
// error carrying a code ([Coded]) is retried only if its code is listed, and
// then even if its class is Unknown. Business and service-quality errors
// stay unretried whatever their code (B2); errors without a code are judged
// by their class alone. No codes (the default) means the class decides.
func WithRetryableCodes(codes ...int) Option {
	return func(p *Policy) error {
		c := slices.Clone(codes)
		slices.Sort(c)
		p.codes = slices.Compact(c)
		return nil
	}
}

// WithBudget makes calls draw their retries from b (SPEC B4), which is
// usually shared by every policy of a client. Each call records its first
// attempt; a retry the budget refuses is not made and the last error is
// returned. A nil b removes the budget.
func WithBudget(b *budget.Budget) Option {
	return func(p *Policy) error {
		p.budget = b
		return nil
	}
}

// NonCritical marks calls to a non-critical downstream (SPEC B6): they fail
// fast, with no retry, leaving the downstream's capacity to critical callers.
func NonCritical() Option {
	return func(p *Policy) error {
		p.nonCritical = true
		return nil
	}
}

// RequireRetryFlag retries only calls whose context carries a retry flag
// (seed 001's retryFlag, see [WithRetryFlag]): retry is then switched on per
// scenario at the entrance, not for every request of the service.
func RequireRetryFlag() Option {
	return func(p *Policy) error {
		p.requireFlag = true
		return nil
	}
}

// WithMaxRetryAfter caps the wait a server can ask for (an HTTP Retry-After,
// or an error implementing RetryAfter() time.Duration); default
// [DefaultMaxRetryAfter]. A longer request is shortened to d, never obeyed
// past it; d must not be negative (0 ignores such requests).
func WithMaxRetryAfter(d time.Duration) Option {
	return func(p *Policy) error {
		if d < 0 {
			return fmt.Errorf("%w: negative MaxRetryAfter %v", ErrInvalidConfig, d)
		}
		p.maxRetryAfter = d
		return nil
	}
}

// Settings returns the policy's retry settings (attempt bound, delays,
// timeouts).
func (p *Policy) Settings() backoff.Settings { return orDefault(p).iter.Settings }

// Retryable reports whether a failed attempt with error err, made under
// ctx, may be retried by p, leaving aside the attempt bound, the budget and
// the context's deadline. In order (SPEC B6, B5, B2, G4, B5):
//   - a non-critical policy never retries;
//   - a call made while serving a request that is itself a retry is not
//     retried (Flags.IsRetry);
//   - with RequireRetryFlag, a call without a retry flag is not retried;
//   - Business and ServiceQuality errors are not retried;
//   - with retryable codes listed, an error carrying a code is retried only
//     if the code is listed (an Unknown error with a listed code counts as
//     Network);
//   - Network errors are retried; Timeout errors only at the entrance.
func (p *Policy) Retryable(ctx context.Context, err error) bool {
	p = orDefault(p)
	if err == nil || p.nonCritical {
		return false
	}
	f, entrance := entrance(ctx)
	if f.IsRetry() || (p.requireFlag && f.Flag == "") {
		return false
	}
	class := Network // a result RetryIf rejected: no classifier overrides it
	if err != ErrRetryableResult {
		class = p.classify(err)
	}
	switch class {
	case Business, ServiceQuality:
		return false
	}
	if len(p.codes) > 0 {
		if code, ok := codeOf(err); ok {
			if _, found := slices.BinarySearch(p.codes, code); !found {
				return false
			}
			if class == Unknown {
				class = Network
			}
		}
	}
	switch class {
	case Network:
		return true
	case Timeout:
		return entrance
	}
	return false
}
