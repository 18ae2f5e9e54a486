package timerwheel

import (
	"math/bits"
	"sync/atomic"
	_ "unsafe" // go:linkname
)

// Staging: Schedule without the shard lock.
//
// Each shard has one lane per P (GOMAXPROCS at New). A lane owns one block of 64 timers at a time. Schedule pins its
// goroutine to its P (runtime.procPin, as sync.Pool does), takes the lowest
// free timer of the P's lane from a plain bit mask, writes the deadline, id
// and generation into the timer, and publishes it by setting its bit in the
// lane's staged word: one atomic instruction, where the locked path costs
// two (Lock, Unlock) plus the work of placing the timer under the lock.
// The lock holder (Advance, NextDeadline, Len, Reset, the lane's own
// refill) takes the staged word and moves its timers onto the wheel, a
// batch at a time.
//
// Cancel of a staged timer is one CAS on its state word, idle(g) to
// idle(g+1), racing the drain's idle(g) to wheel(g): exactly one wins, so
// a Cancel that returns true always beats the fire, as on the locked path.
// The cancelled timer stays claimed by the lane until its next refill,
// which takes back every timer of the block that is idle again (cancelled,
// or fired by Advance) under the shard lock, a lock round trip per 64
// Schedules. While a lane owns a block, its timers never enter the free
// set.
//
// The owner's fields (mask, blk) are touched only by the goroutine pinned
// to the lane's P, or under the shard lock by that goroutine; see owned.go
// for how the race detector is told.

// lane is one P's staging area in one shard, a cache line to itself.
type lane struct {
	staged atomic.Uint64 // bits of blk published by Schedule and not yet drained
	mask   ownedWord     // owner: bits of blk free to claim
	blk    ownedBlock    // the block the lane owns, or nil; set under the shard lock
	_      [64 - 24]byte
}

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// stage files a timer through the calling P's lane; false when the lane
// cannot (no lane for this P, no free timer without taking the lock
// against a holder or growing the slab): the caller takes the locked path.
func (s *shard) stage(si int, t int64, id uint64) (Handle, bool) {
	pid := procPin()
	if pid >= len(s.lanes) {
		procUnpin()
		return 0, false
	}
	ln := &s.lanes[pid]
	m := ln.mask.load()
	if m == 0 {
		if m = s.refill(ln, pid); m == 0 {
			procUnpin()
			return 0, false
		}
	}
	k := bits.TrailingZeros64(m)
	ln.mask.store(m & (m - 1))
	b := ln.blk.load()
	g := b.state(k) >> 1
	b.nodes[k] = node{deadline: t, id: id}
	b.links[k].next = g
	ln.staged.Or(1 << k)
	procUnpin()
	return makeHandle(g, si, b.base+uint32(k)), true
}

// refill gives the pinned caller's lane timers to claim and returns their
// bits, or 0. It only tries the lock: a goroutine pinned to its P must not
// block.
func (s *shard) refill(ln *lane, li int) uint64 {
	if !s.mu.TryLock() {
		return 0
	}
	m := s.refillLocked(ln, li)
	s.mu.Unlock()
	return m
}

// refillLocked gives the idle timers of the lane's block (cancelled or
// fired since the last refill, or never claimed) to the free set and takes
// the lowest block with free timers — often the same one — or a fresh
// block of the slab, if the lowest has fewer than half its timers free and
// the slab has a fresh block without growing: every refill costs a lock
// round trip and a scan of the block, so a lane wants many timers per
// refill. Taking the lowest block keeps the lanes at the bottom of the
// slab, so that the top chunks empty out after a burst (maybeShrink).
func (s *shard) refillLocked(ln *lane, li int) uint64 {
	if b := ln.blk.load(); b != nil {
		s.drainLane(ln)
		var m uint64
		for k := range b.links {
			if b.state(k)&stWheel == 0 {
				m |= 1 << k
			}
		}
		b.owner.Store(0)
		s.free.addWord(b.base>>blockShift, m)
		ln.blk.store(nil)
	}
	var b *block
	var m uint64
	w, ok := s.free.lowestWord()
	if ok && (bits.OnesCount64(s.free.levels[0][w]) >= blockSize/2 || s.used == uint32(len(s.blocks))) {
		b, m = s.blocks[w], s.free.clearWord(w)
	} else if b, m = s.freshBlock(false); b == nil {
		ln.mask.store(0)
		return 0
	}
	b.owner.Store(int32(li + 1))
	ln.blk.store(b)
	ln.mask.store(m)
	return m
}

// drainLanes moves every lane's staged timers onto the wheel. Lock held.
func (s *shard) drainLanes() {
	for l := range s.lanes {
		if s.lanes[l].staged.Load() != 0 {
			s.drainLane(&s.lanes[l])
		}
	}
}

// drainLane moves one lane's staged timers onto the wheel, each with a CAS
// that a concurrent Cancel may have won. Lock held.
func (s *shard) drainLane(ln *lane) {
	staged := ln.staged.Swap(0)
	if staged == 0 {
		return
	}
	b := ln.blk.load()
	for staged != 0 {
		k := bits.TrailingZeros64(staged)
		staged &= staged - 1
		g := b.links[k].next
		// Load first: a staged timer is often cancelled before the
		// drain, and the failed CAS would cost as much as the Cancel did.
		if st := &b.links[k].state; atomic.LoadUint32(st) == g<<1 && atomic.CompareAndSwapUint32(st, g<<1, g<<1|stWheel) {
			s.count++
			s.insert(b.base + uint32(k))
		}
	}
}
