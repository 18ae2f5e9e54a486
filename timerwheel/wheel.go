// Package timerwheel is a hierarchical timing wheel for very many short
// timers: it fires every in-flight read's next deadline in readretry's
// engine (SPEC R6, R10, R14), up to 500,000 pending per zone.
//
// # Model
//
// Like golang.org/x/time/rate, a [Wheel] never looks at the clock: the
// caller passes time in. [Wheel.Schedule] files a timer for a deadline and
// an id of the caller's choosing (a sequence number, a slot index) and
// returns a [Handle]; [Wheel.Advance] with the current time hands the id of
// every timer due at or before it to a callback, in deadline order. There
// is no goroutine per timer and none at all unless the caller wants the
// optional [Driver].
//
// Time is counted in ticks (1 ms by default in the engine) since the Start
// of the wheel. A deadline is rounded up to a tick and a time passed to
// Advance is rounded down, so a timer never fires before its deadline, and
// fires at the latest in the first Advance whose time is one tick past it
// (SPEC R14: lateness at most one tick plus the caller's poll interval).
// A deadline already past fires in the next Advance.
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
// Timers live in a slab that holds no Go pointers, so the garbage
// collector never scans it, and Schedule, Reset, Cancel and Advance
// allocate nothing. A timer is 32 bytes: a 24-byte node (deadline, id,
// generation, list) and its 8-byte links (next and prev as uint32
// indexes), which are kept in an array of their own so that walking a
// list chases pointers through a dense 4 MB array (at 500,000 timers)
// while the loads of the nodes overlap; that halved the cost per fired
// timer when deadlines are scattered. Lists are doubly linked, so Cancel
// unlinks at once in O(1). The slab is allocated in chunks of 4096 timers
// as the number pending grows, never beyond the capacity; at capacity
// Schedule returns [ErrFull]. Freed timers are reused lowest index first
// (a bitmap hierarchy, 1 bit a timer), which keeps the timers of one slot
// close together: with a LIFO free list the slab turned into a random walk
// after a few million timers and firing cost 250-300 ns a timer instead of
// about 25. A [Handle] packs the index with the timer's generation, which
// changes every time the timer is freed: a handle to a fired or cancelled
// timer can never touch the timer that reuses its place.
//
// # Concurrency
//
// All methods are safe for concurrent use. The intended use is many
// goroutines calling Schedule, Reset and Cancel while one poller calls
// Advance; Advance calls never overlap (see [Wheel.Advance]).
//
// A wheel is made of shards, each a complete wheel with its own mutex;
// Schedule picks the shard from a hash of the id and the Handle remembers
// it. One shard is the default, chosen by measurement
// (BenchmarkParallelScheduleCancel, 500,000 pending, 2 goroutines on the
// 2-core machine behind the README's numbers). Schedule+Cancel costs about
// 46 ns alone, half of it the two uncontended lock round trips. In
// b.RunParallel one shard took 61-64 ns an operation and 2, 4 or 8 shards
// 146-297 ns on a quiet machine: spreading timers by id sends every
// shard's cache lines back and forth between the cores, where one lock
// lets a core run a burst of operations on lines it already holds. (Runs
// beside other busy processes were noisier and now and then favoured 4 or
// 8 shards by up to a quarter.) Each extra shard also costs Advance a lock
// per batch: 19 against 35 ns per fired timer with four. Config.Shards is
// there for machines with many cores and many sending goroutines; measure
// there before raising it. With several shards Advance merges them so that
// deadline order holds across the whole wheel.
//
// Advance never holds a lock while it calls fire: it takes up to 128 due
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
	"sync/atomic"
	"time"
)

// MaxShards is the largest Config.Shards (a Handle has 6 bits for it).
const MaxShards = 64

// MaxCapacity is the largest Config.Capacity: 2^26 timers per shard, times
// the number of shards (a Handle has 26 bits for the node index). At
// 32 bytes a timer, one full shard is 2 GiB.
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

	// batchSize is how many due ids Advance takes per lock; 128 amortises
	// the lock to well under a nanosecond per timer while keeping the
	// buffer (1 KiB) in L1.
	batchSize = 128
)

// Errors. Each is returned as is or wrapped (test with errors.Is); a call
// that returns one changes nothing.
var (
	// ErrFull is returned by Schedule when Capacity timers are pending.
	ErrFull = errors.New("timerwheel: capacity reached")
	// ErrDeadline is returned by Schedule and Reset for a deadline so far
	// after Start that the distance does not fit a time.Duration (about 292
	// years).
	ErrDeadline = errors.New("timerwheel: deadline out of range")
	// ErrInvalidConfig is wrapped by New for a bad Config.
	ErrInvalidConfig = errors.New("timerwheel: invalid config")
)

// Handle names one scheduled timer for Reset and Cancel. It packs the
// shard, the node index and the node's generation, so a handle kept after
// its timer fired or was cancelled is stale forever: Reset and Cancel on it
// report false and never touch a timer that reuses the node. The zero
// Handle is never returned by Schedule, so 0 can mean "no timer" in a
// caller's pointer-free struct.
type Handle uint64

