// Package budget implements a retry budget (SPEC B4): a client may send at
// most Ratio retries per request (default 10%, the Google SRE rule quoted in
// seed 003) over a sliding window, plus a small floor of retries per second so
// that a quiet client can still retry at all. Over budget, a retry is skipped
// and the caller returns the last error; first attempts are never refused.
//
// # Design
//
// The budget sits on every request's path, so recording a request is one
// atomic add on a cache-line-padded shard and almost nothing else: no lock,
// no allocation, and a clock read for only one request in 256 per shard. The
// shard is chosen from the address of the caller's stack, which is stable for
// a goroutine and differs between goroutines, so concurrent callers mostly
// touch different cache lines (the effect of a per-P counter, without
// linkname).
//
// Request counts are monotonic totals. The sliding window is built from
// marks — (time, requests so far, retries so far) — taken at most once per
// slot (a sixteenth of the window) by the first caller to notice the new
// slot: every retry check reads the clock, and so does one request in 256
// per shard. The window's base is the newest mark at least one window old.
// Requests in the window are then "total now − total at the base"; if the
// base is older than a window (the client was quiet, so no marks were taken)
// the count is scaled to one window assuming an even rate. Retries are not
// scaled: a slot in which retries are checked always gets a mark, so a busy
// client's retries leave the window within a slot of the right time; after
// a quiet spell they leave it late (when a mark taken after them is a window
// old), never early. Both errors err on the side of fewer retries.
//
// A retry is allowed when retries in the window + 1 ≤ Ratio × requests in the
// window + MinRetriesPerSecond × window seconds. Reading every shard on every
// retry check would bounce their cache lines between cores when a failing
// downstream makes every call ask, so the check is split: once per tick (a
// thousandth of the window, at least 1 ms) one caller recomputes the number
// of retries still allowed, and the checks in between spend it with a
// compare-and-swap on one mostly-read cache line. The allowance therefore
// lags new requests by at most a tick, and retries granted while it is
// recomputed may overshoot it by the number of goroutines racing. A
// [Budget.Release] returns a retry that was granted but never sent.
//
// Time is read through Config.Clock, so tests drive a fake clock and need no
// sleeping (golang.org/x/time/rate passes time in for the same reason). There
// is no background goroutine.
package budget

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Defaults used when a [Config] field is zero.
const (
	// DefaultRatio is the share of retries allowed per request (10%).
	DefaultRatio = 0.1
	// DefaultWindow is the length of the sliding window.
	DefaultWindow = 10 * time.Second
	// DefaultMinRetriesPerSecond is the floor for quiet periods, in retries
	// per second: 10 per second over a 10 s window is a reserve of 100
	// retries, as in Finagle's RetryBudget.
	DefaultMinRetriesPerSecond = 10
)

// NoFloor, given as Config.MinRetriesPerSecond, turns the floor off: retries
// are then allowed only by Ratio.
const NoFloor = -1.0

// MaxRatio bounds Config.Ratio: a budget allowing more than 10 retries per
// request is a configuration mistake, not a budget.
const MaxRatio = 10.0

// slots is the number of marks per window: the window slides in steps of
// Window/slots. ringSize keeps two windows of marks.
const (
	slots    = 16
	ringSize = 2 * slots
)

// maxShards bounds the request shards (8 per P, as a power of two): more
// shards make two goroutines less likely to share one (their shard is a
// hash of their stack address), and cost only a cache line each plus a
// longer sum once per tick.
const maxShards = 256

// markEvery: one request in markEvery per shard reads the clock (see
// Request). A power of two, so the test is a mask.
const markEvery = 256

// ErrInvalidConfig is wrapped by every error of [New].
var ErrInvalidConfig = errors.New("budget: invalid config")

// Config configures a [Budget]. The zero value gives the defaults.
type Config struct {
	// Ratio is the largest number of retries per request over the window,
	// in (0, MaxRatio]; 0 means DefaultRatio (0.1).
	Ratio float64
	// Window is the length of the sliding window, at least 16 ms; 0 means
	// DefaultWindow (10 s).
	Window time.Duration
	// MinRetriesPerSecond is the floor, in retries per second, that is
	// allowed on top of Ratio so that a client with little traffic can still
	// retry; 0 means DefaultMinRetriesPerSecond, NoFloor means none.
	MinRetriesPerSecond float64
	// Clock returns the current time; nil means time.Now. Tests pass a fake
	// clock. Only differences between readings are used (monotonic when the
	// clock is time.Now); a clock that goes back is tolerated, the window
	// just does not slide until it catches up.
	Clock func() time.Time
}

