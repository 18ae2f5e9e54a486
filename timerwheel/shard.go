package timerwheel

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
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

	nilIndex = math.MaxUint32 // end of a list
	// headBit marks a links.prev that names the list whose first node this
	// is (headBit | list) instead of a previous node, so unlink finds the
	// list's head without a list field in every timer.
	headBit = 1 << 31

	// Timers live in chunks: dense arrays of nodes and of links, so that
	// walking a list whose timers are evenly spaced in the slab is a
	// constant stride the hardware prefetchers follow. Chunk 0 holds 64
	// timers, every later chunk 4096 (112 KiB), so a lightly used wheel
	// stays small and finding a timer's chunk is a compare and a shift.
	// (Blocks of 64 timers spread over one array were measured: with
	// timers a thousand apart in the slab, a list walk no longer had a
	// constant stride and firing cost half as much again.)
	// Growth never copies the slab (which would stall Schedule). A chunk
	// is cut into blocks of 64 timers: one word of the free set, and the
	// unit a lane claims from.
	blockShift  = 6
	blockSize   = 1 << blockShift
	blockMask   = blockSize - 1
	firstChunk  = blockSize // timers of chunk 0
	chunkShift  = 12
	chunkTimers = 1 << chunkShift // timers of every later chunk

	noTick = math.MaxInt64 // "no event" in peek

	// shrinkDelay is how many ticks after the slab last grew it may
	// shrink (about 4 s at the engine's 1 ms tick): a load that comes and
	// goes in bursts keeps its chunks instead of freeing and allocating
	// them at every burst.
	shrinkDelay = 4096

	// stWheel is the low bit of a timer's state word: set while the timer
	// is on a list of the wheel. The other 31 bits are its generation.
	stWheel = 1
	genMask = 1<<31 - 1
)

func nextGen(g uint32) uint32 { return (g + 1) & genMask }

// node is a timer's deadline and id, 16 bytes.
type node struct {
	deadline int64  // ticks since Start, rounded up so a timer never fires early
	id       uint64 // the caller's id, handed back to fire
}

// links are a timer's list pointers and its state word, 12 bytes, in an
// array of their own: walking a list chases only these (five to a cache
// line) while the loads of the nodes it visits overlap; against one 32-byte
// node this halved the cost per fired timer with scattered deadlines.
// Firing a timer reads its next link and its state, and Schedule through a
// lane writes its generation and reads its state, so the two share a line.
// While a timer is staged (see lane) next holds its generation instead. The fields are written one by one, never as a
// struct: state is read and CAS'd without the lock.
type links struct {
	next  uint32 // next timer in the list, or nilIndex
	prev  uint32 // previous timer in the list, or headBit|list for the first
	state uint32 // see block; read with block.state, written with shard.setState
}

// block describes 64 timers of a chunk: views of their nodes and links,
// the index of the first, and the lane that owns them. The chunk's arrays
// hold no Go pointers, so the garbage collector never walks them (the
// fastcache and bigcache reasoning); the descriptors are a pointer pair
// per 64 timers.
//
// A state word is gen<<1 | stWheel. Its transitions are the whole
// concurrency story of a timer:
//
//   - idle(g) → wheel(g): Schedule's locked path, or a drain moving a
//     staged timer onto the wheel (a CAS, racing Cancel);
//   - idle(g) → idle(g+1): Cancel of a staged timer (a CAS, without the
//     lock);
//   - wheel(g) → idle(g+1): fire or Cancel, under the shard lock.
//
// A staged timer keeps the state idle(g) it had when it was free; what
// tells it apart is that Schedule has returned a Handle of generation g,
// which no free timer has (every end of a timer bumps the generation).
type block struct {
	nodes *[blockSize]node
	links *[blockSize]links
	base  uint32       // index of nodes[0]
	owner atomic.Int32 // 1 + the index of the lane that owns the block, or 0; written under the shard lock
}

// state reads timer k's state word. Atomic, since Cancel and the lanes
// read and CAS it without the lock.
func (b *block) state(k int) uint32 { return atomic.LoadUint32(&b.links[k].state) }

