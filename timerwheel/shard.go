package timerwheel

import (
	"math"
	"math/bits"
	"sync"
)

// Geometry of one shard. Level L has 64 slots of 64^L ticks each; eleven
// levels reach 2^66 ticks, past every deadline a tick count can hold
// (2^63), so no deadline is ever beyond the top level and none needs to be
// parked or clamped. The levels above the sixth (2^36 ticks, 795 days at
// 1 ms) are empty in practice and cost a zero test each in nextEvent.
const (
	slotBits      = 6
	slotsPerLevel = 1 << slotBits
	slotMask      = slotsPerLevel - 1
	levels        = 11

	wheelLists = levels * slotsPerLevel // one list per slot
	listDueA   = wheelLists             // past deadlines, one of two epochs
	listDueB   = wheelLists + 1         // past deadlines, the other epoch
	numLists   = wheelLists + 2
	listFree   = math.MaxUint32 // node is free (in freeSet) or was never used

	nilIndex = math.MaxUint32 // end of a list

	// Nodes are allocated in chunks of 4096 (96 KiB, and 32 KiB of links)
	// so that a wheel with a large capacity costs memory only for the
	// timers it has actually held, and growth never copies the slab (which
	// would stall Schedule).
	chunkShift = 12
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1

	noTick = math.MaxInt64 // "no event" in peek
)

// node is one timer, 24 bytes. Neither it nor its links hold Go pointers,
// so the slab is a noscan allocation the garbage collector never walks (the
// fastcache/bigcache reasoning).
type node struct {
	deadline int64  // ticks since Start, rounded up so a timer never fires early
	id       uint64 // the caller's id, handed back to fire
	gen      uint32 // bumped when the node is freed; a Handle carries it
	list     uint32 // list the node is on, or listFree
}

// links are a node's list pointers, 8 bytes, in an array of their own:
// walking a list chases only these (8 to a cache line, 4 MB for 500,000
// timers), and the loads of the nodes it visits do not hold up the walk.
// Measured against one 32-byte node, this halved the cost per fired timer
// with scattered deadlines. A 16/16 split (deadline, next, prev | id, gen)
// that spares cascading the node was measured too and was slower: the
// walk over 16-byte entries misses the cache more than over 8-byte links.
type links struct {
	next uint32 // next node in the list, or nilIndex
	prev uint32 // previous node in the list, or nilIndex (head)
}

// shard is a complete hierarchical wheel with its own lock. A Wheel has one
// or more of them; timers are spread over them by id.
//
// Invariant, for the pending timer of deadline d on level L: d >= cur, and
// d's slot number on L (d >> 6L) is 1 to 63 ahead of cur's, or 0 ahead
// when cur has just reached that slot (and the timers are due now, or due
// to cascade now). Each non-empty slot thus names one start time
// after cur, the next event is the earliest of them, and moving cur to any
// time before that keeps the invariant, which is how Advance jumps over
// idle time.
type shard struct {
	mu sync.Mutex

	cur      int64 // ticks since Start processed: every timer due at or before cur has been handed out
	epoch    uint32
	count    int              // pending timers
	free     freeSet          // freed timers below used
	used     uint32           // nodes ever handed out of the slab (high-water mark)
	capacity uint32           // limit of used
	bitmap   [levels]uint64   // bit s of level L set ⇔ slot s of level L is non-empty
	chunks   [][]node         // the slab; chunk c holds nodes c<<chunkShift ...
	lchunks  [][]links        // their links, chunked the same way
	heads    [numLists]uint32 // first node of each list, or nilIndex
	_        [64]byte         // keep the next shard's lock off this cache line
}

func (s *shard) init(capacity uint32) {
	s.capacity = capacity
	s.free.init(capacity)
	for i := range s.heads {
		s.heads[i] = nilIndex
	}
	s.chunks = make([][]node, 0, (capacity+chunkSize-1)/chunkSize)
	s.lchunks = make([][]links, 0, (capacity+chunkSize-1)/chunkSize)
}

// at returns node i. i must have been handed out by alloc.
func (s *shard) at(i uint32) *node {
	return &s.chunks[i>>chunkShift][i&chunkMask]
}

func (s *shard) ln(i uint32) *links {
	return &s.lchunks[i>>chunkShift][i&chunkMask]
}

// lookup returns node i if i is in the slab, for checking a Handle that may
// be stale or forged.
func (s *shard) lookup(i uint32) *node {
	if i >= s.used {
		return nil
	}
	return s.at(i)
}