// Budget is a retry budget shared by all calls of a client. It is safe for
// concurrent use; create it with [New].
type Budget struct {
	ratio  float64
	floor  float64          // MinRetriesPerSecond × window seconds
	window time.Duration    // sliding window length
	slot   time.Duration    // window / slots
	now    func() time.Time // nil: time.Since(origin), the monotonic clock
	origin time.Time

	shards []shard // counters, len is a power of two
	mask   uintptr

	tick time.Duration // how often the tokens are recomputed

	// tokens is the number of retries the window still allows, recomputed
	// from the counters at most once per tick (at refillAt, time since
	// origin) and spent by TryRetry in between. It and refillAt sit on
	// their own cache line: TryRetry reads them on every call and they are
	// written only when a retry is granted or once per tick.
	_        [64]byte
	tokens   atomic.Int64
	refillAt atomic.Int64
	_        [48]byte

	epoch atomic.Int64 // the newest slot a mark was taken for
	base  atomic.Pointer[mark]
	ring  [ringSize]atomic.Pointer[mark]
}

// shard holds one share of the counters on its own cache lines (128 bytes,
// so that the adjacent-line prefetcher does not pair two shards either).
// Totals are sums over shards; a goroutine writes only to its own shard.
type shard struct {
	requests atomic.Int64 // first attempts
	retries  atomic.Int64 // retries granted minus released
	denied   atomic.Int64 // retries refused
	_        [104]byte
}

// mark is an immutable snapshot of the totals, taken once per slot.
type mark struct {
	at       time.Duration // since origin
	requests int64
	retries  int64
}

// New returns a budget for c, or an error wrapping [ErrInvalidConfig] if a
// field is out of range (negative or NaN ratio, ratio above MaxRatio, window
// below 16 ms, negative floor other than NoFloor).
func New(c Config) (*Budget, error) {
	ratio := c.Ratio
	switch {
	case ratio == 0:
		ratio = DefaultRatio
	case !(ratio > 0) || ratio > MaxRatio:
		return nil, fmt.Errorf("%w: Ratio %v is not in (0, %v]", ErrInvalidConfig, c.Ratio, MaxRatio)
	}
	window := c.Window
	switch {
	case window == 0:
		window = DefaultWindow
	case window < slots*time.Millisecond:
		return nil, fmt.Errorf("%w: Window %v is below %v", ErrInvalidConfig, c.Window, slots*time.Millisecond)
	}
	perSecond := c.MinRetriesPerSecond
	switch {
	case perSecond == 0:
		perSecond = DefaultMinRetriesPerSecond
	case perSecond == NoFloor:
		perSecond = 0
	case !(perSecond > 0) || math.IsInf(perSecond, 1):
		return nil, fmt.Errorf("%w: MinRetriesPerSecond %v is neither positive and finite nor NoFloor", ErrInvalidConfig, c.MinRetriesPerSecond)
	}
	origin := time.Now()
	if c.Clock != nil {
		origin = c.Clock()
	}
	n := 1
	for n < 8*runtime.GOMAXPROCS(0) && n < maxShards {
		n <<= 1
	}
	b := &Budget{
		ratio:  ratio,
		floor:  perSecond * window.Seconds(),
		window: window,
		slot:   window / slots,
		tick:   min(max(window/1000, time.Millisecond), window/slots),
		now:    c.Clock,
		origin: origin,
		shards: make([]shard, n),
		mask:   uintptr(n - 1),
	}
	first := &mark{}
	b.base.Store(first)
	b.ring[0].Store(first)
	return b, nil
}

// Request records one request: a first attempt, never a retry. It never
// fails, so a shared budget cannot refuse the first attempt of a call. It is
// one atomic add on the caller's shard; one request in markEvery per shard
// also reads the clock so that the window has marks in busy periods without
// retries. It allocates nothing (a mark, once per slot, aside).
func (b *Budget) Request() {
	if b.shards[stackHint()&b.mask].requests.Add(1)%markEvery == 0 {
		b.observe(b.elapsed())
	}
}

// TryRetry reports whether one more retry fits in the budget, and if so
// counts it. A caller that gets true and then does not send the retry (its
// context ended during the backoff, say) must call [Budget.Release] once.
// A retry that is sent stays counted whatever its outcome, because it reached
// the downstream.
//
// It reads the clock, and once per tick (a thousandth of the window, at
// least 1 ms) recomputes how many retries the window allows from the
// counters; in between it spends that allowance with one compare-and-swap,
// and a refusal writes only to the caller's own shard. Requests recorded
// since the last recomputation count from the next one: the allowance lags
// the traffic by at most a tick.
func (b *Budget) TryRetry() bool {
	return b.tryRetry(b.elapsed())
}

// TryRetryAt is TryRetry at time now, for callers that already hold the
// current time (a poll loop's cached clock): it saves the clock read, which
// is most of TryRetry's cost. now must come from the budget's clock
// (Config.Clock, or time.Now by default) and should not run far ahead of it.
func (b *Budget) TryRetryAt(now time.Time) bool {
	return b.tryRetry(max(now.Sub(b.origin), 0))
}

func (b *Budget) tryRetry(at time.Duration) bool {
	if int64(at) >= b.refillAt.Load() {
		b.refill(at)
	}
	for t := b.tokens.Load(); t > 0; t = b.tokens.Load() {
		if b.tokens.CompareAndSwap(t, t-1) {
			b.shards[stackHint()&b.mask].retries.Add(1)
			return true
		}
	}
	b.shards[stackHint()&b.mask].denied.Add(1)
	return false
}

