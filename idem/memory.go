package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"github.com/readretry/readretry/internal/ticker"
	"github.com/readretry/readretry/timerwheel"
)

// Defaults and limits of [MemoryConfig].
const (
	// DefaultMemoryCapacity is the entries of a Memory store built with
	// Capacity 0.
	DefaultMemoryCapacity = 1 << 16
	// DefaultMaxResult is the longest result, in bytes, Complete stores
	// when MemoryConfig.MaxResult is 0 (less when a shard's share of
	// MaxBytes is smaller).
	DefaultMaxResult = 1 << 20
	// DefaultMaxBytes is the most bytes of stored results a Memory store
	// built with MaxBytes 0 holds in all.
	DefaultMaxBytes = 64 << 20
	// DefaultMemoryTick is the resolution of the expiry wheel when
	// MemoryConfig.Tick is 0. It bounds how late an expired entry's memory
	// is reclaimed, never when it stops counting (see Memory).
	DefaultMemoryTick = 10 * time.Millisecond
	// MaxMemoryShards is the largest MemoryConfig.Shards.
	MaxMemoryShards = 256
	// MaxMemoryShardCapacity is the most entries one shard holds
	// (Capacity/Shards, rounded up), so that a shard's key arena stays
	// below 4 GiB.
	MaxMemoryShardCapacity = 1 << 22
)

// ErrInvalidConfig is wrapped by every constructor of the package for a bad
// configuration: NewMemory for a bad MemoryConfig, NewJanitor, Middleware
// for an invalid option. A call that returns it changes nothing.
var ErrInvalidConfig = errors.New("idem: invalid config")

// MemoryConfig describes a [Memory] store. The zero value is usable.
type MemoryConfig struct {
	// Capacity is the most live entries (claims, stored results and tokens
	// together); 0 means DefaultMemoryCapacity. It is split evenly over the
	// shards, and a shard that is full answers ErrFull even while another
	// has room (with a seeded hash the load is even: a full shard means the
	// store is nearly full).
	Capacity int
	// Shards is the number of independently locked parts, a power of two
	// up to MaxMemoryShards; 0 means 4×GOMAXPROCS rounded up to a power of
	// two, capped at 256 and at Capacity.
	Shards int
	// MaxResult is the longest result Complete accepts, in bytes; 0 means
	// DefaultMaxResult, or a shard's share of MaxBytes if that is smaller.
	// It may not exceed MaxBytes/Shards.
	MaxResult int
	// MaxBytes bounds the stored results of all entries together, in bytes
	// (the sum of their lengths); 0 means DefaultMaxBytes. It is split
	// evenly over the shards like Capacity. With Capacity it bounds the
	// heap the store holds: Capacity × (at most 344 bytes of slot, index,
	// result header and key cell) + MaxBytes (SPEC I5).
	MaxBytes int
	// ScopeQuota, when > 0, is the most live claims (pending or done) one
	// scope may hold: a Claim of a key made by ScopedKey whose scope is at
	// its quota returns ErrQuota. Keys without a scope separator and
	// tokens are not counted. 0 means no quota.
	ScopeQuota int
	// Tick is the resolution of the expiry timing wheel; 0 means
	// DefaultMemoryTick.
	Tick time.Duration
	// Clock returns the current time; nil means time.Now. Tests pass a fake
	// clock; it must never go backwards.
	Clock func() time.Time
}

// Slot states. A claim is Pending or Done; a token is its own namespace.
const (
	stFree uint8 = iota
	stPending
	stDone
	stToken
)

// noSlot ends the done list (slot numbers in the list are index+1).
const noSlot = 0

// Timer ids pack the slot's generation, its index and its shard.
const (
	idShardBits = 8
	idSlotBits  = 24
	idShardMask = 1<<idShardBits - 1
	idSlotMask  = 1<<idSlotBits - 1
)