func makeHandle(gen uint32, shard int, index uint32) Handle {
	return Handle(uint64(gen)<<genShift | uint64(shard)<<shardShift | uint64(index))
}

func (h Handle) gen() uint32   { return uint32(h >> genShift) }
func (h Handle) shard() int    { return int(h>>shardShift) & shardMask }
func (h Handle) index() uint32 { return uint32(h) & indexMask }

// Config describes a wheel for [NewConfig].
type Config struct {
	// Tick is the resolution of the wheel (> 0). Deadlines are rounded up
	// to it and the time passed to Advance down, so it bounds lateness.
	// The engine uses DefaultTick (1 ms).
	Tick time.Duration
	// Start is tick 0: the wheel counts time from it. Pass a time with a
	// monotonic reading (time.Now()) when deadlines and the times given to
	// Advance come from time.Now(), so that wall-clock steps do not matter.
	Start time.Time
	// Capacity is the most timers that may be pending at once (1 to
	// MaxCapacity·Shards); beyond it Schedule returns ErrFull. Memory grows
	// with use in chunks of 4096 timers (128 KiB) up to Capacity×32 bytes,
	// plus Capacity/8 bytes up front for the bitmap of free timers.
	Capacity int
	// Shards is the number of independently locked sub-wheels, a power of
	// two from 1 to MaxShards; 0 means 1. See the package comment for the
	// measurement behind the default.
	Shards int
}

