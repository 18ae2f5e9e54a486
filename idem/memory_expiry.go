package idem

import (
	"errors"
	"math"
	"time"

	"github.com/readretry/readretry/timerwheel"
)

// Expiry of a Memory store's entries (one of memory.go's jobs): every
// entry records its expiry and every operation compares it with the clock;
// the timing wheel only reclaims the memory of dead entries (see Memory).

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

// timerID packs the slot's generation, its index and its shard.
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
