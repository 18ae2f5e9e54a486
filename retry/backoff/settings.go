package backoff

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxDuration is the largest delay or timeout this package ever returns
// (about 292 years). Arithmetic that would pass it saturates here instead of
// wrapping to a negative value.
const MaxDuration = time.Duration(math.MaxInt64)

// MaxPlanAttempts bounds the length of [Settings.Plan]: Settings with neither
// MaxAttempts nor TotalTimeout (or with a tiny RPC timeout under a huge total)
// describe a very long or endless operation, and a plan is a list, so it is
// cut after this many attempts.
const MaxPlanAttempts = 1000

// ErrInvalidConfig is wrapped by every error of [Settings.Validate].
var ErrInvalidConfig = errors.New("backoff: invalid config")

// Settings are the retry settings of one RPC (SPEC G1), after the
// RetrySettings of the Google Cloud client libraries (seed 002). The zero
// value describes one attempt with no timeout and unlimited retries with no
// delay; build real settings field by field or start from [LogicalTimeout].
//
// A zero duration field means "none": no delay, no per-attempt timeout, no
// cap, no total timeout. A zero multiplier means 1. Settings are plain values:
// copy them freely; they are safe for concurrent use because nothing writes
// them.
type Settings struct {
	// InitialRetryDelay is the delay before the first retry (attempt 2).
	InitialRetryDelay time.Duration
	// RetryDelayMultiplier scales the delay from one retry to the next
	// (0 means 1; otherwise at least 1).
	RetryDelayMultiplier float64
	// MaxRetryDelay caps every delay (0: no cap).
	MaxRetryDelay time.Duration
	// InitialRPCTimeout is the timeout of the first attempt (0: the attempt
	// is bounded only by what is left of TotalTimeout, if any).
	InitialRPCTimeout time.Duration
	// RPCTimeoutMultiplier scales the RPC timeout from one attempt to the
	// next (0 means 1; otherwise at least 1).
	RPCTimeoutMultiplier float64
	// MaxRPCTimeout caps every attempt's RPC timeout (0: no cap).
	MaxRPCTimeout time.Duration
	// TotalTimeout bounds the whole operation: no attempt starts at or after
	// it, and an attempt's timeout never runs past it (0: no bound).
	TotalTimeout time.Duration
	// MaxAttempts counts attempts in all, the first included: 1 means no
	// retry, 0 means no limit (then TotalTimeout should bound the operation,
	// SPEC B3).
	MaxAttempts int
}

// Attempt is one row of an operation's timing table (SPEC G2, G5). All
// durations are measured from the start of the operation except RPCTimeout
// and Delay.
type Attempt struct {
	// Number is 1 for the first attempt, 2 for the first retry, and so on.
	Number int
	// RPCTimeout is the attempt's own timeout, already cut to what is left of
	// the total timeout; 0 means the attempt has no timeout.
	RPCTimeout time.Duration
	// Delay is the wait between the end of the previous attempt and Start
	// (0 for the first attempt); with jitter it is the jittered value.
	Delay time.Duration
	// Start is when the attempt is sent.
	Start time.Duration
	// End is Start + RPCTimeout: when the attempt times out. For an attempt
	// without a timeout End equals Start, since nothing bounds it.
	End time.Duration
}

// LogicalTimeout returns settings in which one timeout t bounds both every
// attempt and the whole operation (SPEC G1): InitialRPCTimeout = MaxRPCTimeout
// = TotalTimeout = t and RPCTimeoutMultiplier = 1, with no retry delay. With
// these settings a first attempt that times out uses the whole budget, so no
// retry follows it; an attempt that fails early may be retried within t.
func LogicalTimeout(t time.Duration) Settings {
	return Settings{
		InitialRPCTimeout:    t,
		RPCTimeoutMultiplier: 1,
		MaxRPCTimeout:        t,
		TotalTimeout:         t,
	}
}

