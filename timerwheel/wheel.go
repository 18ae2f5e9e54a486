// Package timerwheel is a hierarchical timing wheel for very many short
// timers: it fires every in-flight read's next deadline in readretry's
// engine (SPEC R6, R10, R14), up to 500,000 pending per zone.
//
// # Model
//
// Like golang.org/x/time/rate, a [Wheel] never looks at the clock: the
// caller passes time in. [Wheel.Schedule] files a timer for a deadline
// and an id of the caller's choosing (a sequence number, a slot index)
// and returns a [Handle]; [Wheel.Advance] with the current time hands the
// id of every timer due at or before it to a callback, in deadline order.
// There is no goroutine per timer and none at all unless the caller wants
// the optional [Driver].
//
// # Times and offsets
//
// Every method that takes or returns a time comes in two spellings, one
// meaning per name:
//
//   - without a suffix ([Wheel.Schedule], [Wheel.Reset], [Wheel.Advance],
//     [Wheel.NextDeadline]) the time is a time.Time;
//   - with the suffix Offset ([Wheel.ScheduleOffset], [Wheel.ResetOffset],
//     [Wheel.AdvanceOffset], [Wheel.NextDeadlineOffset]) it is an offset:
//     a time.Duration since the wheel's Start, its tick 0.
//
// X(t) is XOffset(t.Sub(w.Start())), and NextDeadline is
// w.Start().Add(NextDeadlineOffset()). The offsets exist for callers that
// keep their own clock as nanoseconds since an epoch, as the engine does
// (it makes that epoch the wheel's Start and passes its times straight
// in, never building a time.Time per read). The suffix At is not used: in
// this module (as in golang.org/x/time/rate, where X is shorthand for
// XAt(time.Now())) it marks an explicit time.Time where a shorter name
// reads the clock, and the wheel never reads the clock.
//
// Time is counted in ticks (1 ms by default in the engine) since Start. A
// deadline is rounded up to a tick and a time passed to Advance is rounded
// down, so a timer never fires before its deadline, and fires at the
// latest in the first Advance whose time is one tick past it (SPEC R14:
// lateness at most one tick plus the caller's poll interval). A deadline
// already past fires in the next Advance.
//
// # Structure
//
// A wheel has levels of 64 slots; a slot of level L spans 64^L ticks (at
// 1 ms: 1 ms, 64 ms, 4.1 s, 4.4 min, 4.7 h, 12.4 days, ...). A timer sits on
// the lowest level whose 64 slots, counted on from the current tick's
// slot, reach its deadline, in the slot named by the deadline's 6 bits for
// that level; each level is a ring. When the current tick reaches a slot of
// a higher level, its timers cascade to lower levels, so every timer fires
// in exactly its tick. Because the level follows the distance to the
// deadline rather than aligned boundaries, a cascade never moves more than
// one slot's worth of timers: at 1 ms ticks a read deadline of 0.5 to 1.5 s
// sits on level 1 and moves once, with the 64 ms of timers due around it
// (BenchmarkScheduleFire reports the longest single Advance). Eleven levels
// reach 2^66 ticks, beyond any deadline, so no timer is ever parked or
// clamped; the unused upper levels cost a zero test each. A 64-bit bitmap
// per level records the non-empty slots: Advance jumps straight to the next
// non-empty slot, so an Advance over hours of idle time costs work
// proportional to the timers, not to the ticks.
//
// # Memory (SPEC R15)
//
// Timers live in chunks of arrays that hold no Go pointers, so the garbage
// collector never scans them, and Schedule, Reset, Cancel and Advance
// allocate nothing at steady state. A timer is 28 bytes: a 16-byte node
// (deadline, id) and 12 bytes of links (next and prev as uint32 indexes,
// and the state word: generation, on-the-wheel bit), the links in an array
// of their own so that walking a list chases pointers through a dense
// array while the loads of the nodes overlap. Lists are doubly linked, so
// Cancel unlinks at once in O(1), and the first timer of a list names the
// list in its prev link, so no timer needs a list field.
// BenchmarkScheduleCancel reports the heap per pending timer (B/timer),
// slab, block descriptors and free bitmap included.
//
// The slab grows by a chunk of 64 timers, then chunks of 4096, as the
// number pending grows, and shrinks again: a wheel that never held a timer
// costs about a kilobyte (BenchmarkIdle and TestAllocIdleWheel measure the
// heap of idle wheels), and when the top chunk and the one below it are
// both free (or no timer is pending), the top one goes back to the Go heap
// — no sooner than 4096 ticks after the slab last grew, so a load that
// comes in bursts keeps its chunks. A lane (see Concurrency) keeps the
// block of 64 timers it took last until its next refill, at most 64
// Schedules on its P later; then it moves to the lowest free block, and
// the slab above can go. Freed timers are reused lowest
// index first (a bitmap hierarchy, 1 bit a timer), which keeps the timers
// of one slot close together — with a LIFO free list the slab turned into
// a random walk after a few million timers and firing cost about ten times
// as much per timer — and keeps live timers at the bottom of the slab, so
// the top chunks empty out after a burst. A [Handle] packs the index with
// the timer's generation, which changes every time the timer ends: a handle
// to a fired or cancelled timer can never touch the timer that reuses its
// place (up to 2^31 reuses of one place in between), nor one of a chunk
// allocated again at the same indexes.
//
// # Concurrency
//
// All methods are safe for concurrent use. The intended use is many
// goroutines calling Schedule and Cancel while one poller calls Advance;
// Advance calls never overlap (see [Wheel.Advance]).
//
// A wheel is made of shards, each a complete wheel with its own mutex;
// Schedule picks the shard from a hash of the id and the Handle remembers
// it. One shard is the default. With staging, Schedule+Cancel from all Ps
// at once gained from a few shards in BenchmarkParallelScheduleCancel
// (BENCHMARKS.md, "timerwheel"), since each shard's lanes refill under its
// own lock; but each extra
// shard costs Advance a lock per batch to merge shards in deadline order,
// and a single poller firing timers pays that.
// Measure both on the target machine before raising Config.Shards.
//
// Where Schedule+Cancel's time went, measured with -cpuprofile (hardware
// counters are not available in the VM the figures come from): with the
// shard mutex taken by both calls, more than half of the time was the two
// lock round trips — four atomic read-modify-write instructions, each
// about as costly as the rest of the work of one call — then the free
// bitmap (about an eighth), placing the timer on its level (about a
// tenth) and converting the deadline (about a fourteenth). So the sender
// path was cut to one atomic instruction:
//
//   - Staging. Each shard has one lane per P (GOMAXPROCS at New).
//     Schedule pins its goroutine to its P, as sync.Pool does, takes a
//     timer of the block its lane owns from a plain bit mask, writes it,
//     and publishes it by setting one bit of the lane's staged word. Every lock holder first moves the staged
//     timers onto the wheel: Advance, before it looks for due timers, so a
//     staged timer fires exactly when it would have on the locked path;
//     NextDeadline, Len and Reset likewise. A lane takes the lock (only
//     trying it: a pinned goroutine must not block; if it fails, Schedule
//     takes the locked path) about once per 64 Schedules, to take back the
//     timers of its block that ended and move to the lowest free block.
//   - Cancel is lock-free for a staged timer: one CAS on the timer's state
//     word, racing the drain's CAS, so exactly one of them wins. A timer
//     already on the wheel is unlinked under the lock as before.
//
// A Schedule whose P has no lane (GOMAXPROCS was raised after New) or
// whose lane cannot refill without waiting for the lock takes the locked
// path: the same timer, filed under the shard lock.
//
// Advance never holds a lock while it calls fire: it takes up to 64 due
// ids of one tick into a buffer under the shard lock, frees their timers,
// unlocks, and calls fire for each. fire may therefore call Schedule, Reset
// and Cancel on the same wheel. A timer counts as fired once it is taken
// into the buffer: from then on Cancel and Reset on its handle report false
// even though fire has not yet been called for it.
package timerwheel

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"
)

