// Package budget implements a retry budget (SPEC B4): a client may send at
// most Ratio retries per request (default 10%, the Google SRE rule quoted in
// seed 003) over a sliding window, plus a small floor of retries per second so
// that a quiet client can still retry at all. Over budget, a retry is skipped
// and the caller returns the last error; first attempts are never refused.
//
// # The window
//
// The window is a ring of Slots counters (16 by default), each covering
// Window/Slots of time and holding the requests and the retries granted in
// it. A retry is granted at time t when
//
//	retries in the window + 1 ≤ Ratio × requests in the window + floor
//
// where the window is t's slot and the Slots−1 before it, and the floor is
// MinRetriesPerSecond × Window in seconds. A slot is zeroed when the clock
// enters it again, one window later, so traffic older than the window grants
// nothing, whatever came before: a burst followed by a silence leaves no
// credit behind. What this guarantees, checked after every grant by a
// model-based test against an exact sliding window:
//
//   - retries granted in (t−Window+slot, t] ≤ Ratio × requests in
//     (t−Window, t] + floor: the bound of SPEC B4, with at most one slot's
//     worth of retries as slack (those granted in the window's first slot);
//   - a request counts from the slot of the budget's latest clock reading
//     before it, or a later one up to its own: never in a later slot than
//     it happened, so it never stays in the window too long (see Cost).
//
// # Cost
//
// Request is on every call's path: one atomic add on one of Shards counters
// (8 by default, each on its own cache line, picked by the address of the
// caller's stack so that concurrent callers mostly write different lines),
// with no lock and no allocation. The sharding stays because it measures
// faster than one shared counter under b.RunParallel (bench/budget_test.go,
// BenchmarkBudgetRecord); Shards: 1 is the plain counter. Request reads the
// clock only when its shard's count reaches a power of two or a multiple of
// 256; the ring then advances and takes the shards' counts into the slot
// they were recorded in. A request recorded after a slot boundary and before
// the next clock reading counts in the slot before — at most a slot early
// for a client with a steady flow of requests — which leaves it in the
// window a little less long: it can only refuse a retry, never grant one
// more.
//
// TryRetry reads the clock (TryRetryAt takes it from the caller), finds its
// slot by comparing the time with the end of the ring's newest slot (a
// division only when the ring must advance), adds the current slot, the
// shards and the sums of the window's older slots — kept from one retry
// check to the next while the slot stays the same, since those slots no
// longer change — and claims the retry with a compare-and-swap on the
// current slot's count, so concurrent grants in one slot never exceed what
// the window allows. A change to an older slot (a grant given back late, or
// a grant or requests that raced with the ring's advance) makes the kept
// sums be read again, so every decision is the one the whole ring would
// give. Grants racing across a slot boundary may each see the window just
// before the other's grant: at most one retry per racing goroutine, at that
// instant only.
//
// What is left of TryRetry's cost is mostly what no exact check over a
// window of time can do without: one monotonic clock read (which slot it is
// in), and on a refusal one atomic add (Stats.Denied counts every refusal),
// on top of Request's own. bench/budget_test.go measures that floor beside
// TryRetry and failsafe-go's budget, which reads no clock: it bounds
// retries in flight, not over a window of time. On a machine whose clock
// read costs most of failsafe-go's check (a virtual machine's kvm-clock),
// the floor alone is above failsafe-go's figure (BENCHMARKS.md, "Retry
// budget"). The default clock is time.Since: runtime.nanotime through a
// linkname would save a little of its cost but ignore testing/synctest's
// fake clock, which time.Since follows.
//
// A budget at its defaults takes about 1 KiB (16 bytes a slot, 64 a shard);
// an idle one costs nothing at all: there is no background goroutine and no
// timer. Time is read through Config.Clock, so tests drive a fake clock and
// need no sleeping.
package budget

import (
	"errors"
	"fmt"
	"math"
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
	// DefaultSlots is the number of slots a window is divided into: the
	// window slides in steps of Window/16.
	DefaultSlots = 16
	// DefaultShards is the number of request counters (see Config.Shards).
	DefaultShards = 8
	// DefaultMinRetriesPerSecond is the floor for quiet periods, in retries
	// per second: 10 per second over a 10 s window is a reserve of 100
	// retries, as in Finagle's RetryBudget.
	DefaultMinRetriesPerSecond = 10
)