// Validate reports the first field that is out of range, as an error that
// wraps [ErrInvalidConfig]: a negative duration, a multiplier that is
// negative, below 1 (other than 0), NaN or infinite, or a negative
// MaxAttempts. Plan and Iterator do not fail on such settings: they read a
// negative duration as 0 and a bad multiplier as 1, so validate settings
// that come from configuration before using them.
func (s Settings) Validate() error {
	durations := [...]struct {
		name string
		d    time.Duration
	}{
		{"InitialRetryDelay", s.InitialRetryDelay},
		{"MaxRetryDelay", s.MaxRetryDelay},
		{"InitialRPCTimeout", s.InitialRPCTimeout},
		{"MaxRPCTimeout", s.MaxRPCTimeout},
		{"TotalTimeout", s.TotalTimeout},
	}
	for _, f := range durations {
		if f.d < 0 {
			return fmt.Errorf("%w: %s is negative (%v)", ErrInvalidConfig, f.name, f.d)
		}
	}
	if err := checkMultiplier("RetryDelayMultiplier", s.RetryDelayMultiplier); err != nil {
		return err
	}
	if err := checkMultiplier("RPCTimeoutMultiplier", s.RPCTimeoutMultiplier); err != nil {
		return err
	}
	if s.MaxAttempts < 0 {
		return fmt.Errorf("%w: MaxAttempts is negative (%d)", ErrInvalidConfig, s.MaxAttempts)
	}
	return nil
}

func checkMultiplier(name string, m float64) error {
	if m == 0 {
		return nil
	}
	if math.IsNaN(m) || math.IsInf(m, 0) || m < 1 {
		return fmt.Errorf("%w: %s must be 0 or a finite number >= 1, got %v", ErrInvalidConfig, name, m)
	}
	return nil
}

// Delay returns the nominal (unjittered) delay before retry number retry
// (1 = the first retry, attempt 2) given the nominal delay before the
// previous retry (SPEC G2): InitialRetryDelay for the first retry, then
// min(prev × RetryDelayMultiplier, MaxRetryDelay). It makes Settings a
// [Strategy]. For retry < 1 it returns 0.
func (s Settings) Delay(retry int, prev time.Duration) time.Duration {
	switch {
	case retry < 1:
		return 0
	case retry == 1:
		return capAt(nonNeg(s.InitialRetryDelay), s.MaxRetryDelay)
	default:
		return scale(nonNeg(prev), s.RetryDelayMultiplier, s.MaxRetryDelay)
	}
}

// Plan returns the operation's attempts as the seed 002 tables show them
// (SPEC G5): jitter off, and every attempt assumed to time out, so that
// attempt k+1 starts at the End of attempt k plus its delay. An attempt
// without a timeout is assumed to end at once. The plan stops where G2 stops
// the operation (MaxAttempts reached, or the next start at or past
// TotalTimeout) and never lists more than [MaxPlanAttempts] attempts. The
// returned slice is newly allocated and owned by the caller.
func (s Settings) Plan() []Attempt {
	it := Iterator{Settings: s, NoJitter: true}
	var plan []Attempt
	var elapsed time.Duration
	for len(plan) < MaxPlanAttempts {
		a, ok := it.Next(elapsed)
		if !ok {
			break
		}
		plan = append(plan, a)
		elapsed = a.End
	}
	return plan
}

// Iterator is the per-operation state of a retry schedule: which attempt comes
// next, and the nominal delay and RPC timeout of the last one. It is a small
// value meant to live on the caller's stack; it allocates nothing, reads no
// clock and is not safe for concurrent use (one operation, one iterator).
//
// Set the exported fields, then call [Iterator.Next] before every attempt.
// The zero value (zero Settings, no Strategy) allows unlimited attempts with
// no delay.
type Iterator struct {
	// Settings bound the operation: attempts, RPC timeouts, total timeout,
	// and — when Strategy is nil — the delays (SPEC G2).
	Settings Settings
	// Strategy, if not nil, computes the delays instead of Settings (SPEC
	// B1); it is called with the retry number and its own previous result.
	Strategy Strategy
	// NoJitter turns off the jitter of SPEC G3. Jitter applies only to the
	// delays computed from Settings; a Strategy is used as it is.
	NoJitter bool

	n       int           // attempts started so far
	done    bool          // Next returned false: the operation is over
	delay   time.Duration // nominal delay before the last retry
	timeout time.Duration // nominal RPC timeout of the last attempt, before the TotalTimeout cut
}