// MaxShards is the largest Config.Shards (a Handle has 6 bits for it).
const MaxShards = 64

// MaxCapacity is the most timers one shard holds: 2^26 (a Handle has 26
// bits for the index), so a wheel holds at most MaxCapacity·Shards. At 28
// bytes a timer, one full shard is 1.75 GiB. The wheel has no smaller
// limit of its own: its users bound what they schedule (the engine its
// contexts per zone, SPEC R2; idem.Memory its entries).
const MaxCapacity = 1 << indexBits

// DefaultTick is the tick of the engine's wheels (SPEC R14: the lateness
// bound is one tick plus the poll interval).
const DefaultTick = time.Millisecond

const (
	indexBits  = 26
	indexMask  = 1<<indexBits - 1
	shardShift = indexBits
	shardMask  = MaxShards - 1
	genShift   = 32
	handleBit  = 1 << 63 // set in every Handle Schedule returns, so none is 0

	// batchSize is how many due ids Advance takes per lock; 64 amortises
	// the lock to well under a nanosecond per timer while keeping the
	// buffer (512 bytes) small.
	batchSize = 64
)

// Errors. Each is returned as is or wrapped (test with errors.Is); a call
// that returns one changes nothing.
var (
	// ErrFull is returned by Schedule when no shard has a free timer left
	// of its MaxCapacity. Each lane (one per P and shard) may hold up to
	// 64 free timers that only its own P schedules into, so ErrFull can
	// come up to 64 timers per lane before MaxCapacity·Shards are pending.
	ErrFull = errors.New("timerwheel: no free timer")
	// ErrDeadline is returned by Schedule for a deadline so far after
	// Start that the offset does not fit a time.Duration (about 292 years).
	ErrDeadline = errors.New("timerwheel: deadline out of range")
	// ErrInvalidConfig is wrapped by New for a bad Config.
	ErrInvalidConfig = errors.New("timerwheel: invalid config")
)