// Memory is the embedded [Store] (SPEC I1, I3, I5): a sharded hash table
// whose entries expire through a [timerwheel.Wheel], bounded in entries,
// in result size and in the bytes of all results together. Create it with
// [NewMemory]; all methods are safe for concurrent use.
//
// # Layout
//
// Each shard is a mutex, an open-addressing index ([]uint32, linear
// probing, at most half full, backward-shift deletion, no tombstones), a
// slab of 56-byte slots (hash, fence, expiry, timer handle, key offset and
// length, state, generation, done-list links) and a byte arena holding the keys in
// power-of-two cells of 16 to 256 bytes, recycled through per-size free
// lists. None of these hold Go pointers, so the garbage collector does not
// scan them however many entries there are (the fastcache/bigcache idea);
// only stored results are separate []byte values. A claim hashes the key
// with a per-store random seed (hash/maphash, so a client cannot aim keys
// at one probe chain), locks one shard, probes, copies the key into the
// arena and schedules one timer: no allocation once the slabs have grown
// to the working set.
//
// # Expiry
//
// Every entry records its expiry, and every operation compares it with the
// clock: an entry is dead the moment its ttl has passed, whatever the
// wheel has done. The wheel only reclaims the memory of dead entries, with
// no goroutine per key: each operation reads the clock once, and at most
// one operation per tick (an atomic compare-and-swap decides which) calls
// the wheel's Advance, which hands the expired entries to the store. An
// idle store therefore keeps dead entries until its next call — harmless,
// since they are invisible and the call that needs room first expires what
// is due — or until [Memory.Expire] or a [Janitor] advances it.
//
// # A full store
//
// Each shard keeps its completed entries in a list in order of completion.
// A claim that finds its shard at its share of Capacity first evicts the
// oldest completed entry, and a Complete whose result would take the shard
// past its share of MaxBytes evicts the oldest completed entries until it
// fits; only a shard holding nothing but pending claims and tokens answers
// ErrFull. So junk that was answered and stored can never lock out new
// claims (issue 17 item 5) — it only shortens how long old answers are
// replayed, which [MemoryStats].Evictions counts. MemoryConfig.ScopeQuota
// keeps one scope from evicting everyone else's answers.
type Memory struct {
	shards     []memShard
	shardShift uint // 64 - log2(len(shards)); a shift by 64 gives 0
	seed       maphash.Seed
	wheel      *timerwheel.Wheel
	clock      func() time.Time // nil: the real clock
	start      time.Time        // with a monotonic reading for the real clock
	tick       int64            // nanoseconds
	capacity   int
	maxResult  int
	maxBytes   int
	quota      int
	scopes     *xsync.MapOf[uint64, int32] // scope hash → live claims; nil without a quota

	lastAdvance atomic.Int64 // nanoseconds since start of the last lazy Advance
	fire        func(id uint64)

	evictions, fullRefusals, quotaRefusals atomic.Uint64
}

// MemoryStats are a Memory store's counters (SPEC I5), read without
// stopping the store.
type MemoryStats struct {
	// Entries is the number of entries held, live or expired but not yet
	// reclaimed (Len).
	Entries int
	// Bytes is the total length of the stored results, in bytes (at most
	// MemoryConfig.MaxBytes).
	Bytes int
	// Evictions counts completed entries dropped before their ttl to make
	// room (a full shard, or results over MaxBytes), oldest completion
	// first. Each one shortens the window in which a repeat of that key
	// is answered from the store.
	Evictions uint64
	// FullRefusals counts Claims and Issues refused with ErrFull: every
	// entry of the shard was pending or a token.
	FullRefusals uint64
	// QuotaRefusals counts Claims refused with ErrQuota.
	QuotaRefusals uint64
}

type memShard struct {
	mu        sync.Mutex
	slots     []memSlot
	results   [][]byte // per slot: the stored result of a Done claim
	free      []uint32 // indexes of free slots
	index     []uint32 // slot index + 1; 0 is empty; len is a power of two
	keys      keyArena
	count     int
	limit     int
	bytes     int // total length of results
	byteLimit int
	fences    uint64
	// The done list: Done slots (index+1) in order of completion, oldest
	// at the head, linked through memSlot.prev/next. Eviction takes the
	// head.
	doneHead, doneTail uint32
	_                  [64]byte // keeps neighbouring shards' mutexes off one cache line
}

// memSlot is one entry; it holds no pointers (see Memory).
type memSlot struct {
	hash       uint64
	fence      Fence
	expires    int64 // nanoseconds since Memory.start
	timer      timerwheel.Handle
	keyOff     uint32
	keyLen     uint16
	state      uint8
	scoped     bool   // counted against its scope's quota
	gen        uint32 // bumped when the slot is freed or its timer replaced
	prev, next uint32 // done list neighbours (index+1; noSlot ends it)
}

