package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Strategy computes the wait before a retry (SPEC B1). retry is 1 for the
// first retry (before attempt 2), 2 for the second, and so on; prev is the
// value the strategy returned for retry-1 in the same operation (0 for the
// first retry), which lets stateful schemes such as [Decorrelated] stay
// stateless themselves.
//
// Implementations must be safe for concurrent use (one strategy serves every
// call of a policy) and must return a value in [0, their cap] for every retry
// number, including retry < 1 and huge ones. [Iterator] clamps a negative
// result to 0 all the same.
type Strategy interface {
	Delay(retry int, prev time.Duration) time.Duration
}

// Jitter returns a uniform random delay in [1 ms, d] (SPEC G3): the jitter of
// the Google client libraries, which keeps a little wait but spreads clients
// over the whole interval. A d of 1 ms or less is returned unchanged, a
// negative one as 0 (B1: never negative).
func Jitter(d time.Duration) time.Duration {
	if d <= time.Millisecond {
		return max(d, 0)
	}
	return uniform(time.Millisecond, d)
}

// None retries at once (seed 003's "no backoff").
type None struct{}

// Delay returns 0.
func (None) Delay(int, time.Duration) time.Duration { return 0 }

// Constant waits the same time before every retry (seed 003's "linear
// backoff": a fixed wait after each failure).
type Constant struct {
	// Wait is the delay before every retry; a negative Wait means 0.
	Wait time.Duration
}

// Delay returns Wait (0 for retry < 1).
func (c Constant) Delay(retry int, _ time.Duration) time.Duration {
	if retry < 1 {
		return 0
	}
	return nonNeg(c.Wait)
}

// Random waits a uniform random time in [Min, Max] (seed 003's "random
// backoff"). Negative bounds mean 0; a Max below Min means Min.
type Random struct {
	Min, Max time.Duration
}

// Delay returns a uniform random duration in [Min, Max] (0 for retry < 1).
func (r Random) Delay(retry int, _ time.Duration) time.Duration {
	if retry < 1 {
		return 0
	}
	return uniform(nonNeg(r.Min), nonNeg(r.Max))
}

// Exponential waits Base × Multiplier^(retry−1), capped at Max (seed 003's
// "exponential backoff": each wait twice the previous one by default).
type Exponential struct {
	// Base is the delay before the first retry.
	Base time.Duration
	// Multiplier is the growth factor; 0 means 2, values below 1 mean 1.
	Multiplier float64
	// Max caps every delay; 0 means [MaxDuration].
	Max time.Duration
}

// Delay returns min(Base × Multiplier^(retry−1), Max) (0 for retry < 1),
// computed in floating point so that retry 64, 1,000 or 10⁶ give Max instead
// of an overflowed value.
func (e Exponential) Delay(retry int, _ time.Duration) time.Duration {
	if retry < 1 {
		return 0
	}
	return expo(e.Base, e.Multiplier, e.Max, retry)
}

// FullJitter waits a uniform random time in [0, min(Base ×
// Multiplier^(retry−1), Max)]: AWS's "full jitter", the exponential scheme
// combined with the random one (seed 003's "combined backoff").
type FullJitter struct {
	// Base is the upper bound of the first retry's delay.
	Base time.Duration
	// Multiplier is the growth factor of the upper bound; 0 means 2.
	Multiplier float64
	// Max caps the upper bound; 0 means [MaxDuration].
	Max time.Duration
}

// Delay returns a uniform random duration in [0, min(Base ×
// Multiplier^(retry−1), Max)] (0 for retry < 1).
func (f FullJitter) Delay(retry int, _ time.Duration) time.Duration {
	if retry < 1 {
		return 0
	}
	return uniform(0, expo(f.Base, f.Multiplier, f.Max, retry))
}

// Decorrelated is AWS's "decorrelated jitter": each delay is uniform in
// [Base, 3 × previous delay], capped at Max. It grows like the exponential
// scheme on average but two clients that failed together drift apart.
type Decorrelated struct {
	// Base is the smallest delay and the start of the chain.
	Base time.Duration
	// Max caps every delay; 0 means [MaxDuration].
	Max time.Duration
}

// Delay returns min(Max, uniform[Base, 3 × prev]) where prev is read as Base
// for the first retry (0 for retry < 1).
func (d Decorrelated) Delay(retry int, prev time.Duration) time.Duration {
	if retry < 1 {
		return 0
	}
	limit := d.Max
	if limit <= 0 {
		limit = MaxDuration
	}
	base := min(nonNeg(d.Base), limit)
	prev = max(nonNeg(prev), base)
	hi := MaxDuration
	if prev <= MaxDuration/3 {
		hi = 3 * prev
	}
	return min(uniform(base, hi), limit)
}

// expo returns min(base × m^(retry−1), limit) for retry >= 1, where m = 0
// means 2 and limit <= 0 means MaxDuration.
func expo(base time.Duration, m float64, limit time.Duration, retry int) time.Duration {
	if limit <= 0 {
		limit = MaxDuration
	}
	base = nonNeg(base)
	if base == 0 {
		return 0
	}
	if m == 0 {
		m = 2
	}
	if !(m >= 1) {
		m = 1
	}
	// math.Pow reaches +Inf instead of wrapping; Inf and NaN fail the
	// comparison below and give the limit.
	f := float64(base) * math.Pow(m, float64(retry-1))
	if !(f < float64(limit)) {
		return limit
	}
	return time.Duration(f)
}

// uniform returns a uniform random duration in [lo, hi] for 0 <= lo; a hi
// below lo gives lo.
func uniform(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	// hi-lo <= MaxInt64, so the bound below never overflows uint64.
	return lo + time.Duration(rand.Uint64N(uint64(hi-lo)+1))
}