// Handle names one scheduled timer for Reset and Cancel. It packs the
// shard, the timer's index and its generation, so a handle kept after its
// timer fired or was cancelled is stale forever: Reset and Cancel on it
// report false and never touch a timer that reuses the place. The zero
// Handle is never returned by Schedule, so 0 can mean "no timer" in a
// caller's pointer-free struct.
type Handle uint64

func makeHandle(gen uint32, shard int, index uint32) Handle {
	return Handle(handleBit | uint64(gen)<<genShift | uint64(shard)<<shardShift | uint64(index))
}

func (h Handle) gen() uint32   { return uint32(h>>genShift) & genMask }
func (h Handle) shard() int    { return int(h>>shardShift) & shardMask }
func (h Handle) index() uint32 { return uint32(h) & indexMask }

// Config describes a wheel for [New].
type Config struct {
	// Tick is the resolution of the wheel (> 0). Deadlines are rounded up
	// to it and the time passed to Advance down, so it bounds lateness.
	// The engine uses DefaultTick (1 ms).
	Tick time.Duration
	// Start is tick 0: the wheel counts time from it, and the Offset
	// methods take and return offsets since it. Pass a time with a monotonic reading
	// (time.Now()) when deadlines and the times given to Advance come from
	// time.Now(), so that wall-clock steps do not matter.
	Start time.Time
	// Shards is the number of independently locked sub-wheels, a power of
	// two from 1 to MaxShards; 0 means 1. See the package comment for the
	// measurement behind the default.
	Shards int
}

// Wheel is a hierarchical timing wheel. Create one with [New]; the zero
// Wheel is not usable. Memory follows the timers pending, about 28 bytes
// a timer (see the package comment). All methods are safe for
// concurrent use.
type Wheel struct {
	tick      int64  // nanoseconds
	recip     uint64 // ⌊(2^64-1)/tick⌋, see divTick
	start     time.Time
	shardBits uint
	shards    []shard

	// Written by every Advance; kept off the line the fields above share,
	// which every Schedule reads.
	_         [64]byte
	advancing atomic.Bool
	lastTick  atomic.Int64      // the highest tick passed to Advance
	batch     [batchSize]uint64 // Advance's buffer, owned by the running Advance
}