// alloc reuses the lowest freed node, or takes the next one out of the
// slab, allocating a new chunk when the slab is exhausted. It reports false
// at capacity.
func (s *shard) alloc() (uint32, *node, bool) {
	if i, ok := s.free.take(); ok {
		return i, s.at(i), true
	}
	if s.used >= s.capacity {
		return 0, nil, false
	}
	i := s.used
	if i&chunkMask == 0 {
		size := min(uint32(chunkSize), s.capacity-i)
		s.chunks = append(s.chunks, make([]node, size))
		s.lchunks = append(s.lchunks, make([]links, size))
	}
	s.used++
	n := s.at(i)
	n.gen = 1 // a fresh node never carries generation 0, so no Handle is 0
	return i, n, true
}

// release frees a node that is on no list and retires its generation, so
// every Handle to it becomes stale.
func (s *shard) release(i uint32, n *node) {
	n.gen++
	if n.gen == 0 {
		n.gen = 1
	}
	n.list = listFree
	s.free.add(i)
	s.count--
}

// dueList is where Schedule puts deadlines at or before cur; Advance drains
// the other one, so a timer scheduled while an Advance runs (from fire or
// from another goroutine) with a past deadline waits for the next Advance
// instead of looping inside this one.
func (s *shard) dueList() uint32 { return listDueA + s.epoch }

func (s *shard) drainList() uint32 { return listDueA + (s.epoch ^ 1) }

// insert files a node whose deadline is set: at or before cur on the due
// list, else on the wheel.
func (s *shard) insert(i uint32, n *node) {
	if n.deadline <= s.cur {
		s.link(s.dueList(), i, n)
		return
	}
	s.place(i, n)
}

// place files a node with deadline >= cur on the wheel. The level is the
// lowest whose 64 slots, counted from cur's slot on that level, reach the
// deadline: level L holds deadlines whose slot number (deadline >> 6L) is
// 1 to 63 ahead of cur's, so its slots form a ring in which every slot but
// cur's own names exactly one span of time. Because the level depends on
// the distance and not on aligned boundaries, timers due shortly after a
// high boundary sit on a low level: no cascade ever moves more than one
// slot's worth of timers (at 1 ms ticks, a 64 ms window on level 1), where
// aligned levels would move every pending timer at once at each 4.1 s
// boundary. A deadline equal to cur (met while cascading) goes to cur's own
// level-0 slot, which Advance is draining.
func (s *shard) place(i uint32, n *node) {
	d := n.deadline
	level := uint32(0)
	// The top level always reaches: its slot numbers are 0 to 7.
	for ; level < levels-1; level++ {
		shift := level * slotBits
		if uint64(d>>shift)-uint64(s.cur>>shift) < slotsPerLevel {
			break
		}
	}
	shift := level * slotBits
	s.linkSlot(level*slotsPerLevel+uint32(d>>shift)&slotMask, i, n)
}

func (s *shard) linkSlot(list uint32, i uint32, n *node) {
	s.bitmap[list>>slotBits] |= 1 << (list & slotMask)
	s.link(list, i, n)
}

// link pushes a node on the front of a list. Pushing at the front touches
// only the old head, which was itself the most recent insert into that list
// and so is usually still in cache; appending would touch the cold tail too.
// The price is that timers due in the same tick fire in no particular order.
func (s *shard) link(list uint32, i uint32, n *node) {
	h := s.heads[list]
	n.list = list
	*s.ln(i) = links{next: h, prev: nilIndex}
	if h != nilIndex {
		s.ln(h).prev = i
	}
	s.heads[list] = i
}

// unlink removes a node from its list in O(1) and keeps the slot bitmap
// exact.
func (s *shard) unlink(i uint32, n *node) {
	l := *s.ln(i)
	if l.prev != nilIndex {
		s.ln(l.prev).next = l.next
	} else {
		s.heads[n.list] = l.next
		if l.next == nilIndex && n.list < wheelLists {
			s.bitmap[n.list>>slotBits] &^= 1 << (n.list & slotMask)
		}
	}
	if l.next != nilIndex {
		s.ln(l.next).prev = l.prev
	}
}