// refill recomputes the tokens for time at; one caller per tick does it.
// Retries granted between reading the counters and storing the tokens are
// not subtracted, so racing grants can overshoot the allowance by at most
// their number.
func (b *Budget) refill(at time.Duration) {
	due := b.refillAt.Load()
	if int64(at) < due || !b.refillAt.CompareAndSwap(due, int64(at+b.tick)) {
		return
	}
	requests, retries := b.inWindow(at, b.observe(at))
	allowed := math.Floor(b.allowance(requests) - float64(retries))
	b.tokens.Store(int64(max(allowed, 0)))
}

// Release returns one retry granted by [Budget.TryRetry] that was not sent.
// Calling it more often than TryRetry granted retries undercounts retries.
func (b *Budget) Release() {
	b.shards[stackHint()&b.mask].retries.Add(-1)
	b.tokens.Add(1)
}

// Stats is a snapshot of a budget, for metrics and tests.
type Stats struct {
	// Requests is the estimated number of requests in the window.
	Requests float64
	// Retries is the number of retries granted in the window (not released).
	Retries int64
	// Allowance is Ratio × Requests + floor: the retries the window allows.
	Allowance float64
	// Denied counts every retry refused since the budget was created.
	Denied int64
}

// Stats returns the budget's current window. It reads the clock and may take
// a mark, like TryRetry, but grants nothing.
func (b *Budget) Stats() Stats {
	at := b.elapsed()
	requests, retries := b.inWindow(at, b.observe(at))
	return Stats{
		Requests:  requests,
		Retries:   retries,
		Allowance: b.allowance(requests),
		Denied:    b.denied(),
	}
}

// elapsed returns the clock reading as time since origin (0 if the clock
// went back before origin). Readings from different goroutines may be out
// of order by a little; observe and window tolerate that.
func (b *Budget) elapsed() time.Duration {
	if b.now == nil {
		// time.Since reads only the monotonic clock: half the cost of
		// time.Now, which reads the wall clock too.
		return max(time.Since(b.origin), 0)
	}
	return max(b.now().Sub(b.origin), 0)
}

// observe returns the window base for time at, taking a mark first if at is
// in a slot no mark was taken for yet. One caller per slot wins the mark; the
// others keep using the current base, which is at most one slot stale.
func (b *Budget) observe(at time.Duration) *mark {
	e := int64(at / b.slot)
	last := b.epoch.Load()
	if e <= last || !b.epoch.CompareAndSwap(last, e) {
		return b.base.Load()
	}
	requests, retries := b.totals()
	m := &mark{at: at, requests: requests, retries: retries}
	b.ring[e%ringSize].Store(m)
	// The base is the newest mark at least one window old; the previous base
	// is a candidate too, so a mark evicted from the ring is not missed. With
	// none old enough (a young budget), the oldest mark is the best known.
	prev := b.base.Load()
	best, oldest := (*mark)(nil), prev
	if prev.at <= at-b.window {
		best = prev
	}
	for i := range b.ring {
		c := b.ring[i].Load()
		if c == nil {
			continue
		}
		if c.at <= at-b.window && (best == nil || c.at > best.at) {
			best = c
		}
		if c.at < oldest.at {
			oldest = c
		}
	}
	if best == nil {
		best = oldest
	}
	b.base.Store(best)
	return best
}

// inWindow returns the requests (estimated) and retries in the window ending at
// at, given its base mark.
func (b *Budget) inWindow(at time.Duration, base *mark) (requests float64, retries int64) {
	total, granted := b.totals()
	requests = float64(max(total-base.requests, 0))
	if span := at - base.at; span > b.window {
		// No mark in the window's first slot: the base is older, so assume
		// the requests since it came at an even rate.
		requests *= float64(b.window) / float64(span)
	}
	return requests, max(granted-base.retries, 0)
}

// totals sums the request and retry counters over the shards. The sum is
// not a snapshot (shards are read one by one), which is fine for a budget.
func (b *Budget) totals() (requests, retries int64) {
	for i := range b.shards {
		requests += b.shards[i].requests.Load()
		retries += b.shards[i].retries.Load()
	}
	return requests, retries
}

func (b *Budget) denied() int64 {
	var n int64
	for i := range b.shards {
		n += b.shards[i].denied.Load()
	}
	return n
}

// stackHint returns a number that is stable for the calling goroutine and
// differs between goroutines: a hash of an address on its stack. Stacks are
// at least 2 KiB apart, so the low 11 bits are dropped before mixing.
func stackHint() uintptr {
	var x byte
	h := uint64(uintptr(unsafe.Pointer(&x)) >> 11)
	return uintptr((h * 0x9E3779B97F4A7C15) >> 56) // 8 bits: maxShards
}

// allowance is how many retries the window allows for its requests: the
// ratio of them plus the floor (SPEC B4).
func (b *Budget) allowance(requests float64) float64 { return b.ratio*requests + b.floor }
