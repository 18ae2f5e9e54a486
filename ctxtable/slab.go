package ctxtable

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Storage for contexts lives in chunks: big, pointer-free slices that the
// garbage collector marks as one object each and never scans. A chunk is cut
// into equal blocks (meta slots, or payload blocks of one size class); a
// block is named by a uint32 id = chunk<<shift | index, so the table's index
// and the slot headers hold numbers, never pointers (docs/design.md,
// "Hot-path rules"; SPEC R15).
//
// Chunk sizes follow the population: a new chunk holds about half as many
// blocks as are in use (a power of two), from chunkMinBytes up to
// chunkMaxBytes. A shard of an idle zone costs a few KiB; a full table of
// 500,000 contexts is ~1,000 heap objects, so a GC cycle barely notices it.
//
// Free blocks of a chunk are chained through their own first bytes, so the
// free lists cost no memory. A chunk whose last block is freed goes back to
// the Go heap, except one empty chunk per set kept as a spare so that an
// insert/delete pair at a chunk boundary does not allocate and free a chunk
// every time.

const (
	chunkMinBytes = 4 << 10
	chunkMaxBytes = 256 << 10
)

// chunkInfo is the bookkeeping of one chunk.
type chunkInfo struct {
	free uint32 // 1 + index of the first block on the chunk's free list; 0: list empty
	bump uint32 // blocks at or above bump have not been handed out since the chunk was (re)made
	used uint32 // blocks handed out and not yet returned
	per  uint32 // blocks in the chunk (a power of two); 0: released, number waits in holes
	prev int32  // neighbours on the list of chunks with free blocks; -1: none
	next int32
}

// chunkSet does the chunk bookkeeping shared by the meta slab and the payload
// slabs; the caller owns the storage and the intrusive free-list links.
type chunkSet struct {
	info     []chunkInfo
	holes    []int32 // numbers of released chunks, reused before new numbers
	head     int32   // list of live chunks with at least one free block; allocation takes from head
	tail     int32   // empty chunks are parked at the tail so that fuller chunks fill first
	shift    uint8   // log2 of the largest chunk's block count: ids are chunk<<shift | index
	minShift uint8   // log2 of the smallest chunk's block count
	empties  int     // live chunks with used == 0 (at most one is kept)
	chunks   int     // live chunks
	blocks   int     // blocks in live chunks
	inUse    int     // blocks handed out
	allocs   uint64  // blocks handed out since creation
	frees    uint64  // blocks returned since creation
}

// init sets the set up for blocks of blockSize bytes, at least minBlocks in
// the largest chunk.
func (cs *chunkSet) init(blockSize uintptr, minBlocks uintptr) {
	cs.head, cs.tail = -1, -1
	cs.shift = log2Floor(max(chunkMaxBytes/blockSize, minBlocks))
	cs.minShift = min(cs.shift, log2Floor(max(chunkMinBytes/blockSize, 1)))
}

func log2Floor(n uintptr) uint8 { return uint8(bits.Len64(uint64(n)) - 1) }

// pick returns the chunk to take the next block from. If fresh, the chunk
// number c has no storage yet: the caller must make per blocks of it.
func (cs *chunkSet) pick() (c int32, fresh bool, per uint32) {
	if cs.head >= 0 {
		return cs.head, false, 0
	}
	if n := len(cs.holes); n > 0 {
		c = cs.holes[n-1]
		cs.holes = cs.holes[:n-1]
	} else {
		c = int32(len(cs.info))
		cs.info = append(cs.info, chunkInfo{})
	}
	// About half the blocks in use, so chunk count grows logarithmically
	// until chunks reach their largest size.
	s := min(max(uint8(bits.Len64(uint64(cs.inUse/2))), cs.minShift), cs.shift)
	per = 1 << s
	cs.info[c] = chunkInfo{per: per, prev: -1, next: -1}
	cs.pushHead(c)
	cs.chunks++
	cs.blocks += int(per)
	cs.empties++
	return c, true, per
}