// setState writes a timer's state word; the shard lock is held. Atomic,
// since Cancel reads the word without the lock.
func (s *shard) setState(l *links, v uint32) { atomic.StoreUint32(&l.state, v) }

// chunk is one allocation of timers.
type chunk struct {
	nodes  []node
	links  []links
	blocks []block // descriptors of its blocks
}

// chunkPos returns the chunk of timer i and its offset in the chunk.
func chunkPos(i uint32) (int, uint32) {
	if i < firstChunk {
		return 0, i
	}
	j := i - firstChunk
	return 1 + int(j>>chunkShift), j & (chunkTimers - 1)
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

	cur      int64   // ticks since Start processed: every timer due at or before cur has been handed out
	epoch    uint32  // which due list Schedule files past deadlines on
	count    int     // timers on the wheel (staged ones join at the next drain)
	free     freeSet // free timers of blocks no lane owns
	used     uint32  // blocks handed out of the slab (the high-water mark)
	capacity uint32  // timers the slab may hold: MaxCapacity (tests lower it)
	genSeed  uint32  // generation of the timers of a new chunk (see maybeShrink)
	grewAt   int64   // cur when the slab last grew

	bitmap [levels]uint64                 // bit s of level L set ⇔ slot s of level L is non-empty
	heads  [levels]*[slotsPerLevel]uint32 // first timer of each slot, or nilIndex; a level's array is made at its first use
	due    [2]uint32                      // first timer of the two due lists

	blocks []*block // the slab, by block number, for lock holders
	chunks []chunk
	// dir is blocks for Cancel, which reads it without the lock: each
	// entry is set before the header that covers it is published, and
	// cleared when its chunk is given back.
	dir atomic.Pointer[[]atomic.Pointer[block]]

	lanes []lane // per-P staging, one per P at New

	_ [64]byte // keep the next shard's lock off this cache line
}

func (s *shard) init(capacity uint32, lanes int) {
	s.capacity = capacity
	s.free.init(0)
	s.due = [2]uint32{nilIndex, nilIndex}
	s.lanes = make([]lane, lanes)
}

// headRef returns where the first timer of a list is kept; the list's
// level array must exist (it does once anything was linked on it).
func (s *shard) headRef(list uint32) *uint32 {
	if list >= wheelLists {
		return &s.due[list-wheelLists]
	}
	return &s.heads[list>>slotBits][list&slotMask]
}

// ln returns the links of timer i.
func (s *shard) ln(i uint32) *links {
	c, o := chunkPos(i)
	return &s.chunks[c].links[o]
}

// blockAt returns block number b for a lock holder, nil if the slab does
// not reach it (a stale or forged Handle).
func (s *shard) blockAt(b uint32) *block {
	if int(b) >= len(s.blocks) {
		return nil
	}
	return s.blocks[b]
}

// blockLF is blockAt without the lock.
func (s *shard) blockLF(b uint32) *block {
	d := s.dir.Load()
	if d == nil || int(b) >= len(*d) {
		return nil
	}
	return (*d)[b].Load()
}

// grow adds the next chunk to the slab; false when the slab holds capacity
// timers already.
func (s *shard) grow() bool {
	first := uint32(len(s.blocks)) << blockShift // first timer of the new chunk
	limit := uint32((uint64(s.capacity) + blockSize - 1) &^ blockMask)
	if first >= limit {
		return false
	}
	s.grewAt = s.cur
	n := uint32(chunkTimers)
	if len(s.chunks) == 0 {
		n = firstChunk
	}
	n = min(n, limit-first)
	ch := chunk{nodes: make([]node, n), links: make([]links, n), blocks: make([]block, n/blockSize)}
	if s.genSeed != 0 {
		for k := range ch.links {
			ch.links[k].state = s.genSeed << 1 // not yet published
		}
	}
	var d []atomic.Pointer[block]
	if p := s.dir.Load(); p != nil {
		d = *p
	}
	nb := len(ch.blocks)
	if cap(d) < len(d)+nb {
		nd := make([]atomic.Pointer[block], len(d), 2*(len(d)+nb))
		for i := range d {
			nd[i].Store(d[i].Load())
		}
		d = nd
	}
	d = d[:len(d)+nb]
	for k := range ch.blocks {
		b := &ch.blocks[k]
		b.nodes = (*[blockSize]node)(ch.nodes[k*blockSize:])
		b.links = (*[blockSize]links)(ch.links[k*blockSize:])
		b.base = first + uint32(k)*blockSize
		d[len(s.blocks)].Store(b)
		s.blocks = append(s.blocks, b)
	}
	s.chunks = append(s.chunks, ch)
	s.dir.Store(&d)
	s.free.grow(uint32(len(s.blocks)) << blockShift)
	return true
}