// Wheel is a hierarchical timing wheel. Create one with [New] or
// [NewConfig]; the zero Wheel is not usable. All methods are safe for
// concurrent use.
type Wheel struct {
	tick      int64 // nanoseconds
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

// New returns a wheel with one shard that counts ticks of length tick from
// start and holds at most capacity pending timers. Errors wrap ErrInvalidConfig.
// It is NewConfig(Config{Tick: tick, Start: start, Capacity: capacity}).
func New(tick time.Duration, start time.Time, capacity int) (*Wheel, error) {
	return NewConfig(Config{Tick: tick, Start: start, Capacity: capacity})
}

// NewConfig returns a wheel for c. Errors wrap ErrInvalidConfig and name the
// field.
func NewConfig(c Config) (*Wheel, error) {
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
	if c.Capacity <= 0 || c.Capacity > MaxCapacity*shards {
		return nil, fmt.Errorf("%w: Capacity %d must be from 1 to %d", ErrInvalidConfig, c.Capacity, MaxCapacity*shards)
	}
	w := &Wheel{
		tick:   int64(c.Tick),
		start:  c.Start,
		shards: make([]shard, shards),
	}
	for shards>>w.shardBits > 1 {
		w.shardBits++
	}
	// Split the capacity so that the shards add up to exactly Capacity;
	// Schedule spills into another shard when its own is full.
	for i := range w.shards {
		capacity := c.Capacity / shards
		if i < c.Capacity%shards {
			capacity++
		}
		w.shards[i].init(uint32(capacity))
	}
	return w, nil
}

// Tick returns the wheel's tick.
func (w *Wheel) Tick() time.Duration { return time.Duration(w.tick) }

// Start returns the wheel's tick 0.
func (w *Wheel) Start() time.Time { return w.start }

// Cap returns the most timers that may be pending at once.
func (w *Wheel) Cap() int {
	c := 0
	for i := range w.shards {
		c += int(w.shards[i].capacity)
	}
	return c
}

// deadlineTick converts a deadline to ticks since Start, rounded up so that
// a timer never fires early; a deadline at or before Start is tick 0, which
// is always past.
func (w *Wheel) deadlineTick(deadline time.Time) (int64, error) {
	d := int64(deadline.Sub(w.start))
	if d <= 0 {
		return 0, nil
	}
	if d == math.MaxInt64 { // Sub saturated: the true distance is unknown
		return 0, ErrDeadline
	}
	t := d / w.tick
	if d%w.tick != 0 {
		t++
	}
	return t, nil
}

// nowTick converts a time given to Advance to ticks since Start, rounded
// down.
func (w *Wheel) nowTick(now time.Time) int64 {
	d := int64(now.Sub(w.start))
	if d <= 0 {
		return 0
	}
	return d / w.tick
}

func (w *Wheel) shardOf(id uint64) int {
	// Fibonacci hashing spreads sequential and strided ids alike; with one
	// shard the shift is 64 and the result 0.
	return int((id * 0x9E3779B97F4A7C15) >> (64 - w.shardBits))
}

// Schedule files a timer that hands id to Advance's fire callback at the
// first Advance at or after deadline (rounded up to a tick; a deadline
// already past fires in the next Advance). It returns the timer's Handle,
// never 0. Errors: ErrFull when Capacity timers are pending, ErrDeadline
// for a deadline about 292 years or more after Start. Called from fire
// during an Advance, a deadline at or before the tick being fired waits for
// the next Advance, so a timer that keeps rescheduling itself at "now"
// cannot keep one Advance running forever.
func (w *Wheel) Schedule(deadline time.Time, id uint64) (Handle, error) {
	t, err := w.deadlineTick(deadline)
	if err != nil {
		return 0, err
	}
	home := w.shardOf(id)
	// A full shard spills into the next one with room, so that ErrFull
	// means the whole wheel is full, not just the id's shard.
	for k := range len(w.shards) {
		si := (home + k) & (len(w.shards) - 1)
		s := &w.shards[si]
		s.mu.Lock()
		if i, n, ok := s.alloc(); ok {
			n.deadline = t
			n.id = id
			s.insert(i, n)
			s.count++
			gen := n.gen
			s.mu.Unlock()
			return makeHandle(gen, si, i), nil
		}
		s.mu.Unlock()
	}
	return 0, ErrFull
}

// live returns the shard and node of a handle whose timer is pending, with
// the shard locked; ok is false (and nothing locked) otherwise.
func (w *Wheel) live(h Handle) (s *shard, i uint32, n *node, ok bool) {
	si := h.shard()
	if si >= len(w.shards) {
		return nil, 0, nil, false
	}
	s = &w.shards[si]
	i = h.index()
	s.mu.Lock()
	n = s.lookup(i)
	if n == nil || n.gen != h.gen() || n.list == listFree {
		s.mu.Unlock()
		return nil, 0, nil, false
	}
	return s, i, n, true
}

// Cancel stops the timer h so that its id is never handed to fire, and
// frees its place at once. It returns true if it stopped a pending timer,
// false if h is 0 or stale (the timer already fired or was cancelled).
// Concurrent with Advance exactly one of the two wins: if Cancel returns
// false for a timer that had been pending, fire is called (or has been
// called) for it. h must come from this wheel: a handle of another wheel
// may name one of this wheel's timers.
func (w *Wheel) Cancel(h Handle) bool {
	s, i, n, ok := w.live(h)
	if !ok {
		return false
	}
	s.unlink(i, n)
	s.release(i, n)
	s.mu.Unlock()
	return true
}

// Reset moves the pending timer h to a new deadline, keeping its id and
// its handle; it is as if the timer were cancelled and scheduled again,
// without the risk of ErrFull. It returns false (and changes nothing) if
// h is stale as for Cancel, or if the deadline is out of range (see
// Schedule).
func (w *Wheel) Reset(h Handle, deadline time.Time) bool {
	t, err := w.deadlineTick(deadline)
	if err != nil {
		return false
	}
	s, i, n, ok := w.live(h)
	if !ok {
		return false
	}
	s.unlink(i, n)
	n.deadline = t
	s.insert(i, n)
	s.mu.Unlock()
	return true
}

// Advance fires every timer due at or before now: it calls fire with each
// one's id, in deadline order (by tick; timers of the same tick in no
// particular order), and returns how many it fired. Timers scheduled with a
// deadline at or before the tick being fired while this Advance runs fire
// in the next one. The wheel's clock never goes back: a now before the
// latest Advance's counts as that one's, so it fires only past-due timers.
// A nil fire discards the due timers.
//
// fire is called without any lock held and may call Schedule, Reset and
// Cancel on this wheel (the engine re-sends a read and schedules its next
// deadline from it). Advance calls do not overlap: one made while another
// runs, from another goroutine or from inside fire, returns 0 at once
// without firing anything, and the running one fires what was due at its
// own now. If fire panics, the panic propagates, the ids left in the
// current batch (at most 127) are lost, and the wheel stays usable.
func (w *Wheel) Advance(now time.Time, fire func(id uint64)) int {
	if !w.advancing.CompareAndSwap(false, true) {
		return 0
	}
	defer w.advancing.Store(false)
	// The wheel's clock never goes back: a time before the latest Advance
	// fires what is due by that Advance's time (past-due timers only).
	prev := w.lastTick.Load()
	limit := max(w.nowTick(now), prev)
	if limit != prev {
		w.lastTick.Store(limit)
	}
	if len(w.shards) == 1 {
		return w.advanceOne(&w.shards[0], limit, fire)
	}
	return w.advanceMerge(limit, prev, fire)
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
		n += s.count
		s.mu.Unlock()
	}
	return n
}

// NextDeadline returns when the next Advance may have work to do, and false
// if no timer is pending. The time is never later than the earliest pending
// deadline (rounded up to a tick), so a driver that sleeps until it never
// fires a timer late. It can be earlier than that deadline: the start of a
// higher-level slot whose timers an Advance must first move to lower
// levels, after which NextDeadline is closer (at most one such step per
// level). A past-due timer gives the time of the last Advance, rounded down
// to a tick.
func (w *Wheel) NextDeadline() (time.Time, bool) {
	e := int64(noTick)
	for i := range w.shards {
		e = min(e, w.shards[i].earliest())
	}
	if e == noTick {
		return time.Time{}, false
	}
	// A shard's own clock may lag the last Advance (see shard.peek);
	// anything it holds before that is due now.
	e = max(e, w.lastTick.Load())
	if e > math.MaxInt64/w.tick {
		return w.start.Add(math.MaxInt64), true
	}
	return w.start.Add(time.Duration(e * w.tick)), true
}