// took records that a block of chunk c was handed out.
func (cs *chunkSet) took(c int32) {
	ci := &cs.info[c]
	if ci.used == 0 {
		cs.empties--
	}
	ci.used++
	cs.inUse++
	cs.allocs++
	if ci.used == ci.per {
		cs.unlink(c)
	}
}

// gave records that a block of chunk c came back (its link already
// written). It reports whether the chunk is now released: the caller drops
// its storage.
func (cs *chunkSet) gave(c int32) (release bool) {
	ci := &cs.info[c]
	wasFull := ci.used == ci.per
	ci.used--
	cs.inUse--
	cs.frees++
	if wasFull {
		cs.pushHead(c)
	}
	if ci.used != 0 {
		return false
	}
	if cs.empties > 0 {
		cs.unlink(c)
		cs.blocks -= int(ci.per)
		*ci = chunkInfo{prev: -1, next: -1}
		cs.holes = append(cs.holes, c)
		cs.chunks--
		return true
	}
	// Keep it as the spare: restart sequential handout, park it last.
	cs.empties++
	ci.free, ci.bump = 0, 0
	if cs.tail != c {
		cs.unlink(c)
		cs.pushTail(c)
	}
	return false
}

func (cs *chunkSet) pushHead(c int32) {
	ci := &cs.info[c]
	ci.prev, ci.next = -1, cs.head
	if cs.head >= 0 {
		cs.info[cs.head].prev = c
	} else {
		cs.tail = c
	}
	cs.head = c
}

func (cs *chunkSet) pushTail(c int32) {
	ci := &cs.info[c]
	ci.prev, ci.next = cs.tail, -1
	if cs.tail >= 0 {
		cs.info[cs.tail].next = c
	} else {
		cs.head = c
	}
	cs.tail = c
}

func (cs *chunkSet) unlink(c int32) {
	ci := &cs.info[c]
	if ci.prev >= 0 {
		cs.info[ci.prev].next = ci.next
	} else {
		cs.head = ci.next
	}
	if ci.next >= 0 {
		cs.info[ci.next].prev = ci.prev
	} else {
		cs.tail = ci.prev
	}
	ci.prev, ci.next = -1, -1
}

// Payload size classes. Blocks are multiples of 8 bytes: every 8 bytes up to
// 256, then eight classes per doubling up to maxClassSize, so rounding wastes
// at most 7 bytes for small payloads and at most 12.5% above 256 bytes.
// Payloads above maxClassSize take a separate allocation (counted in
// Stats.LargeInUse).
const (
	maxClassSize = 8192
	// numClasses counts the payload classes plus the "no payload" class 0:
	// 32 classes up to 256 bytes and 8 per doubling for the 5 doublings to
	// 8192.
	numClasses = 1 + 32 + 5*8
)

// classSizes[k] is the block size of class k (k ≥ 1); class 0 means "no
// payload".
var classSizes [numClasses]uint32

// classOf[(n+7)/8] is the class of an n-byte payload, 1 ≤ n ≤ maxClassSize.
var classOf [maxClassSize/8 + 1]uint8

func init() {
	k := 1
	for s := uint32(8); s <= 256; s += 8 {
		classSizes[k] = s
		k++
	}
	for base := uint32(256); base < maxClassSize; base *= 2 {
		step := base / 8
		for s := base + step; s <= 2*base; s += step {
			classSizes[k] = s
			k++
		}
	}
	if k != numClasses || classSizes[k-1] != maxClassSize {
		panic("ctxtable: size class table is inconsistent")
	}
	k = 1
	for i := 1; i < len(classOf); i++ {
		for classSizes[k] < uint32(i*8) {
			k++
		}
		classOf[i] = uint8(k)
	}
}

const (
	classNone  = 0    // no payload bytes
	classLarge = 0xfe // separate allocation, block = index into shard.large
	classFree  = 0xff // the slot itself is free (meta slab)
)

// byteClass is the payload slab of one size class in one shard.
type byteClass struct {
	size   uint32
	set    chunkSet
	chunks [][]byte
}

func newByteClass(size uint32) *byteClass {
	bc := &byteClass{size: size}
	bc.set.init(uintptr(size), 4)
	return bc
}