// Limits on a [Config].
const (
	// MaxRatio bounds Config.Ratio: a budget allowing more than 10 retries
	// per request is a configuration mistake, not a budget.
	MaxRatio = 10.0
	// MaxSlots bounds Config.Slots (16 bytes of memory each).
	MaxSlots = 256
	// MaxShards bounds Config.Shards (64 bytes of memory each).
	MaxShards = 256
	// MinSlot is the shortest slot: Window must be at least Slots × MinSlot.
	MinSlot = time.Millisecond
	// MaxWindow bounds Config.Window, which keeps every slot's counts far
	// below their 40-bit range.
	MaxWindow = time.Hour
)

// NoFloor, given as Config.MinRetriesPerSecond, turns the floor off: retries
// are then allowed only by Ratio.
const NoFloor = -1.0

// ErrInvalidConfig is wrapped by every error of [New].
var ErrInvalidConfig = errors.New("budget: invalid config")

// Config configures a [Budget]. The zero value gives the defaults.
type Config struct {
	// Ratio is the largest number of retries per request over the window,
	// in (0, MaxRatio]; 0 means DefaultRatio (0.1).
	Ratio float64
	// Window is the length of the sliding window, from Slots × MinSlot to
	// MaxWindow; 0 means DefaultWindow (10 s). It is rounded down to a
	// multiple of Slots nanoseconds.
	Window time.Duration
	// Slots is the number of slots the window is divided into: a power of
	// two from 2 to MaxSlots; 0 means DefaultSlots (16). More slots make the
	// window slide in finer steps (less slack, see the package doc) and
	// cost 16 bytes each, plus a little more work per TryRetry.
	Slots int
	// Shards is the number of counters concurrent Request calls spread
	// over, each on its own 64-byte cache line: a power of two from 1 to
	// MaxShards; 0 means DefaultShards (8). 1 is one shared counter: the
	// least memory, and as fast while one goroutine at a time records.
	// More shards make two cores less likely to write the same line, and
	// add a load each to TryRetry.
	Shards int
	// MinRetriesPerSecond is the floor, in retries per second, allowed on
	// top of Ratio so that a client with little traffic can still retry; 0
	// means DefaultMinRetriesPerSecond, NoFloor means none.
	MinRetriesPerSecond float64
	// Clock returns the current time; nil means time.Now. Tests pass a fake
	// clock, and so does a caller that passes its own time to TryRetryAt.
	// Only differences between readings are used (monotonic when the clock
	// is time.Now); a clock that goes back is tolerated: the window waits
	// for it to catch up.
	Clock func() time.Time
}

// Budget is a retry budget shared by all calls of a client (or of a zone).
// It is safe for concurrent use; create it with [New].
type Budget struct {
	// Read by every call, written never (cur: once per slot).
	ratio  float64
	floor  float64       // MinRetriesPerSecond × window seconds
	slot   time.Duration // window / slots
	mask   int64         // slots − 1
	now    func() time.Time
	origin time.Time
	ring   []slot  // len is a power of two
	shards []shard // len is a power of two
	pick   uintptr // len(shards) − 1

	// cur is the newest slot number (time since origin / slot) the ring has
	// been advanced to: every ring entry holds a slot of (cur−slots, cur]
	// or a newer one. The shards hold the requests recorded since the last
	// advance, which count in slot cur.
	cur atomic.Int64

	// The sums of the window's older slots (all but the newest), which
	// change only when the ring advances: computed once per slot instead
	// of on every TryRetry (see older). Read on every retry check,
	// written about once per slot.
	olderSeq atomic.Uint64 // seqlock over the three below: odd while one is written
	olderK   atomic.Int64  // the slot number the sums are for
	olderReq atomic.Uint64 // requests in slots olderK−slots+1 … olderK−1
	olderRet atomic.Uint64 // retries granted (less cancelled) in those slots
	olderMut atomic.Uint64 // the value of late when the sums were read from the ring
	// late counts changes to a slot after the ring has moved past it (a
	// grant or requests that raced with an advance, a cancelled grant of
	// an older slot): sums read before such a change are not used.
	late atomic.Uint64

	// Counters for Stats, written on the retry path and by advance, on
	// their own cache line so that Request's loads of cur stay cheap.
	_         [64]byte
	granted   atomic.Uint64 // retries granted
	cancelled atomic.Uint64 // grants given back by Reservation.Cancel
	retired   atomic.Uint64 // requests of slots that were zeroed
	reported  atomic.Uint64 // largest Stats.Requests returned: keeps it monotonic
}