// nextEvent returns the tick of the next thing cur must stop at: a level-0
// slot to fire or a higher slot to cascade, and its level; it is a lower
// bound of the earliest pending deadline on the wheel. A non-empty slot
// that cur has just reached is due at cur; when slots of several levels
// start at the same tick the highest goes first, so its timers join the
// lower slots before those are drained.
func (s *shard) nextEvent() (int64, int) {
	e, at := int64(noTick), 0
	for l := levels - 1; l >= 0; l-- {
		m := s.bitmap[l]
		if m == 0 {
			continue
		}
		shift := uint(l) * slotBits
		c := s.cur >> shift // cur's slot number on this level
		t := s.cur
		if m&(1<<(c&slotMask)) == 0 {
			// The first non-empty slot after cur's, going round the ring.
			k := int64(bits.TrailingZeros64(bits.RotateLeft64(m, -int((c+1)&slotMask)))) + 1
			t = (c + k) << shift
		}
		if t < e {
			e, at = t, l
		}
	}
	return e, at
}

// peek is nextEvent for Advance's merge across shards: -1 when past-due
// timers wait on the drain list, since they go before anything else.
//
// The first call of an Advance flips the due lists (see flip) and brings
// cur up to the previous Advance's limit if nothing is due by then: the
// merge leaves a shard's cur at its last event rather than spend a lock per
// shard on it at the end of every Advance. A cur that lags is harmless (a
// timer due between it and the real time is filed ahead of cur and fires
// in the next Advance); catching up keeps NextDeadline tight and new
// timers on low levels.
func (s *shard) peek(first bool, prevLimit int64) int64 {
	s.mu.Lock()
	if first {
		s.flip()
		if prevLimit > s.cur {
			if e, _ := s.nextEvent(); e > prevLimit {
				s.cur = prevLimit
			}
		}
	}
	e := int64(-1)
	if s.heads[s.drainList()] == nilIndex {
		e, _ = s.nextEvent()
	}
	s.mu.Unlock()
	return e
}

// earliest is peek for NextDeadline: timers on either due list are due at
// cur.
func (s *shard) earliest() int64 {
	s.mu.Lock()
	e := s.cur
	if s.heads[listDueA] == nilIndex && s.heads[listDueB] == nilIndex {
		e, _ = s.nextEvent()
	}
	s.mu.Unlock()
	return e
}

// flip starts an Advance, under the lock of its first collect or peek:
// past-due timers scheduled so far are drained by it, those scheduled from
// now on wait for the next one.
func (s *shard) flip() {
	s.epoch ^= 1
}

// collect hands out up to len(buf) ids of timers due at or before limit and
// frees their nodes. All ids of one call are due in the same tick (or are
// past-due from the drain list), so that timers fire in deadline order even
// when fire schedules new timers between calls. It returns 0 when nothing
// is due at or before limit, having moved cur up to limit. The first call
// of an Advance flips the due lists.
func (s *shard) collect(limit int64, buf []uint64, first bool) int {
	s.mu.Lock()
	if first {
		s.flip()
	}
	if list := s.drainList(); s.heads[list] != nilIndex {
		n := s.pop(list, buf)
		s.mu.Unlock()
		return n
	}
	for {
		e, level := s.nextEvent()
		if e > limit {
			break
		}
		s.cur = e
		if level == 0 {
			n := s.pop(uint32(e&slotMask), buf)
			s.mu.Unlock()
			return n
		}
		s.cascade(uint32(level*slotsPerLevel) + uint32(e>>(uint(level)*slotBits))&slotMask)
	}
	if limit > s.cur {
		s.cur = limit
	}
	s.mu.Unlock()
	return 0
}

// pop moves up to len(buf) ids off the front of a list into buf and frees
// their nodes: from here on the timers count as fired, so Cancel and Reset
// on them report false.
func (s *shard) pop(list uint32, buf []uint64) int {
	n := 0
	i := s.heads[list]
	for i != nilIndex && n < len(buf) {
		nd := s.at(i)
		buf[n] = nd.id
		n++
		next := s.ln(i).next
		s.release(i, nd)
		i = next
	}
	s.heads[list] = i
	if i != nilIndex {
		s.ln(i).prev = nilIndex
	} else if list < wheelLists {
		s.bitmap[list>>slotBits] &^= 1 << (list & slotMask)
	}
	return n
}

// cascade re-files every timer of a higher-level slot that cur has just
// reached; each lands on a lower level (or on the level-0 slot at cur if
// due now), which is what keeps precision to one tick.
func (s *shard) cascade(list uint32) {
	i := s.heads[list]
	s.heads[list] = nilIndex
	s.bitmap[list>>slotBits] &^= 1 << (list & slotMask)
	for i != nilIndex {
		n := s.at(i)
		next := s.ln(i).next
		s.place(i, n)
		i = next
	}
}