// NewMemory returns an empty memory store for c. Errors wrap
// ErrInvalidConfig and name the field.
func NewMemory(c MemoryConfig) (*Memory, error) {
	capacity := c.Capacity
	if capacity == 0 {
		capacity = DefaultMemoryCapacity
	}
	if capacity < 0 {
		return nil, fmt.Errorf("%w: Capacity %d is negative", ErrInvalidConfig, c.Capacity)
	}
	shards := c.Shards
	if shards == 0 {
		shards = 1
		for shards < 4*runtime.GOMAXPROCS(0) && shards < MaxMemoryShards && shards < capacity {
			shards <<= 1
		}
	}
	if shards < 0 || shards > MaxMemoryShards || shards&(shards-1) != 0 {
		return nil, fmt.Errorf("%w: Shards %d must be a power of two from 1 to %d", ErrInvalidConfig, c.Shards, MaxMemoryShards)
	}
	perShard := (capacity + shards - 1) / shards
	if perShard > MaxMemoryShardCapacity {
		return nil, fmt.Errorf("%w: Capacity %d over %d shards exceeds %d entries per shard", ErrInvalidConfig, capacity, shards, MaxMemoryShardCapacity)
	}
	maxResult := c.MaxResult
	if maxResult == 0 {
		maxResult = DefaultMaxResult
	}
	if maxResult < 0 {
		return nil, fmt.Errorf("%w: MaxResult %d is negative", ErrInvalidConfig, c.MaxResult)
	}
	maxBytes := c.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxBytes < 0 {
		return nil, fmt.Errorf("%w: MaxBytes %d is negative", ErrInvalidConfig, c.MaxBytes)
	}
	shardBytes := maxBytes / shards
	if c.MaxResult == 0 {
		maxResult = min(maxResult, shardBytes)
	} else if maxResult > shardBytes {
		return nil, fmt.Errorf("%w: MaxResult %d exceeds a shard's share of MaxBytes (%d over %d shards)", ErrInvalidConfig, c.MaxResult, maxBytes, shards)
	}
	if c.ScopeQuota < 0 {
		return nil, fmt.Errorf("%w: ScopeQuota %d is negative", ErrInvalidConfig, c.ScopeQuota)
	}
	tick := c.Tick
	if tick == 0 {
		tick = DefaultMemoryTick
	}
	if tick < 0 {
		return nil, fmt.Errorf("%w: Tick %v is negative", ErrInvalidConfig, c.Tick)
	}
	clock := c.Clock // nil: time.Now, read through time.Since (see now)
	start := time.Now()
	if clock != nil {
		start = clock()
	}
	// One pending timer per live entry: the store bounds its entries, the
	// wheel follows. Its shards follow the store's up to the wheel's limit.
	w, err := timerwheel.New(timerwheel.Config{
		Tick:   tick,
		Start:  start,
		Shards: min(shards, timerwheel.MaxShards),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	m := &Memory{
		shards:    make([]memShard, shards),
		seed:      maphash.MakeSeed(),
		wheel:     w,
		clock:     clock,
		start:     start,
		tick:      int64(tick),
		capacity:  perShard * shards,
		maxResult: maxResult,
		maxBytes:  shardBytes * shards,
		quota:     c.ScopeQuota,
	}
	if m.quota > 0 {
		m.scopes = xsync.NewMapOf[uint64, int32]()
	}
	bits := uint(0)
	for 1<<bits < shards {
		bits++
	}
	m.shardShift = 64 - bits
	for i := range m.shards {
		m.shards[i].limit = perShard
		m.shards[i].byteLimit = shardBytes
		m.shards[i].index = make([]uint32, 16)
	}
	m.fire = m.expireID
	return m, nil
}

// Cap returns the most live entries the store holds.
func (m *Memory) Cap() int { return m.capacity }

// MaxBytes returns the most bytes of stored results the store holds.
func (m *Memory) MaxBytes() int { return m.maxBytes }

// Stats returns the store's counters. Entries and Bytes are summed over
// the shards one at a time, so under load they are not one instant's.
func (m *Memory) Stats() MemoryStats {
	st := MemoryStats{
		Evictions:     m.evictions.Load(),
		FullRefusals:  m.fullRefusals.Load(),
		QuotaRefusals: m.quotaRefusals.Load(),
	}
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		st.Entries += sh.count
		st.Bytes += sh.bytes
		sh.mu.Unlock()
	}
	return st
}

// Len returns the number of entries held, live or expired but not yet
// reclaimed.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// Expire reclaims every entry whose expiry is at or before now (rounded
// down to the wheel's tick) and returns how many it reclaimed. Operations
// call it lazily; call it yourself, or run a [Janitor], to return the
// memory of an idle store. now must come from the store's clock.
func (m *Memory) Expire(now time.Time) int {
	return m.wheel.Advance(now, m.fire)
}

// now reads the clock once and, at most once per tick across all
// goroutines, advances the wheel. It returns the time in nanoseconds since
// start; at(rel) turns it back into a time.Time for the wheel, which only
// the advancing call and a full store's retry need. With the default clock
// it reads only the monotonic clock (time.Since), half the cost of
// time.Now, which reads the wall clock too.
func (m *Memory) now() int64 {
	var rel int64
	if m.clock == nil {
		rel = int64(time.Since(m.start))
	} else {
		rel = int64(m.clock().Sub(m.start))
	}
	if last := m.lastAdvance.Load(); rel-last >= m.tick && m.lastAdvance.CompareAndSwap(last, rel) {
		m.wheel.Advance(m.at(rel), m.fire)
	}
	return rel
}

// at is the time rel nanoseconds after start.
func (m *Memory) at(rel int64) time.Time { return m.start.Add(time.Duration(rel)) }

// clockNow returns the store's current time.
func (m *Memory) clockNow() time.Time {
	if m.clock == nil {
		return time.Now()
	}
	return m.clock()
}

func (m *Memory) shardOf(h uint64) int { return int(h >> m.shardShift) }

// expiry returns now+ttl in store time, or false if it would overflow.
func expiry(now int64, ttl time.Duration) (int64, bool) {
	if ttl <= 0 {
		return 0, false
	}
	if int64(ttl) > math.MaxInt64-now {
		return 0, false
	}
	return now + int64(ttl), true
}

// Claim implements [Store.Claim]. It does not allocate once the shard's
// slabs have grown to the working set.
func (m *Memory) Claim(_ context.Context, key []byte, ttl time.Duration) (Fence, error) {
	return m.put(key, ttl, stPending)
}

// Issue implements [Store.Issue].
func (m *Memory) Issue(_ context.Context, token []byte, ttl time.Duration) error {
	f, err := m.put(token, ttl, stToken)
	if err == nil && f == 0 {
		return ErrExists
	}
	return err
}

// put inserts key in state st unless a live entry of the same namespace
// holds it (then it returns 0). A full shard first gives way by evicting
// its oldest done entry, then by reclaiming expired entries; only a shard
// of pending claims and tokens answers ErrFull.
func (m *Memory) put(key []byte, ttl time.Duration, st uint8) (Fence, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	if ttl <= 0 {
		return 0, ErrTTL
	}
	now := m.now()
	exp, ok := expiry(now, ttl)
	if !ok {
		return 0, ErrTTL
	}
	h := maphash.Bytes(m.seed, key)
	si := m.shardOf(h)
	sh := &m.shards[si]
	for retried := false; ; retried = true {
		sh.mu.Lock()
		if slot, found := sh.find(h, st == stToken, key); found {
			if sh.slots[slot].expires > now {
				sh.mu.Unlock()
				return 0, nil
			}
			m.remove(sh, slot, true)
		}
		f, err := m.insert(sh, si, h, key, st, exp, now)
		sh.mu.Unlock()
		if err != ErrFull || retried {
			if err == ErrFull {
				m.fullRefusals.Add(1)
			}
			return f, err
		}
		// Full: reclaim whatever is due (outside the shard lock: the
		// wheel calls back into it), then try once more.
		m.wheel.Advance(m.at(now), m.fire)
	}
}

// Complete implements [Store.Complete]. It copies result (one allocation
// of len(result) bytes).
func (m *Memory) Complete(_ context.Context, key []byte, fence Fence, result []byte, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if ttl <= 0 {
		return ErrTTL
	}
	if len(result) > m.maxResult {
		return ErrTooLarge
	}
	now := m.now()
	exp, ok := expiry(now, ttl)
	if !ok {
		return ErrTTL
	}
	sh, si, slot, err := m.held(key, fence, now)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	if err := m.retime(sh, si, slot, exp); err != nil {
		return err
	}
	s := &sh.slots[slot]
	old := 0
	if s.state == stDone {
		// Completed again by its holder: it moves to the tail.
		sh.unlinkDone(slot)
		old = len(sh.results[slot])
	}
	// Room for the result: the oldest done entries give way. maxResult
	// is at most byteLimit, so evicting the others always makes room.
	for sh.bytes-old+len(result) > sh.byteLimit && sh.doneHead != noSlot {
		m.evict(sh, now)
	}
	sh.bytes += len(result) - old
	s.state = stDone
	sh.results[slot] = bytes.Clone(result)
	sh.linkDone(slot)
	return nil
}

// Extend implements [Store.Extend]: it moves a pending claim's expiry (and
// its timer) to now+ttl unless that is earlier than the current one.
func (m *Memory) Extend(_ context.Context, key []byte, fence Fence, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	now := m.now()
	exp, ok := expiry(now, ttl)
	if !ok {
		return ErrTTL
	}
	sh, si, slot, err := m.held(key, fence, now)
	if err != nil {
		return err
	}
	defer sh.mu.Unlock()
	s := &sh.slots[slot]
	if s.state != stPending {
		return ErrLost
	}
	if exp <= s.expires {
		return nil
	}
	return m.retime(sh, si, slot, exp)
}

// held finds key's live entry held under fence and returns it with its
// shard locked; the caller unlocks sh.mu. If there is none (absent,
// expired, or another holder's fence), it returns ErrLost and leaves the
// shard unlocked.
func (m *Memory) held(key []byte, fence Fence, now int64) (sh *memShard, si int, slot uint32, err error) {
	h := maphash.Bytes(m.seed, key)
	si = m.shardOf(h)
	sh = &m.shards[si]
	sh.mu.Lock()
	slot, found := sh.find(h, false, key)
	if !found || sh.slots[slot].expires <= now || sh.slots[slot].fence != fence {
		sh.mu.Unlock()
		return nil, 0, 0, ErrLost
	}
	return sh, si, slot, nil
}

// retime moves the entry in slot of shard si (sh.mu held) to expire at
// exp, store time, timer included. If the wheel cannot schedule it, the
// entry is removed and the wheel's error mapped to the store's returned.
func (m *Memory) retime(sh *memShard, si int, slot uint32, exp int64) error {
	s := &sh.slots[slot]
	deadline := m.start.Add(time.Duration(exp))
	if !m.wheel.Reset(s.timer, deadline) {
		// The old timer is being fired right now: give the slot a new
		// generation so that the late fire ignores it, and a new timer.
		s.gen++
		th, err := m.wheel.Schedule(deadline, timerID(s.gen, slot, si))
		if err != nil {
			m.remove(sh, slot, false)
			return wheelErr(err)
		}
		s.timer = th
	}
	s.expires = exp
	return nil
}

// evict removes the shard's oldest done entry (the caller checked that
// there is one), counting it as an eviction if it was still live.
func (m *Memory) evict(sh *memShard, now int64) {
	slot := sh.doneHead - 1
	if sh.slots[slot].expires > now {
		m.evictions.Add(1)
	}
	m.remove(sh, slot, true)
}

// Release implements [Store.Release].
func (m *Memory) Release(_ context.Context, key []byte, fence Fence) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	sh, _, slot, err := m.held(key, fence, m.now())
	if err != nil {
		return err
	}
	m.remove(sh, slot, true)
	sh.mu.Unlock()
	return nil
}