// slot holds the counts of one slot of time. Each word packs the slot's
// number (its low 24 bits, as a tag) above a 40-bit count, so that a count
// and the slot it belongs to change together in one atomic operation:
// zeroing a slot for a new number is a compare-and-swap, and a retry is
// claimed with a compare-and-swap that fails if the slot was zeroed under it.
type slot struct {
	requests atomic.Uint64
	retries  atomic.Uint64 // granted, minus cancelled
}

// shard counts requests recorded since the last advance, on its own cache
// line: a goroutine adds to the shard its stack address picks, so
// concurrent callers mostly write different lines.
type shard struct {
	n      atomic.Uint64
	denied atomic.Uint64 // retries refused, counted here to keep refusals off shared lines
	_      [48]byte
}

const (
	countBits = 40
	countMask = 1<<countBits - 1
	tagBits   = 64 - countBits
)

// tagOf returns slot number k's tag with a zero count.
func tagOf(k int64) uint64 { return uint64(k) << countBits }

// sameSlot reports whether word v belongs to slot number k.
func sameSlot(v uint64, k int64) bool { return v>>countBits == uint64(k)&(1<<tagBits-1) }

// sampleEvery: past the first powers of two, Request reads the clock once
// per sampleEvery requests in a slot. A power of two (the test is a mask).
const sampleEvery = 256