// New returns a wheel for c. Errors wrap ErrInvalidConfig and name the
// field: a Tick that is not positive, a Shards that is not 0 or a power of
// two from 1 to MaxShards. It allocates only the wheel's headers (about a
// kilobyte per shard with its lanes); timers' memory comes with the
// timers.
func New(c Config) (*Wheel, error) {
	if c.Tick <= 0 {
		return nil, fmt.Errorf("%w: Tick %v must be positive", ErrInvalidConfig, c.Tick)
	}
	shards := c.Shards
	if shards == 0 {
		shards = 1
	}
	if shards < 0 || shards > MaxShards || shards&(shards-1) != 0 {
		return nil, fmt.Errorf("%w: Shards %d must be a power of two from 1 to %d", ErrInvalidConfig, c.Shards, MaxShards)
	}
	w := &Wheel{
		tick:   int64(c.Tick),
		recip:  math.MaxUint64 / uint64(c.Tick),
		start:  c.Start,
		shards: make([]shard, shards),
	}
	for shards>>w.shardBits > 1 {
		w.shardBits++
	}
	for i := range w.shards {
		w.shards[i].init(MaxCapacity, runtime.GOMAXPROCS(0))
	}
	return w, nil
}

// Tick returns the wheel's tick.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tick) }

// Start returns the wheel's tick 0.
func (w *Wheel) Start() time.Time { return w.start }

// divTick returns d / tick and d % tick for d ≥ 0 without a division
// instruction: the high half of d·⌊(2^64-1)/tick⌋ is the quotient or one
// less (the error is below d·(tick+1)/(tick·2^64) < 1 for d < 2^63), and
// the remainder tells which. The division was a measurable part of
// Schedule.
func (w *Wheel) divTick(d int64) (q, r int64) {
	hi, _ := bits.Mul64(uint64(d), w.recip)
	q = int64(hi)
	r = d - q*w.tick
	if r >= w.tick {
		q++
		r -= w.tick
	}
	return q, r
}

// ticksUp converts a deadline since Start to ticks, rounded up so that a
// timer never fires early; a deadline at or before Start is tick 0, which
// is always past.
func (w *Wheel) ticksUp(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q, r := w.divTick(int64(d))
	if r != 0 {
		q++
	}
	return q
}

// ticksDown converts a time since Start given to Advance to ticks, rounded
// down.
func (w *Wheel) ticksDown(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q, _ := w.divTick(int64(d))
	return q
}

// since returns deadline - Start, or false if the distance does not fit a
// time.Duration (time.Time.Sub saturated).
func (w *Wheel) since(deadline time.Time) (time.Duration, bool) {
	d := deadline.Sub(w.start)
	return d, d != math.MaxInt64
}

func (w *Wheel) shardOf(id uint64) int {
	// Fibonacci hashing spreads sequential and strided ids alike; with one
	// shard the shift is 64 and the result 0.
	return int((id * 0x9E3779B97F4A7C15) >> (64 - w.shardBits))
}

// ScheduleOffset files a timer that hands id to Advance's fire callback
// at the first Advance at or after d, an offset since Start (rounded up to
// a tick; a deadline already past fires in the next Advance). It returns
// the timer's Handle, never 0. Error: ErrFull when no shard has a free
// timer (see ErrFull). Called from fire during an Advance, a deadline at
// or before the tick being fired waits for the next Advance, so a timer
// that keeps rescheduling itself at "now" cannot keep one Advance running
// forever. It does not allocate once the slab has grown to the timers
// pending.
func (w *Wheel) ScheduleOffset(d time.Duration, id uint64) (Handle, error) {
	t := w.ticksUp(d)
	home := w.shardOf(id)
	if h, ok := w.shards[home].stage(home, t, id); ok {
		return h, nil
	}
	// A full shard spills into the next one with room, so that ErrFull
	// means the whole wheel is full, not just the id's shard.
	for k := range len(w.shards) {
		si := (home + k) & (len(w.shards) - 1)
		s := &w.shards[si]
		s.mu.Lock()
		if b, bk, ok := s.alloc(); ok {
			b.nodes[bk] = node{deadline: t, id: id}
			g := b.state(bk) >> 1
			s.count++
			s.insert(b.base + uint32(bk))
			s.setState(&b.links[bk], g<<1|stWheel)
			s.mu.Unlock()
			return makeHandle(g, si, b.base+uint32(bk)), nil
		}
		s.mu.Unlock()
	}
	return 0, ErrFull
}

