package retry

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
)

// Hedge turns on the adaptive first re-send of simple reads (SPEC R21,
// opt-in; Config.Hedge): the first re-send goes out at
// d = min(x, the zone's recent first-answer latency at Percentile), at
// least Min, instead of at x = 2T/((n+1)(n+2)); the remaining n−1 re-sends
// keep the triangular shape over what is left of the budget,
// x' = 2(T−d)/(n(n+1)), at d + x', d + 3x', …, ending exactly at T. Every
// re-send still passes the storm guard (SPEC R19) and a read still sends at
// most 1 + n attempts. Until the zone's window holds MinSamples answers,
// x is used. Complex reads (batch, index) wait for their first packet
// min(x, the zone's recent first-packet latency at Percentile), at least
// Min, estimated apart from simple reads' first answers over the same
// window; every later wait is the seed's (SPEC R10), and the same guard and
// attempt bound apply.
type Hedge struct {
	// Percentile of the first-answer latency, in (0, 1), e.g. 0.95; 0
	// turns hedging off (the seed's schedule).
	Percentile float64
	// Min is the earliest the first re-send may go out (≥ 0); it keeps a
	// zone whose answers are all fast from re-sending every slightly slow
	// read.
	Min time.Duration
	// Window is the span the estimate covers: answers older than one to two
	// windows are forgotten. 0 means DefaultHedgeWindow.
	Window time.Duration
	// MinSamples is the least number of answers in the window before the
	// estimate is used; 0 means DefaultHedgeSamples.
	MinSamples int
}

// Defaults of Hedge.
const (
	DefaultHedgeWindow  = 10 * time.Second
	DefaultHedgeSamples = 100
)

// check validates h; errors wrap ErrInvalidConfig.
func (h *Hedge) check() error {
	if h.Percentile == 0 {
		return nil
	}
	if !(h.Percentile > 0 && h.Percentile < 1) || h.Min < 0 || h.Window < 0 || h.MinSamples < 0 || h.Window > MaxWaitTimeout {
		return fmt.Errorf("%w: Hedge %+v: Percentile outside (0, 1), or a negative Min, Window or MinSamples", ErrInvalidConfig, *h)
	}
	return nil
}

// latencyBuckets: a fixed log-bucketed histogram of latencies, 4 linear
// buckets per power of two of 1,024 ns units up to about 2^41 ns (36 min);
// larger values go to the last bucket. A bucket's upper bound is at most
// 5/4 of the latencies in it, fine for a re-send time against a budget of
// hundreds of milliseconds.
const (
	bucketsPerOctave = 4
	latencyBuckets   = 42 * bucketsPerOctave
)

// bucketOf returns ns's bucket.
func bucketOf(ns int64) int {
	us := uint64(max(ns>>10, 1)) // ~µs
	e := bits.Len64(us) - 1      // octave
	frac := 0
	if e >= 2 {
		frac = int(us>>(e-2)) & 3
	} else {
		frac = int(us<<(2-e)) & 3
	}
	return min(e*bucketsPerOctave+frac, latencyBuckets-1)
}

// bucketTop returns the upper bound of bucket b in ns (the estimate errs on
// the late side: a read is re-sent no earlier than the percentile).
func bucketTop(b int) int64 {
	e, frac := b/bucketsPerOctave, b%bucketsPerOctave
	us := (uint64(4+frac+1) << e) >> 2
	return int64(us) << 10
}

// hedgeEst is one zone's first-answer latency estimate over a sliding
// window: two histograms (the current half-window and the previous), only
// the poller writes them (it handles every answer), and the percentile it
// derives is published in d, which senders read with one atomic load.
// Recording is a few adds; the percentile is recomputed every
// recomputeEvery answers and at each rotation, a scan of 2×168 counters.
type hedgeEst struct {
	d         atomic.Int64 // the current estimate, ns; 0: not enough answers
	cur, prev [latencyBuckets]uint32
	ncur      int
	nprev     int
	since     int64 // when cur started, ns since the epoch
	pending   int   // answers since the last recompute
}

const recomputeEvery = 64

// record adds one first-answer latency at time now (poller only).
func (h *hedgeEst) record(c *Client, lat, now int64) {
	if now-h.since >= int64(c.hedge.Window)/2 {
		h.prev, h.nprev = h.cur, h.ncur
		h.cur, h.ncur = [latencyBuckets]uint32{}, 0
		h.since = now
		h.pending = recomputeEvery // recompute now
	}
	h.cur[bucketOf(lat)]++
	h.ncur++
	// Every recomputeEvery answers, and at each answer until the estimate
	// is ready (the warm-up: MinSamples answers).
	if h.pending++; h.pending >= recomputeEvery || h.d.Load() == 0 {
		h.pending = 0
		h.recompute(c)
	}
}

// recompute publishes the window's percentile, or 0 below MinSamples.
func (h *hedgeEst) recompute(c *Client) {
	n := h.ncur + h.nprev
	if n < c.hedge.MinSamples {
		h.d.Store(0)
		return
	}
	want := int(c.hedge.Percentile*float64(n) + 0.999999) // the rank at the percentile, rounded up
	seen := 0
	for b := range latencyBuckets {
		seen += int(h.cur[b]) + int(h.prev[b])
		if seen >= want {
			h.d.Store(max(bucketTop(b), int64(c.hedge.Min), 1))
			return
		}
	}
	h.d.Store(0)
}

// firstSegment returns the first segment of a simple read with budget T
// and n retries: d when the zone's estimate is ready and earlier than x,
// else x (SPEC R21), and whether it is hedged.
func (z *zone) firstSegment(budget time.Duration, n int) (time.Duration, bool) {
	return hedgedFirst(z.hedge, segmentEnd(budget, n, 1), n)
}

// firstWait returns the first wait of a complex read with budget T and n
// retries (SPEC R21, R10): min(x, the zone's first-packet latency at the
// percentile) once that estimate is ready, else x, and whether it is
// hedged. Only this wait changes: after a packet, or after the re-send at
// its end, the waits are the seed's (retries+1)·x, so the read ends no
// later than with the seed's schedule.
func (z *zone) firstWait(budget time.Duration, n int) (time.Duration, bool) {
	return hedgedFirst(z.hedgeComplex, segmentUnit(budget, n), n)
}

// hedgedFirst returns d from h when it is ready and earlier than x, else
// x, and whether d was taken; a read with no retry is never hedged.
func hedgedFirst(h *hedgeEst, x time.Duration, n int) (time.Duration, bool) {
	if h == nil || n == 0 {
		return x, false
	}
	if d := time.Duration(h.d.Load()); d > 0 && d < x {
		return d, true
	}
	return x, false
}

// hedgedSegment returns the length of the segment that starts at base
// with the r-th re-send of a hedged simple read (SPEC R21): the rest of the
// budget, simpleEnd − base, shared by the segments left in the triangular
// shape r·x', (r+1)·x', …, n·x', so that the last ends exactly at T.
func hedgedSegment(simpleEnd, base int64, r, n int) int64 {
	left := simpleEnd - base
	if left <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(left), uint64(r))
	q, _ := bits.Div64(hi, lo, triangle(n)-triangle(r-1))
	return int64(q)
}
