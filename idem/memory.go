package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/timerwheel"
)

// The memory store's code is split by job: this file holds its
// configuration, layout and Store methods; memory_index.go the per-shard
// hash index, memory_arena.go the key arena, memory_expiry.go expiry and
// the timing wheel, memory_quota.go scopes, quotas and eviction, and
// memory_janitor.go the optional background expiry.

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
	// heap the store holds: Capacity × (at most 352 bytes of slot, index,
	// result header and key cell, plus a few dozen bytes of scope ledger
	// per scope) + MaxBytes (SPEC I5). With the defaults, one scope holds
	// at most 4,096 entries and 4 MiB of results: a sixteenth of the
	// store, whoever floods it.
	MaxBytes int
	// ScopeQuota is the most live entries — claims, pending or done, and
	// tokens — one scope (the scope of a key made by ScopedKey) may hold:
	// a Claim or Issue of a scope at its quota returns ErrQuota
	// (Middleware: 429). 0 means Capacity/16 (at least 1); a negative
	// value turns quotas off, bytes included. Keys without a scope, or
	// with the empty one (GlobalScope: one party), are not counted
	// (SPEC I5 round 3).
	ScopeQuota int
	// ScopeMaxBytes is the most bytes of stored results one scope may
	// hold: a Complete that would pass it first evicts the scope's own
	// oldest done entries in its shard, and fails with ErrTooLarge if
	// that is not enough (Middleware then stores the answer without its
	// body). 0 means MaxBytes/16, raised to MaxResult if that is more; a
	// value set below MaxResult is refused (ErrInvalidConfig).
	ScopeMaxBytes int
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
// slab of 64-byte slots (hash, fence, expiry, timer handle, scope, key
// offset and length, state, generation, done-list links, completion
// number) and a byte arena holding the keys in
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
// # A full store, and tenants
//
// Each scope (SPEC I5 round 3) has quotas in entries and in bytes of
// results, on by default (MemoryConfig.ScopeQuota, ScopeMaxBytes), and
// each shard keeps each scope's completed entries in order of completion.
// A scope at its entry quota is refused (ErrQuota); a result past its
// byte quota evicts that scope's oldest done entries. A claim that finds
// its shard at its share of Capacity, or a result that would take it past
// its share of MaxBytes, evicts the oldest done entry of the claimant's
// own scope, or — if it has none there — of the scope holding the most
// there; only a shard holding nothing but pending claims and tokens
// answers ErrFull. So one scope's flood evicts or refuses only its own
// entries, and junk that was answered and stored never locks out new
// claims; [MemoryStats].Evictions counts each answer dropped before its
// ttl. See memory_quota.go.
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
	quota      int // entries per scope; < 0: no quotas
	scopeMax   int // result bytes per scope
	stripes    []scopeStripe

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
	// done holds, per scope id, the scope's Done slots in this shard in
	// order of completion (see memory_quota.go); seq numbers completions.
	done map[uint64]doneList
	seq  uint32
	_    [64]byte // keeps neighbouring shards' mutexes off one cache line
}

// memSlot is one entry; it holds no pointers (see Memory).
type memSlot struct {
	hash       uint64
	fence      Fence
	expires    int64 // nanoseconds since Memory.start
	timer      timerwheel.Handle
	scope      uint64 // scope id (scopeID); 0: unscoped
	keyOff     uint32
	gen        uint32 // bumped when the slot is freed or its timer replaced
	prev, next uint32 // done list neighbours (index+1; noSlot ends it)
	seq        uint32 // completion number, for eviction ties
	keyLen     uint16
	state      uint8
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
	quota := c.ScopeQuota
	if quota == 0 {
		quota = max(1, perShard*shards/16)
	}
	scopeBytes := c.ScopeMaxBytes
	if scopeBytes == 0 {
		scopeBytes = shardBytes * shards / 16
	}
	if quota > 0 && scopeBytes < maxResult {
		if c.ScopeMaxBytes != 0 {
			return nil, fmt.Errorf("%w: ScopeMaxBytes %d is below MaxResult %d", ErrInvalidConfig, c.ScopeMaxBytes, maxResult)
		}
		scopeBytes = maxResult
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
		quota:     quota,
		scopeMax:  scopeBytes,
		stripes:   make([]scopeStripe, scopeStripes),
	}
	for i := range m.stripes {
		m.stripes[i].use = make(map[uint64]scopeUse)
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
		m.shards[i].done = make(map[uint64]doneList)
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

func (m *Memory) shardOf(h uint64) int { return int(h >> m.shardShift) }

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
	s := &sh.slots[slot]
	sid := s.scope
	old := 0
	if s.state == stDone {
		old = len(sh.results[slot])
	}
	// The scope's byte quota: its own oldest done entries in this shard
	// give way; if they cannot make room, nothing changes.
	over := 0
	if sid != 0 && m.quota >= 0 {
		over = int(m.scopeBytes(sid)) - old + len(result) - m.scopeMax
		if own := int(sh.done[sid].bytes) - old; over > own {
			return ErrTooLarge
		}
	}
	if err := m.retime(sh, si, slot, exp); err != nil {
		return err
	}
	if s.state == stDone {
		// Completed again by its holder: it moves to the tail.
		sh.unlinkDone(slot)
	}
	for over > 0 {
		v := sh.done[sid].head
		over -= len(sh.results[v-1])
		m.evict(sh, v, now)
	}
	// The shard's share of MaxBytes: the claimant's scope gives way
	// first, then the scope holding the most bytes here. maxResult is
	// at most byteLimit, so evicting the others always makes room.
	for sh.bytes-old+len(result) > sh.byteLimit {
		v := sh.victim(sid, true)
		if v == noSlot {
			break
		}
		m.evict(sh, v, now)
	}
	sh.bytes += len(result) - old
	m.account(sid, 0, int64(len(result)-old))
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

// insert stores a new entry; the caller holds sh.mu and has checked that
// the key is absent.
func (m *Memory) insert(sh *memShard, si int, h uint64, key []byte, st uint8, exp, now int64) (Fence, error) {
	sid := m.scopeID(key)
	if !m.charge(sid) {
		m.quotaRefusals.Add(1)
		return 0, ErrQuota
	}
	if sh.count >= sh.limit {
		v := sh.victim(sid, false)
		if v == noSlot {
			m.account(sid, -1, 0)
			return 0, ErrFull
		}
		m.evict(sh, v, now)
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
		m.account(sid, -1, 0)
		return 0, wheelErr(err)
	}
	sh.fences++
	fence := Fence(sh.fences<<idShardBits | uint64(si))
	s.hash = h
	s.fence = fence
	s.expires = exp
	s.timer = th
	s.scope = sid
	s.keyOff = sh.keys.alloc(len(key))
	s.keyLen = uint16(len(key))
	s.state = st
	copy(sh.keys.buf[s.keyOff:], key)
	sh.count++
	sh.place(slot)
	return fence, nil
}

// remove frees slot; cancel says whether its timer is still pending. The
// entry's scope gets its entry and bytes back.
func (m *Memory) remove(sh *memShard, slot uint32, cancel bool) {
	s := &sh.slots[slot]
	if cancel {
		m.wheel.Cancel(s.timer)
	}
	sh.unplace(slot)
	n := len(sh.results[slot])
	if s.state == stDone {
		sh.unlinkDone(slot)
		sh.bytes -= n
	}
	m.account(s.scope, -1, -int64(n))
	sh.keys.release(s.keyOff, int(s.keyLen))
	sh.results[slot] = nil
	*s = memSlot{gen: s.gen + 1}
	sh.free = append(sh.free, slot)
	sh.count--
}