// Schedule is ScheduleOffset for a deadline given as a time.Time. It also
// returns ErrDeadline for a deadline about 292 years or more after Start.
func (w *Wheel) Schedule(deadline time.Time, id uint64) (Handle, error) {
	d, ok := w.since(deadline)
	if !ok {
		return 0, ErrDeadline
	}
	return w.ScheduleOffset(d, id)
}

// Cancel stops the timer h so that its id is never handed to fire, and
// frees its place. It returns true if it stopped a pending timer, false if
// h is 0 or stale (the timer already fired or was cancelled). Concurrent
// with Advance exactly one of the two wins: if Cancel returns false for a
// timer that had been pending, fire is called (or has been called) for it.
// h must come from this wheel: a handle of another wheel may name one of
// this wheel's timers.
func (w *Wheel) Cancel(h Handle) bool {
	if h&handleBit == 0 || h.shard() >= len(w.shards) {
		return false
	}
	s := &w.shards[h.shard()]
	i := h.index()
	b := s.blockLF(i >> blockShift)
	if b == nil {
		return false
	}
	k := int(i & blockMask)
	st := &b.links[k].state
	g := h.gen()
	// A staged timer is cancelled without the lock.
	for {
		v := atomic.LoadUint32(st)
		if v>>1 != g {
			return false
		}
		if v&stWheel != 0 {
			break
		}
		// Idle at h's generation: staged, if the lane that owns the block
		// has published it (else h is forged, or a drain is moving it onto
		// the wheel; the lock settles both). Beat the drain to it: the
		// timer goes back to its lane at the lane's next refill.
		ow := b.owner.Load()
		if ow == 0 || s.lanes[ow-1].staged.Load()&(1<<k) == 0 {
			break
		}
		if atomic.CompareAndSwapUint32(st, v, nextGen(g)<<1) {
			return true
		}
	}
	s.mu.Lock()
	v := b.state(k)
	if ow := b.owner.Load(); v == g<<1 && ow > 0 {
		s.drainLane(&s.lanes[ow-1])
		v = b.state(k)
	}
	if v != g<<1|stWheel {
		s.mu.Unlock()
		return false
	}
	s.unlink(i)
	s.releaseBlock(b, k, g)
	s.mu.Unlock()
	return true
}

// ResetOffset moves the pending timer h to a new deadline d, an offset
// since Start, keeping its id and its handle; it is as if the timer were
// cancelled and scheduled again, without the risk of ErrFull. It returns
// false (and changes nothing) if h is stale as for Cancel.
func (w *Wheel) ResetOffset(h Handle, d time.Duration) bool {
	if h&handleBit == 0 || h.shard() >= len(w.shards) {
		return false
	}
	t := w.ticksUp(d)
	s := &w.shards[h.shard()]
	s.mu.Lock()
	b := s.blockAt(h.index() >> blockShift)
	if b == nil {
		s.mu.Unlock()
		return false
	}
	k := int(h.index() & blockMask)
	g := h.gen()
	v := b.state(k)
	if ow := b.owner.Load(); v == g<<1 && ow > 0 {
		// Staged: the drain moves it onto the wheel, unless a Cancel won.
		s.drainLane(&s.lanes[ow-1])
		v = b.state(k)
	}
	if v != g<<1|stWheel {
		s.mu.Unlock()
		return false
	}
	s.unlink(b.base + uint32(k))
	b.nodes[k].deadline = t
	s.insert(b.base + uint32(k))
	s.mu.Unlock()
	return true
}

// Reset is ResetOffset for a deadline given as a time.Time. It also
// returns false for a deadline out of range (see Schedule).
func (w *Wheel) Reset(h Handle, deadline time.Time) bool {
	d, ok := w.since(deadline)
	return ok && w.ResetOffset(h, d)
}