// freshBlock hands out the next block never used since the slab last
// grew to it, with the bits of its timers below capacity; nil if there is
// none and growing is not allowed (lanes never allocate) or not possible.
func (s *shard) freshBlock(mayGrow bool) (*block, uint64) {
	if s.used == uint32(len(s.blocks)) && (!mayGrow || !s.grow()) {
		return nil, 0
	}
	b := s.blocks[s.used]
	s.used++
	n := min(uint64(blockSize), uint64(s.capacity)-uint64(b.base))
	return b, math.MaxUint64 >> (64 - n)
}

// alloc takes the lowest free timer, or a fresh block's first (putting the
// rest in the free set), growing the slab if need be; false at capacity.
func (s *shard) alloc() (*block, int, bool) {
	if i, ok := s.free.take(); ok {
		return s.blocks[i>>blockShift], int(i & blockMask), true
	}
	b, m := s.freshBlock(true)
	if b == nil {
		return nil, 0, false
	}
	rest := m &^ 1
	s.free.addWord(b.base>>blockShift, rest)
	return b, 0, true
}

// release ends the life of timer i (links l, chunk ch), which is on no
// list: its generation moves on, so every Handle to it goes stale, and it
// returns to the free set, or to its lane if a lane owns the block.
func (s *shard) release(ch *chunk, i uint32, l *links, g uint32) {
	s.setState(l, nextGen(g)<<1)
	s.count--
	_, o := chunkPos(i)
	if ch.blocks[o>>blockShift].owner.Load() == 0 {
		s.free.add(i)
	}
}

// releaseBlock is release for timer k of block b.
func (s *shard) releaseBlock(b *block, k int, g uint32) {
	i := b.base + uint32(k)
	c, _ := chunkPos(i)
	s.release(&s.chunks[c], i, &b.links[k], g)
}

// maybeShrink gives the top chunk back to the Go heap while every timer of
// it and of the chunk below is free and the slab has not grown for
// shrinkDelay ticks: the slab follows the timers pending (SPEC R15),
// keeping one empty chunk as a spare so that a load hovering at a chunk
// boundary does not allocate and free a chunk each time — no spare once
// no timer is pending, so an idle wheel keeps at most its first chunk. Lowest-first
// reuse keeps live timers at the bottom, so the top chunks empty out after
// a burst. Whether a chunk is free is read off the free set (a word a
// block) when Advance finishes, rather than counted on every free.
func (s *shard) maybeShrink() {
	if s.cur-s.grewAt < shrinkDelay {
		return
	}
	for n := len(s.chunks); n >= 2 && s.chunkFree(n-1) && (s.count == 0 || s.chunkFree(n-2)); n-- {
		s.dropTop()
	}
}

// chunkFree reports whether every timer chunk c has handed out is in the
// free set (none pending, none owned by a lane).
func (s *shard) chunkFree(c int) bool {
	ch := &s.chunks[c]
	for k := range ch.blocks {
		b := &ch.blocks[k]
		w := b.base >> blockShift
		if w >= s.used {
			break
		}
		n := min(uint64(blockSize), uint64(s.capacity)-uint64(b.base))
		if b.owner.Load() != 0 || s.free.word(w) != math.MaxUint64>>(64-n) {
			return false
		}
	}
	return true
}