// Reset makes the iterator start a new operation with the same Settings,
// Strategy and NoJitter.
func (it *Iterator) Reset() {
	it.n, it.done, it.delay, it.timeout = 0, false, 0, 0
}

// Attempts returns how many attempts Next has allowed so far.
func (it *Iterator) Attempts() int { return it.n }

// Next returns the next attempt of the operation given elapsed, the time since
// the operation began (for a retry: measured when the previous attempt
// ended). It reports false when the operation must stop: MaxAttempts attempts
// have been made, or the attempt would start (elapsed + delay) at or after
// TotalTimeout (SPEC G2). Once Next has reported false it keeps doing so until
// [Iterator.Reset].
//
// The returned Attempt's Delay is the wait to sleep before sending it
// (jittered unless NoJitter or a Strategy is set), RPCTimeout its timeout
// (0: none), Start and End are elapsed-based.
func (it *Iterator) Next(elapsed time.Duration) (Attempt, bool) {
	if it.done {
		return Attempt{}, false
	}
	s := &it.Settings
	if it.n > 0 && s.MaxAttempts > 0 && it.n >= s.MaxAttempts {
		it.done = true
		return Attempt{}, false
	}
	elapsed = nonNeg(elapsed)
	var delay, wait, timeout time.Duration
	if it.n == 0 {
		timeout = capAt(nonNeg(s.InitialRPCTimeout), s.MaxRPCTimeout)
	} else {
		if it.Strategy != nil {
			delay = clampDelay(it.Strategy.Delay(it.n, it.delay))
			wait = delay
		} else {
			delay = s.Delay(it.n, it.delay)
			wait = delay
			if !it.NoJitter {
				wait = Jitter(delay)
			}
		}
		// The growth uses the previous nominal timeout, not the one cut by
		// TotalTimeout: the cut only ever shortens the last attempts.
		timeout = scale(it.timeout, s.RPCTimeoutMultiplier, s.MaxRPCTimeout)
	}
	start := addSat(elapsed, wait)
	effective := timeout
	if total := s.TotalTimeout; total > 0 {
		if start >= total {
			it.done = true
			return Attempt{}, false
		}
		if left := total - start; effective == 0 || effective > left {
			effective = left
		}
	}
	it.n++
	it.delay, it.timeout = delay, timeout
	return Attempt{
		Number:     it.n,
		RPCTimeout: effective,
		Delay:      wait,
		Start:      start,
		End:        addSat(start, effective),
	}, true
}

// nonNeg reads a negative duration as 0.
func nonNeg(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// clampDelay keeps a Strategy's result in [0, MaxDuration] even if a
// user-written Strategy misbehaves.
func clampDelay(d time.Duration) time.Duration { return nonNeg(d) }

// capAt returns min(d, limit), where limit <= 0 means no limit.
func capAt(d, limit time.Duration) time.Duration {
	if limit > 0 && d > limit {
		return limit
	}
	return d
}

// scale returns min(d × m, limit) without overflow; m below 1, NaN or
// infinite is read as 1, limit <= 0 means MaxDuration.
func scale(d time.Duration, m float64, limit time.Duration) time.Duration {
	if limit <= 0 {
		limit = MaxDuration
	}
	if d <= 0 {
		return 0
	}
	if !(m >= 1) || math.IsInf(m, 1) {
		m = 1
	}
	f := float64(d) * m
	// float64(MaxDuration) rounds up to 2^63, so every f below the limit
	// converts to an int64 without overflow.
	if f >= float64(limit) {
		return limit
	}
	return time.Duration(f)
}

// addSat returns a + b for non-negative a and b, saturating at MaxDuration.
func addSat(a, b time.Duration) time.Duration {
	if a > MaxDuration-b {
		return MaxDuration
	}
	return a + b
}