// alloc hands out a block and returns its id and its bytes (length size,
// contents undefined).
func (bc *byteClass) alloc() (uint32, []byte) {
	c, fresh, per := bc.set.pick()
	if fresh {
		mem := make([]byte, uintptr(bc.size)*uintptr(per))
		if int(c) == len(bc.chunks) {
			bc.chunks = append(bc.chunks, mem)
		} else {
			bc.chunks[c] = mem
		}
	}
	ci := &bc.set.info[c]
	chunk := bc.chunks[c]
	var i uint32
	if ci.free != 0 {
		i = ci.free - 1
		ci.free = binary.LittleEndian.Uint32(chunk[i*bc.size:])
	} else {
		i = ci.bump
		ci.bump++
	}
	bc.set.took(c)
	off := i * bc.size
	return uint32(c)<<bc.set.shift | i, chunk[off : off+bc.size : off+bc.size]
}

// bytes returns the block's memory (length size).
func (bc *byteClass) bytes(id uint32) []byte {
	off := (id & (1<<bc.set.shift - 1)) * bc.size
	return bc.chunks[id>>bc.set.shift][off : off+bc.size : off+bc.size]
}

func (bc *byteClass) free(id uint32) {
	c := int32(id >> bc.set.shift)
	i := id & (1<<bc.set.shift - 1)
	ci := &bc.set.info[c]
	binary.LittleEndian.PutUint32(bc.chunks[c][i*bc.size:], ci.free)
	ci.free = i + 1
	if bc.set.gave(c) {
		bc.chunks[c] = nil
	}
}

// slot is one context's fixed part: the header the table needs plus the
// engine's meta. slot contains no pointers (M is checked at New), so a chunk
// of slots is one noscan object.
type slot[M any] struct {
	// seq is the context's sequence number; while the slot is free it holds
	// the free-list link (1 + next free index in the chunk, 0 = end).
	seq        uint64
	block      uint32 // payload block id in its class (or index in shard.large)
	frameLen   uint32 // bytes
	userLen    uint32 // bytes
	scratchLen uint32 // bytes
	class      uint8  // payload class, classNone, classLarge, or classFree
	meta       M
}

// slotHeaderBytes is the table's own part of a slot, padding included, for a
// meta aligned to 8 bytes (R15 accounting).
const slotHeaderBytes = 32

// slotSize returns the bytes of one meta slot for M.
func slotSize[M any]() uintptr {
	var s slot[M]
	return unsafe.Sizeof(s)
}

// slotSlab is one shard's meta slab.
type slotSlab[M any] struct {
	set    chunkSet
	chunks [][]slot[M]
}

// alloc hands out a free slot; its fields are stale and must all be set.
func (ss *slotSlab[M]) alloc() (uint32, *slot[M]) {
	c, fresh, per := ss.set.pick()
	if fresh {
		mem := make([]slot[M], per)
		for i := range mem {
			mem[i].class = classFree
		}
		if int(c) == len(ss.chunks) {
			ss.chunks = append(ss.chunks, mem)
		} else {
			ss.chunks[c] = mem
		}
	}
	ci := &ss.set.info[c]
	chunk := ss.chunks[c]
	var i uint32
	if ci.free != 0 {
		i = ci.free - 1
		ci.free = uint32(chunk[i].seq)
	} else {
		i = ci.bump
		ci.bump++
	}
	ss.set.took(c)
	return uint32(c)<<ss.set.shift | i, &chunk[i]
}

func (ss *slotSlab[M]) at(id uint32) *slot[M] {
	return &ss.chunks[id>>ss.set.shift][id&(1<<ss.set.shift-1)]
}

func (ss *slotSlab[M]) free(id uint32) {
	c := int32(id >> ss.set.shift)
	i := id & (1<<ss.set.shift - 1)
	ci := &ss.set.info[c]
	s := &ss.chunks[c][i]
	s.class = classFree
	s.seq = uint64(ci.free)
	ci.free = i + 1
	if ss.set.gave(c) {
		ss.chunks[c] = nil
	}
}