// dropTop releases the top chunk, all of whose timers are free.
func (s *shard) dropTop() {
	ch := s.chunks[len(s.chunks)-1]
	// A later chunk at these indexes starts past every generation used
	// here, so a Handle kept from this chunk never matches its timers.
	for k := range ch.links {
		s.genSeed = max(s.genSeed, nextGen(atomic.LoadUint32(&ch.links[k].state)>>1))
	}
	first := ch.blocks[0].base >> blockShift // first block number
	for w := first; w < s.used; w++ {
		s.free.clearWord(w)
	}
	s.used = min(s.used, first)
	clear(s.blocks[first:])
	s.blocks = shrunk(s.blocks[:first])
	d := *s.dir.Load()
	for i := first; i < uint32(len(d)); i++ {
		d[i].Store(nil)
	}
	d = d[:first]
	if cap(d) > 4*len(d)+16 {
		nd := make([]atomic.Pointer[block], len(d), 2*len(d))
		for i := range d {
			nd[i].Store(d[i].Load())
		}
		d = nd
	}
	s.dir.Store(&d)
	s.chunks[len(s.chunks)-1] = chunk{}
	s.chunks = shrunk(s.chunks[:len(s.chunks)-1])
	s.free.shrink(first << blockShift)
}

// shrunk returns x, or a copy of it with less spare capacity if it has
// more than three quarters spare, so the slab's indexes shrink with it.
func shrunk[T any](x []T) []T {
	if cap(x) <= 4*len(x)+16 {
		return x
	}
	return append(make([]T, 0, 2*len(x)), x...)
}

// dueList is where Schedule puts deadlines at or before cur; Advance drains
// the other one, so a timer scheduled while an Advance runs (from fire or
// from another goroutine) with a past deadline waits for the next Advance
// instead of looping inside this one.
func (s *shard) dueList() uint32 { return listDueA + s.epoch }

func (s *shard) drainList() uint32 { return listDueA + (s.epoch ^ 1) }

// insert files timer i, whose deadline is set: at or before cur on the
// due list, else on the wheel.
func (s *shard) insert(i uint32) {
	c, o := chunkPos(i)
	if s.chunks[c].nodes[o].deadline <= s.cur {
		s.link(s.dueList(), i)
		return
	}
	s.place(i)
}

// place files timer i, with deadline >= cur, on the wheel. The level is the
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
func (s *shard) place(i uint32) {
	c, o := chunkPos(i)
	d := s.chunks[c].nodes[o].deadline
	level := uint32(0)
	// The top level always reaches: its slot numbers are 0 to 7.
	for ; level < levels-1; level++ {
		shift := level * slotBits
		if uint64(d>>shift)-uint64(s.cur>>shift) < slotsPerLevel {
			break
		}
	}
	shift := level * slotBits
	list := level*slotsPerLevel + uint32(d>>shift)&slotMask
	s.bitmap[level] |= 1 << (list & slotMask)
	if s.heads[level] == nil {
		h := new([slotsPerLevel]uint32)
		for i := range h {
			h[i] = nilIndex
		}
		s.heads[level] = h
	}
	s.link(list, i)
}

// link pushes timer i on the front of a list. Pushing at the front touches
// only the old head, which was itself the most recent insert into that list
// and so is usually still in cache; appending would touch the cold tail too.
// The price is that timers due in the same tick fire in no particular order.
// The link fields are written one by one: state shares the struct and is
// read without the lock.
func (s *shard) link(list uint32, i uint32) {
	hp := s.headRef(list)
	h := *hp
	l := s.ln(i)
	l.next, l.prev = h, headBit|list
	if h != nilIndex {
		s.ln(h).prev = i
	}
	*hp = i
}