// AdvanceOffset fires every timer due at or before now, an offset since
// Start: it calls fire with each one's id, in deadline order (by tick; timers of the
// same tick in no particular order), and returns how many it fired. Timers
// scheduled with a deadline at or before the tick being fired while this
// Advance runs fire in the next one. The wheel's clock never goes back: a
// now before the latest Advance's counts as that one's, so it fires only
// past-due timers. A nil fire discards the due timers.
//
// fire is called without any lock held and may call Schedule, Reset and
// Cancel on this wheel (the engine re-sends a read and schedules its next
// deadline from it). Advance calls do not overlap: one made while another
// runs, from another goroutine or from inside fire, returns 0 at once
// without firing anything, and the running one fires what was due at its
// own now. If fire panics, the panic propagates, the ids left in the
// current batch (at most 63) are lost, and the wheel stays usable.
func (w *Wheel) AdvanceOffset(now time.Duration, fire func(id uint64)) int {
	if !w.advancing.CompareAndSwap(false, true) {
		return 0
	}
	defer w.advancing.Store(false)
	// The wheel's clock never goes back: a time before the latest Advance
	// fires what is due by that Advance's time (past-due timers only).
	prev := w.lastTick.Load()
	limit := max(w.ticksDown(now), prev)
	if limit != prev {
		w.lastTick.Store(limit)
	}
	if len(w.shards) == 1 {
		return w.advanceOne(&w.shards[0], limit, fire)
	}
	return w.advanceMerge(limit, prev, fire)
}

// Advance is AdvanceOffset for a time.Time: it fires every timer due at
// or before now.
func (w *Wheel) Advance(now time.Time, fire func(id uint64)) int {
	return w.AdvanceOffset(now.Sub(w.start), fire)
}

func (w *Wheel) advanceOne(s *shard, limit int64, fire func(id uint64)) int {
	total := 0
	for first := true; ; first = false {
		n := s.collect(limit, w.batch[:], first)
		if n == 0 {
			return total
		}
		total += n
		w.fireBatch(n, fire)
	}
}

// advanceMerge advances several shards in step: each round it takes one
// batch from the shard with the earliest next event, bounded by the next
// event of any other shard, so that deadline order holds across shards
// even when fire schedules new timers. It costs one lock per shard per
// round on top of the single-shard path.
func (w *Wheel) advanceMerge(limit, prev int64, fire func(id uint64)) int {
	total := 0
	for round := 0; ; round++ {
		best, first, second := -1, int64(noTick), int64(noTick)
		for i := range w.shards {
			e := w.shards[i].peek(round == 0, prev)
			if e < first {
				best, first, second = i, e, first
			} else if e < second {
				second = e
			}
		}
		if first > limit {
			// Nothing due in any shard. A timer scheduled concurrently
			// since its shard's peek, due by limit, fires in the next
			// Advance.
			return total
		}
		n := w.shards[best].collect(min(limit, second), w.batch[:], false)
		total += n
		w.fireBatch(n, fire)
	}
}

func (w *Wheel) fireBatch(n int, fire func(id uint64)) {
	if fire == nil {
		return
	}
	for _, id := range w.batch[:n] {
		fire(id)
	}
}

// Len returns the number of pending timers (scheduled, not yet fired or
// cancelled).
func (w *Wheel) Len() int {
	n := 0
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		s.drainLanes()
		n += s.count
		s.mu.Unlock()
	}
	return n
}

// NextDeadlineOffset returns when, as an offset since Start, the next
// Advance may have work to do, and false if no timer is pending. The time is never
// later than the earliest pending deadline (rounded up to a tick), so a
// driver that sleeps until it never fires a timer late. It can be earlier
// than that deadline: the start of a higher-level slot whose timers an
// Advance must first move to lower levels, after which NextDeadline is
// closer (at most one such step per level). A past-due timer gives the
// time of the last Advance, rounded down to a tick. A time beyond what a
// time.Duration holds is returned as math.MaxInt64.
func (w *Wheel) NextDeadlineOffset() (time.Duration, bool) {
	e := int64(noTick)
	for i := range w.shards {
		e = min(e, w.shards[i].earliest())
	}
	if e == noTick {
		return 0, false
	}
	// A shard's own clock may lag the last Advance (see shard.peek);
	// anything it holds before that is due now.
	e = max(e, w.lastTick.Load())
	if e > math.MaxInt64/w.tick {
		return math.MaxInt64, true
	}
	return time.Duration(e * w.tick), true
}

// NextDeadline is NextDeadlineOffset as a time.Time.
func (w *Wheel) NextDeadline() (time.Time, bool) {
	d, ok := w.NextDeadlineOffset()
	if !ok {
		return time.Time{}, false
	}
	return w.start.Add(d), true
}