// New returns a budget for c, or an error wrapping [ErrInvalidConfig] if a
// field is out of range (see [Config]).
func New(c Config) (*Budget, error) {
	ratio := c.Ratio
	switch {
	case ratio == 0:
		ratio = DefaultRatio
	case !(ratio > 0) || ratio > MaxRatio:
		return nil, fmt.Errorf("%w: Ratio %v is not in (0, %v]", ErrInvalidConfig, c.Ratio, MaxRatio)
	}
	slots := c.Slots
	switch {
	case slots == 0:
		slots = DefaultSlots
	case slots < 2 || slots > MaxSlots || slots&(slots-1) != 0:
		return nil, fmt.Errorf("%w: Slots %d is not a power of two in [2, %d]", ErrInvalidConfig, c.Slots, MaxSlots)
	}
	shards := c.Shards
	switch {
	case shards == 0:
		shards = DefaultShards
	case shards < 1 || shards > MaxShards || shards&(shards-1) != 0:
		return nil, fmt.Errorf("%w: Shards %d is not a power of two in [1, %d]", ErrInvalidConfig, c.Shards, MaxShards)
	}
	window := c.Window
	switch {
	case window == 0:
		window = DefaultWindow
	case window < time.Duration(slots)*MinSlot || window > MaxWindow:
		return nil, fmt.Errorf("%w: Window %v is not in [%v, %v] for %d slots", ErrInvalidConfig, c.Window, time.Duration(slots)*MinSlot, MaxWindow, slots)
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
	d := window / time.Duration(slots)
	b := &Budget{
		ratio:  ratio,
		floor:  perSecond * (d * time.Duration(slots)).Seconds(),
		slot:   d,
		mask:   int64(slots - 1),
		now:    c.Clock,
		origin: origin,
		ring:   make([]slot, slots),
		shards: make([]shard, shards),
		pick:   uintptr(shards - 1),
	}
	b.olderK.Store(math.MinInt64) // no sums kept yet
	return b, nil
}

// Request records one request: a first attempt, never a retry. It never
// fails, so a shared budget cannot refuse the first attempt of a call.
//
// It adds one to the caller's shard, which counts in the slot the budget
// last advanced to, and reads the clock (advancing the ring) only when the
// shard's count reaches a power of two or a multiple of 256. A request made
// after a slot boundary and before the next clock reading therefore counts
// in the slot before: it leaves the window a little early, which can only
// refuse a retry, never grant one more. It allocates nothing.
func (b *Budget) Request() {
	n := b.shards[stackHint()&b.pick].n.Add(1)
	if n&(n-1) == 0 || n&(sampleEvery-1) == 0 {
		b.advance(b.slotOf(b.elapsed()))
	}
}

// TryRetry reports whether one more retry fits in the budget, and if so
// counts it. A retry that is granted stays counted for a window whatever its
// outcome, because it reached the downstream; a caller that may end up not
// sending it uses [Budget.Reserve] instead. It reads the clock once and
// allocates nothing.
func (b *Budget) TryRetry() bool {
	_, ok := b.reserveAt(readClock)
	return ok
}

// TryRetryAt is TryRetry at time now, for a caller that already holds the
// current time (a poll loop's cached clock): it saves the clock read. now
// must come from the budget's clock (Config.Clock, or time.Now by default);
// a time behind the budget's latest reading counts as that reading.
func (b *Budget) TryRetryAt(now time.Time) bool {
	_, ok := b.reserveAt(max(now.Sub(b.origin), 0))
	return ok
}

// Reserve is TryRetry for a caller that may not send the retry after all
// (its context ends during the backoff): if ok, the retry is counted and r
// can give it back with [Reservation.Cancel].
func (b *Budget) Reserve() (r Reservation, ok bool) {
	return b.reserveAt(readClock)
}

// ReserveAt is Reserve at time now, with now as for [Budget.TryRetryAt].
func (b *Budget) ReserveAt(now time.Time) (r Reservation, ok bool) {
	return b.reserveAt(max(now.Sub(b.origin), 0))
}

// Reservation is a retry granted by [Budget.Reserve]: the budget and the
// slot it counts in. The zero value is a reservation of nothing.
type Reservation struct {
	b *Budget
	k int64 // slot number
}

// Cancel gives the retry back: it no longer counts against the window. Call
// it at most once, and only for a retry that was not sent. It reads the
// clock: a retry granted in a slot that has left the window by then has
// nothing to give back.
func (r Reservation) Cancel() {
	if r.b == nil || r.b.advance(r.b.slotOf(r.b.elapsed()))-r.b.mask > r.k {
		return
	}
	w := &r.b.ring[r.k&r.b.mask].retries
	for {
		v := w.Load()
		if !sameSlot(v, r.k) || v&countMask == 0 {
			return
		}
		if w.CompareAndSwap(v, v-1) {
			r.b.cancelled.Add(1)
			if r.b.cur.Load() != r.k {
				// An older slot: sums read before this no longer hold.
				r.b.late.Add(1)
			}
			return
		}
	}
}

// maxClaims bounds the compare-and-swap attempts of one reserve: past it
// (only under extreme contention) the retry is refused, which is safe.
const maxClaims = 1000

// readClock, passed to reserveAt as the time, makes it read the clock.
const readClock = time.Duration(-1)

// reserveAt grants a retry at time d since origin (or the budget's latest
// reading, if later) if the window allows it. While d is in the ring's
// newest slot or behind it, that slot is the one: no division to find it.
func (b *Budget) reserveAt(d time.Duration) (Reservation, bool) {
	if d == readClock {
		// The clock is read here rather than by the caller: one call less.
		if b.now == nil {
			d = max(time.Since(b.origin), 0)
		} else {
			d = b.clockElapsed()
		}
	}
	k := b.cur.Load()
	if d >= time.Duration(k+1)*b.slot {
		k = b.advance(b.slotOf(d))
	}
	for try := 0; try < maxClaims; try++ {
		s := &b.ring[k&b.mask]
		v := s.retries.Load()
		if !sameSlot(v, k) {
			// The ring moved past k under us: start again from its slot.
			k = b.cur.Load()
			continue
		}
		// The sums of the older slots that older keeps, read here (a call
		// costs as much as these loads); older reads the ring if they are
		// not for k or a late change happened since they were kept.
		seq := b.olderSeq.Load()
		kk, requests, older, mut := b.olderK.Load(), b.olderReq.Load(), b.olderRet.Load(), b.olderMut.Load()
		if seq&1 != 0 || kk != k || mut != b.late.Load() || b.olderSeq.Load() != seq {
			requests, older = b.older(k)
		}
		if r := s.requests.Load(); sameSlot(r, k) {
			requests += r & countMask
		}
		requests += b.pending()
		// The current slot's retries are taken from v, the word the claim
		// swaps: a grant by another goroutine since makes the swap fail.
		if float64(int64(older+v&countMask+1)) > b.ratio*float64(int64(requests))+b.floor {
			b.shards[stackHint()&b.pick].denied.Add(1)
			return Reservation{}, false
		}
		if s.retries.CompareAndSwap(v, v+1) {
			b.granted.Add(1)
			if b.cur.Load() != k {
				// The ring moved past k before the claim: sums of
				// older slots read before it miss this grant.
				b.late.Add(1)
			}
			return Reservation{b: b, k: k}, true
		}
		k = max(k, b.cur.Load())
	}
	b.shards[stackHint()&b.pick].denied.Add(1)
	return Reservation{}, false
}

// advance moves the ring forward to slot number k and returns the budget's
// slot number: k, or a later one another goroutine advanced to. It moves the
// shards' requests into slot cur (where they were recorded: the caller read
// the clock before it swapped them out, so a request still in a shard was
// recorded in slot cur or later), zeroes the slots that enter the window,
// then moves cur. Any goroutine may advance, several at once: each takes
// the shard counts it swaps out, and each slot is zeroed by a
// compare-and-swap that succeeds once per slot number.
func (b *Budget) advance(k int64) int64 {
	for {
		c := b.cur.Load()
		if k <= c {
			return c
		}
		var n uint64
		for i := range b.shards {
			n += b.shards[i].n.Swap(0)
		}
		if n > 0 {
			b.addRequests(c, n)
		}
		for j := max(c+1, k-b.mask); j <= k; j++ {
			s := &b.ring[j&b.mask]
			if n, ok := zero(&s.requests, c, j); ok {
				b.retired.Add(n)
			}
			zero(&s.retries, c, j)
		}
		if b.cur.CompareAndSwap(c, k) {
			return k
		}
	}
}

// addRequests adds n requests to slot number c. If the ring has moved a
// window past c meanwhile, they are older than the window: they go straight
// to the retired total.
func (b *Budget) addRequests(c int64, n uint64) {
	w := &b.ring[c&b.mask].requests
	for {
		v := w.Load()
		if !sameSlot(v, c) {
			b.retired.Add(n)
			return
		}
		if w.CompareAndSwap(v, v+n) {
			if b.cur.Load() != c {
				// Another goroutine advanced past c meanwhile: sums of
				// older slots read before this miss these requests.
				b.late.Add(1)
			}
			return
		}
	}
}

// older returns the requests and the retries of the window that ends with
// slot number k, less slot k itself, as window does. Those slots change
// only when the ring advances (or, rarely, by a change that raced with an
// advance, counted in late), so their sums are kept from the first call in
// slot k to the next: a retry check (reserveAt) reads the kept words
// inline, instead of the whole ring, and calls older only when they cannot
// be used. They are used only if they are for k and no late change
// happened since they were read from the ring, which keeps every decision
// what window would give; otherwise older reads them again (and keeps
// them, unless another goroutine is keeping its own at the same moment).
func (b *Budget) older(k int64) (requests, retries uint64) {
	seq := b.olderSeq.Load()
	mut := b.late.Load() // before the ring: a late change after it shows
	for j := k - b.mask; j < k; j++ {
		s := &b.ring[j&b.mask]
		if v := s.requests.Load(); sameSlot(v, j) {
			requests += v & countMask
		}
		if v := s.retries.Load(); sameSlot(v, j) {
			retries += v & countMask
		}
	}
	if seq&1 == 0 && b.olderSeq.CompareAndSwap(seq, seq+1) {
		b.olderK.Store(k)
		b.olderReq.Store(requests)
		b.olderRet.Store(retries)
		b.olderMut.Store(mut)
		b.olderSeq.Store(seq + 2)
	}
	return requests, retries
}

// zero sets w to slot number j with a zero count, unless it already holds j
// or a later slot, and returns the count it replaced. c is the ring's slot
// number when the caller started: every word holds a slot after c−slots, so
// the 24-bit tag is read relative to c.
func zero(w *atomic.Uint64, c, j int64) (uint64, bool) {
	for {
		v := w.Load()
		held := c + int64(int32(uint32(v>>countBits)-uint32(c))<<8>>8)
		if held >= j {
			return 0, false
		}
		if w.CompareAndSwap(v, tagOf(j)) {
			return v & countMask, true
		}
	}
}

// window sums the requests in the window that ends with slot number k, the
// budget's, and the retries in its slots before k. A ring entry holding
// another slot (one zeroed for a later number by a goroutine ahead of this
// one) counts nothing. The shards are read after the ring: requests moved
// from a shard to the ring in between are missed, never counted twice.
func (b *Budget) window(k int64) (requests, older uint64) {
	for j := k - b.mask; j <= k; j++ {
		s := &b.ring[j&b.mask]
		if v := s.requests.Load(); sameSlot(v, j) {
			requests += v & countMask
		}
		if v := s.retries.Load(); j < k && sameSlot(v, j) {
			older += v & countMask
		}
	}
	return requests + b.pending(), older
}

// pending sums the shards: the requests recorded since the last advance.
func (b *Budget) pending() uint64 {
	var n uint64
	for i := range b.shards {
		n += b.shards[i].n.Load()
	}
	return n
}

// stackHint returns a number that is stable for the calling goroutine (at a
// given call depth) and differs between goroutines: a hash of an address on
// its stack. Stacks are at least 2 KiB apart, so the low 11 bits are dropped
// before mixing. Any value is correct; it only spreads the writes.
func stackHint() uintptr {
	var x byte
	h := uint64(uintptr(unsafe.Pointer(&x)) >> 11)
	return uintptr((h * 0x9E3779B97F4A7C15) >> 56) // 8 bits: MaxShards
}

// allowance is how many retries a window with this many requests allows:
// the ratio of them plus the floor (SPEC B4).
func (b *Budget) allowance(requests uint64) float64 {
	return b.ratio*float64(requests) + b.floor
}

// elapsed returns the clock reading as time since origin (0 if the clock
// went back before origin).
func (b *Budget) elapsed() time.Duration {
	if b.now == nil {
		// time.Since reads only the monotonic clock: half the cost of
		// time.Now, which reads the wall clock too.
		return max(time.Since(b.origin), 0)
	}
	return b.clockElapsed()
}

// clockElapsed is elapsed with the injected clock (Config.Clock), kept out
// of line so that the default clock's path stays short.
func (b *Budget) clockElapsed() time.Duration { return max(b.now().Sub(b.origin), 0) }

func (b *Budget) slotOf(d time.Duration) int64 { return int64(d / b.slot) }

// Stats is a snapshot of a budget's counts, for metrics (a Prometheus
// collector exports the totals as counters and the window as gauges) and
// tests. All fields are counts.
type Stats struct {
	// Requests is the number of requests recorded since the budget was
	// created. It never decreases between snapshots; requests recorded
	// while the snapshot is taken may show only in the next one.
	Requests uint64
	// Retries is the number of retries granted since the budget was
	// created, cancelled ones included.
	Retries uint64
	// Cancelled is the number of granted retries given back with
	// Reservation.Cancel since the budget was created.
	Cancelled uint64
	// Denied is the number of retries refused since the budget was created.
	Denied uint64
	// WindowRequests is the number of requests in the current window.
	WindowRequests uint64
	// WindowRetries is the number of retries granted in the current window
	// and not cancelled.
	WindowRetries uint64
	// Allowance is Ratio × WindowRequests + the floor: the most retries the
	// current window allows (fractional; a retry needs a whole one).
	Allowance float64
}

// Stats returns a snapshot of the budget. It takes no lock: it reads the
// clock, advances the ring like TryRetry, and reads the counters one by one,
// so it is consistent per field, not across fields. It grants nothing.
func (b *Budget) Stats() Stats {
	k := b.advance(b.slotOf(b.elapsed()))
	requests, retries := b.window(k)
	if v := b.ring[k&b.mask].retries.Load(); sameSlot(v, k) {
		retries += v & countMask
	}
	// retired first, then the ring, then the shards: counts moved between
	// them meanwhile are missed (counted in the next snapshot), never
	// counted twice.
	total := b.retired.Load()
	for i := range b.ring {
		total += b.ring[i].requests.Load() & countMask
	}
	total += b.pending()
	var denied uint64
	for i := range b.shards {
		denied += b.shards[i].denied.Load()
	}
	for {
		last := b.reported.Load()
		if total <= last {
			total = last
			break
		}
		if b.reported.CompareAndSwap(last, total) {
			break
		}
	}
	return Stats{
		Requests:       total,
		Retries:        b.granted.Load(),
		Cancelled:      b.cancelled.Load(),
		Denied:         denied,
		WindowRequests: requests,
		WindowRetries:  retries,
		Allowance:      b.allowance(requests),
	}
}