// unlink removes timer i from its list in O(1) and keeps the slot bitmap
// exact.
func (s *shard) unlink(i uint32) {
	l := s.ln(i)
	next, prev := l.next, l.prev
	if prev&headBit != 0 {
		list := prev &^ headBit
		*s.headRef(list) = next
		if next == nilIndex && list < wheelLists {
			s.bitmap[list>>slotBits] &^= 1 << (list & slotMask)
		}
	} else {
		s.ln(prev).next = next
	}
	if next != nilIndex {
		s.ln(next).prev = prev
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
// The first call of an Advance moves staged timers onto the wheel, flips
// the due lists (see flip) and brings cur up to the previous Advance's
// limit if nothing is due by then: the merge leaves a shard's cur at its
// last event rather than spend a lock per shard on it at the end of every
// Advance. A cur that lags is harmless (a timer due between it and the
// real time is filed ahead of cur and fires in the next Advance); catching
// up keeps NextDeadline tight and new timers on low levels.
func (s *shard) peek(first bool, prevLimit int64) int64 {
	s.mu.Lock()
	s.drainLanes()
	if first {
		s.flip()
		if prevLimit > s.cur {
			if e, _ := s.nextEvent(); e > prevLimit {
				s.cur = prevLimit
			}
		}
	}
	e := int64(-1)
	if s.due[s.epoch^1] == nilIndex {
		e, _ = s.nextEvent()
	}
	s.maybeShrink()
	s.mu.Unlock()
	return e
}

// earliest is peek for NextDeadline: timers on either due list are due at
// cur.
func (s *shard) earliest() int64 {
	s.mu.Lock()
	s.drainLanes()
	e := s.cur
	if s.due[0] == nilIndex && s.due[1] == nilIndex {
		e, _ = s.nextEvent()
	}
	s.mu.Unlock()
	return e
}

// flip starts an Advance, under the lock of its first collect or peek,
// after that call has drained the lanes: past-due timers scheduled so far
// are fired by it, those scheduled from now on wait for the next one.
func (s *shard) flip() {
	s.epoch ^= 1
}

// collect hands out up to len(buf) ids of timers due at or before limit and
// frees their timers. All ids of one call are due in the same tick (or are
// past-due from the drain list), so that timers fire in deadline order even
// when fire schedules new timers between calls. It returns 0 when nothing
// is due at or before limit, having moved cur up to limit. The first call
// of an Advance flips the due lists. Every call first moves staged timers
// onto the wheel, so one that fire scheduled for later in this Advance's
// span fires in it.
func (s *shard) collect(limit int64, buf []uint64, first bool) int {
	s.mu.Lock()
	s.drainLanes()
	if first {
		s.flip()
	}
	if list := s.drainList(); s.due[list-listDueA] != nilIndex {
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
	s.maybeShrink()
	s.mu.Unlock()
	return 0
}

// pop moves up to len(buf) ids off the front of a list into buf and frees
// their timers: from here on the timers count as fired, so Cancel and Reset
// on them report false.
func (s *shard) pop(list uint32, buf []uint64) int {
	n := 0
	hp := s.headRef(list)
	i := *hp
	for i != nilIndex && n < len(buf) {
		c, o := chunkPos(i)
		ch := &s.chunks[c]
		buf[n] = ch.nodes[o].id
		n++
		l := &ch.links[o]
		next := l.next
		s.release(ch, i, l, atomic.LoadUint32(&l.state)>>1)
		i = next
	}
	*hp = i
	if i != nilIndex {
		s.ln(i).prev = headBit | list
	} else if list < wheelLists {
		s.bitmap[list>>slotBits] &^= 1 << (list & slotMask)
	}
	return n
}

// cascade re-files every timer of a higher-level slot that cur has just
// reached; each lands on a lower level (or on the level-0 slot at cur if
// due now), which is what keeps precision to one tick.
func (s *shard) cascade(list uint32) {
	hp := s.headRef(list)
	i := *hp
	*hp = nilIndex
	s.bitmap[list>>slotBits] &^= 1 << (list & slotMask)
	for i != nilIndex {
		next := s.ln(i).next
		s.place(i)
		i = next
	}
}