// Lookup implements [Store.Lookup]. It does not allocate when dst has room
// for the result.
func (m *Memory) Lookup(_ context.Context, key []byte, dst []byte) (State, []byte, error) {
	if err := CheckKey(key); err != nil {
		return Absent, dst, err
	}
	now := m.now()
	h := maphash.Bytes(m.seed, key)
	sh := &m.shards[m.shardOf(h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, found := sh.find(h, false, key)
	if !found {
		return Absent, dst, nil
	}
	s := &sh.slots[slot]
	switch {
	case s.expires <= now:
		m.remove(sh, slot, true)
		return Absent, dst, nil
	case s.state == stPending:
		return Pending, dst, nil
	}
	return Done, append(dst, sh.results[slot]...), nil
}

// Consume implements [Store.Consume].
func (m *Memory) Consume(_ context.Context, token []byte) (bool, error) {
	if err := CheckKey(token); err != nil {
		return false, err
	}
	now := m.now()
	h := maphash.Bytes(m.seed, token)
	sh := &m.shards[m.shardOf(h)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	slot, found := sh.find(h, true, token)
	if !found {
		return false, nil
	}
	live := sh.slots[slot].expires > now
	m.remove(sh, slot, true)
	return live, nil
}

func timerID(gen uint32, slot uint32, shard int) uint64 {
	return uint64(gen)<<32 | uint64(slot)<<idShardBits | uint64(shard)
}

// wheelErr maps the wheel's errors to the store's.
func wheelErr(err error) error {
	switch {
	case errors.Is(err, timerwheel.ErrFull):
		return ErrFull
	case errors.Is(err, timerwheel.ErrDeadline):
		return ErrTTL
	}
	return err
}

// expireID is the wheel's fire callback: it reclaims the slot the timer
// names unless the slot has moved on to another generation since.
func (m *Memory) expireID(id uint64) {
	sh := &m.shards[id&idShardMask]
	slot := uint32(id>>idShardBits) & idSlotMask
	gen := uint32(id >> 32)
	sh.mu.Lock()
	if int(slot) < len(sh.slots) {
		if s := &sh.slots[slot]; s.state != stFree && s.gen == gen {
			m.remove(sh, slot, false)
		}
	}
	sh.mu.Unlock()
}

// insert stores a new entry; the caller holds sh.mu and has checked that
// the key is absent.
func (m *Memory) insert(sh *memShard, si int, h uint64, key []byte, st uint8, exp, now int64) (Fence, error) {
	scoped := false
	if m.quota > 0 && st == stPending {
		if scope, ok := keyScope(key); ok {
			if !m.charge(scope) {
				m.quotaRefusals.Add(1)
				return 0, ErrQuota
			}
			scoped = true
		}
	}
	if sh.count >= sh.limit {
		if sh.doneHead == noSlot {
			if scoped {
				m.refund(key)
			}
			return 0, ErrFull
		}
		m.evict(sh, now)
	}
	var slot uint32
	if n := len(sh.free); n > 0 {
		slot = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		slot = uint32(len(sh.slots))
		sh.slots = append(sh.slots, memSlot{})
		sh.results = append(sh.results, nil)
	}
	s := &sh.slots[slot]
	th, err := m.wheel.Schedule(m.start.Add(time.Duration(exp)), timerID(s.gen, slot, si))
	if err != nil {
		sh.free = append(sh.free, slot)
		if scoped {
			m.refund(key)
		}
		return 0, wheelErr(err)
	}
	sh.fences++
	fence := Fence(sh.fences<<idShardBits | uint64(si))
	s.hash = h
	s.fence = fence
	s.expires = exp
	s.timer = th
	s.keyOff = sh.keys.alloc(len(key))
	s.keyLen = uint16(len(key))
	s.state = st
	s.scoped = scoped
	copy(sh.keys.buf[s.keyOff:], key)
	sh.count++
	sh.place(slot)
	return fence, nil
}

// remove frees slot; cancel says whether its timer is still pending.
func (m *Memory) remove(sh *memShard, slot uint32, cancel bool) {
	s := &sh.slots[slot]
	if cancel {
		m.wheel.Cancel(s.timer)
	}
	sh.unplace(slot)
	if s.state == stDone {
		sh.unlinkDone(slot)
		sh.bytes -= len(sh.results[slot])
	}
	if s.scoped {
		m.refund(sh.keys.buf[s.keyOff : s.keyOff+uint32(s.keyLen)])
	}
	sh.keys.release(s.keyOff, int(s.keyLen))
	sh.results[slot] = nil
	*s = memSlot{gen: s.gen + 1}
	sh.free = append(sh.free, slot)
	sh.count--
}

// charge counts one more live claim against scope's quota, or reports
// false (counting nothing) when the scope is at its quota.
func (m *Memory) charge(scope []byte) bool {
	ok := true
	m.scopes.Compute(maphash.Bytes(m.seed, scope), func(n int32, _ bool) (int32, bool) {
		if int(n) >= m.quota {
			ok = false
			return n, n == 0
		}
		return n + 1, false
	})
	return ok
}

// refund undoes charge for the scope of key.
func (m *Memory) refund(key []byte) {
	scope, _ := keyScope(key)
	m.scopes.Compute(maphash.Bytes(m.seed, scope), func(n int32, _ bool) (int32, bool) {
		return n - 1, n <= 1
	})
}

// linkDone appends slot to the tail of the done list.
func (sh *memShard) linkDone(slot uint32) {
	s := &sh.slots[slot]
	s.prev, s.next = sh.doneTail, noSlot
	if sh.doneTail != noSlot {
		sh.slots[sh.doneTail-1].next = slot + 1
	} else {
		sh.doneHead = slot + 1
	}
	sh.doneTail = slot + 1
}

// unlinkDone removes slot from the done list.
func (sh *memShard) unlinkDone(slot uint32) {
	s := &sh.slots[slot]
	if s.prev != noSlot {
		sh.slots[s.prev-1].next = s.next
	} else {
		sh.doneHead = s.next
	}
	if s.next != noSlot {
		sh.slots[s.next-1].prev = s.prev
	} else {
		sh.doneTail = s.prev
	}
	s.prev, s.next = noSlot, noSlot
}

// find returns the slot holding key in the given namespace.
func (sh *memShard) find(h uint64, token bool, key []byte) (uint32, bool) {
	mask := uint64(len(sh.index) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		v := sh.index[p]
		if v == 0 {
			return 0, false
		}
		s := &sh.slots[v-1]
		if s.hash == h && (s.state == stToken) == token &&
			bytes.Equal(sh.keys.buf[s.keyOff:s.keyOff+uint32(s.keyLen)], key) {
			return v - 1, true
		}
	}
}

// place adds slot to the index, growing it to stay at most half full.
func (sh *memShard) place(slot uint32) {
	if 2*sh.count > len(sh.index) {
		sh.grow()
	}
	sh.link(slot)
}

func (sh *memShard) link(slot uint32) {
	mask := uint64(len(sh.index) - 1)
	p := sh.slots[slot].hash & mask
	for sh.index[p] != 0 {
		p = (p + 1) & mask
	}
	sh.index[p] = slot + 1
}

func (sh *memShard) grow() {
	old := sh.index
	sh.index = make([]uint32, 2*len(old))
	for _, v := range old {
		if v != 0 {
			sh.link(v - 1)
		}
	}
}

// unplace removes slot from the index by backward-shift deletion: later
// entries of the probe run move up, so no tombstone is needed and probe
// runs stay as short as the load allows.
func (sh *memShard) unplace(slot uint32) {
	mask := uint64(len(sh.index) - 1)
	i := sh.slots[slot].hash & mask
	for sh.index[i] != slot+1 {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		v := sh.index[j]
		if v == 0 {
			break
		}
		home := sh.slots[v-1].hash & mask
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		var stays bool
		if i <= j {
			stays = i < home && home <= j
		} else {
			stays = i < home || home <= j
		}
		if !stays {
			sh.index[i] = v
			i = j
		}
	}
	sh.index[i] = 0
}

// keyArena holds keys in power-of-two cells of 16 to 256 bytes, recycled
// through a free list per size: pointer-free, and no allocation once every
// size in use has a free cell.
type keyArena struct {
	buf  []byte
	free [keyClasses][]uint32
}

const keyClasses = 5 // cells of 16, 32, 64, 128 and 256 bytes

func keyClass(n int) int {
	c := 0
	for 16<<c < n {
		c++
	}
	return c
}

func (a *keyArena) alloc(n int) uint32 {
	c := keyClass(n)
	if f := a.free[c]; len(f) > 0 {
		a.free[c] = f[:len(f)-1]
		return f[len(f)-1]
	}
	off := len(a.buf)
	a.buf = slices.Grow(a.buf, 16<<c)[:off+16<<c]
	return uint32(off)
}

func (a *keyArena) release(off uint32, n int) {
	c := keyClass(n)
	a.free[c] = append(a.free[c], off)
}

// Janitor advances a Memory store's expiry wheel from one goroutine, so
// that an idle store returns the memory of expired entries. It is
// optional: operations reclaim lazily. Stop it to end the goroutine.
type Janitor struct {
	loop *ticker.Loop
}

// NewJanitor starts a goroutine that calls m.Expire with m's clock every
// interval (> 0; a second is plenty: expiry itself does not depend on it).
// Errors wrap ErrInvalidConfig for a nil store or a non-positive interval.
func NewJanitor(m *Memory, interval time.Duration) (*Janitor, error) {
	if m == nil || interval <= 0 {
		return nil, fmt.Errorf("%w: janitor needs a store and a positive interval, got %v", ErrInvalidConfig, interval)
	}
	return &Janitor{loop: ticker.Start(interval, func(time.Time) { m.Expire(m.clockNow()) })}, nil
}

// Stop ends the janitor and waits for its goroutine to return. It may be
// called more than once.
func (j *Janitor) Stop() { j.loop.Stop() }
