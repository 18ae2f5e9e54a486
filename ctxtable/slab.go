package ctxtable

import (
	"math/bits"
	"unsafe"
)

// Storage for contexts lives in chunks: big, pointer-free byte slices that
// the garbage collector marks as one object each and never scans. A chunk is
// cut into equal blocks of one size class, each holding one whole context
// (header, meta, frame, user buffer, scratch); a block is named by a uint32
// id = chunk<<shift | index, so the table's index holds numbers, never
// pointers (docs/design.md, "Hot-path rules"; SPEC R15).
//
// Chunk sizes follow the population: a new chunk holds about half as many
// blocks as are in use (a power of two), from chunkMinBytes up to
// chunkMaxBytes. A shard of an idle zone costs a few KiB; a full table of
// 500,000 contexts is ~1,000 heap objects, so a GC cycle barely notices it.
//
// Allocation is next-fit in address order: blocks come from one chunk, the
// lowest free block first, until it is full; then from the next chunk round
// the set that is at least half free (or the freest, or a new one). Contexts
// are thus laid out in the order they were inserted, whatever order the
// answers freed their predecessors in, so a poller meeting answers in about
// send order walks memory in about address order, which the hardware
// prefetchers follow (and Insert and Lookup prefetch ahead of, table.go's
// prefetchAfter). A LIFO free list was measured against it: it hands
// each insert the block the last answer freed, so the answer order of one
// lap becomes the memory order of the next, and after a few laps every
// lookup was a cache and TLB miss (BenchmarkInsertLookupDelete). A bitmap
// per chunk (one bit a block) finds the lowest free block.
//
// Empty chunks wait for the allocation to come round to them; beyond one
// in eight of the chunks (and at least one spare) they go back to the Go
// heap, so memory follows the contexts held, and a slab that empties keeps
// one spare of at most 16 KiB.

const (
	chunkMinBytes = 4 << 10
	chunkMaxBytes = 256 << 10
)

// chunkInfo is the bookkeeping of one chunk.
type chunkInfo struct {
	free []uint64 // bit i set: block i is free
	low  uint32   // words of free below low are zero
	used uint32   // blocks handed out and not yet returned
	per  uint32   // blocks in the chunk (a power of two); 0: released, number waits in holes
}

// chunkSet does the chunk bookkeeping of one slab; the caller owns the
// storage.
type chunkSet struct {
	info     []chunkInfo
	holes    []int32 // numbers of released chunks, reused before new numbers
	cur      int32   // the chunk allocation takes from; -1: none yet
	shift    uint8   // log2 of the largest chunk's block count: ids are chunk<<shift | index
	minShift uint8   // log2 of the smallest chunk's block count
	empties  int     // live chunks with used == 0
	chunks   int     // live chunks
	blocks   int     // blocks in live chunks
	inUse    int     // blocks handed out
	allocs   uint64  // blocks handed out since creation
	frees    uint64  // blocks returned since creation
}

// init sets the set up for blocks of blockSize bytes, at least minBlocks in
// the largest chunk.
func (cs *chunkSet) init(blockSize uintptr, minBlocks uintptr) {
	cs.cur = -1
	cs.shift = log2Floor(max(chunkMaxBytes/blockSize, minBlocks))
	cs.minShift = min(cs.shift, log2Floor(max(chunkMinBytes/blockSize, 1)))
}

func log2Floor(n uintptr) uint8 { return uint8(bits.Len64(uint64(n)) - 1) }

// take hands out a block: its chunk and index, and, if fresh, the number of
// blocks of the chunk the caller must make storage for. ok is false when a
// new chunk is needed and chunk numbers are exhausted (maxChunks).
func (cs *chunkSet) take(maxChunks int) (c int32, i uint32, fresh bool, per uint32, ok bool) {
	c = cs.cur
	if c < 0 || cs.info[c].used == cs.info[c].per {
		if c = cs.next(); c < 0 {
			if c, per, ok = cs.grow(maxChunks); !ok {
				return 0, 0, false, 0, false
			}
			fresh = true
		}
		cs.cur = c
	}
	ci := &cs.info[c]
	w := ci.low
	for ci.free[w] == 0 {
		w++
	}
	ci.low = w
	b := uint32(bits.TrailingZeros64(ci.free[w]))
	ci.free[w] &^= 1 << b
	if ci.used == 0 {
		cs.empties--
	}
	ci.used++
	cs.inUse++
	cs.allocs++
	return c, w<<6 | b, fresh, per, true
}

// next returns the chunk after cur, round the set, that is at least half
// free, else the freest with a free block, else -1.
func (cs *chunkSet) next() int32 {
	best, bestFree := int32(-1), uint32(0)
	n := int32(len(cs.info))
	for k := int32(1); k <= n; k++ {
		c := (cs.cur + k) % n
		if c < 0 {
			c += n
		}
		ci := &cs.info[c]
		if ci.per == 0 {
			continue
		}
		free := ci.per - ci.used
		if 2*free >= ci.per {
			return c
		}
		if free > bestFree {
			best, bestFree = c, free
		}
	}
	return best
}

// grow makes a new chunk number with all blocks free, about half as many
// blocks as are in use, so the chunk count grows logarithmically until
// chunks reach their largest size.
func (cs *chunkSet) grow(maxChunks int) (int32, uint32, bool) {
	var c int32
	if n := len(cs.holes); n > 0 {
		c = cs.holes[n-1]
		cs.holes = cs.holes[:n-1]
	} else {
		if len(cs.info) >= maxChunks {
			return 0, 0, false
		}
		c = int32(len(cs.info))
		cs.info = append(cs.info, chunkInfo{})
	}
	s := min(max(uint8(bits.Len64(uint64(cs.inUse/2))), cs.minShift), cs.shift)
	per := uint32(1) << s
	free := make([]uint64, (per+63)/64)
	for w := range free {
		free[w] = ^uint64(0)
	}
	if per < 64 {
		free[0] = 1<<per - 1
	}
	cs.info[c] = chunkInfo{free: free, per: per}
	cs.chunks++
	cs.blocks += int(per)
	cs.empties++
	return c, per, true
}

// give records that block i of chunk c came back. It reports whether the
// set now holds more empty chunks than it keeps (see trim).
func (cs *chunkSet) give(c int32, i uint32) (trim bool) {
	ci := &cs.info[c]
	ci.free[i>>6] |= 1 << (i & 63)
	ci.low = min(ci.low, i>>6)
	ci.used--
	cs.inUse--
	cs.frees++
	if ci.used != 0 {
		return false
	}
	cs.empties++
	return cs.empties > cs.keep() || cs.inUse == 0
}

// spareMaxBytes is the largest empty chunk an empty set keeps: enough that
// a table with a few contexts coming and going does not allocate a chunk
// for each, small enough that an idle table is cheap.
const spareMaxBytes = 16 << 10

// keep returns how many empty chunks the set keeps for the allocation to
// come round to: one in eight of the chunks in use, at least one.
func (cs *chunkSet) keep() int { return max(1, (cs.chunks-cs.empties)/8) }

// trim releases empty chunks beyond keep, and, once the set is empty, every
// empty chunk above spareMaxBytes, calling drop with each one's number so
// the caller frees its storage.
func (cs *chunkSet) trim(size uint32, drop func(c int32)) {
	for c := range cs.info {
		ci := &cs.info[c]
		if ci.per == 0 || ci.used != 0 {
			continue
		}
		big := cs.inUse == 0 && ci.per*size > spareMaxBytes
		if cs.empties <= cs.keep() && !big || int32(c) == cs.cur && cs.inUse != 0 {
			continue
		}
		cs.blocks -= int(ci.per)
		*ci = chunkInfo{}
		cs.holes = append(cs.holes, int32(c))
		cs.chunks--
		cs.empties--
		if int32(c) == cs.cur {
			cs.cur = -1
		}
		drop(int32(c))
	}
}

// Size classes. Blocks are multiples of 8 bytes: every 8 bytes up to 256,
// then eight classes per doubling up to maxClassSize, so rounding wastes at
// most 7 bytes for small contexts and at most 12.5% above 256 bytes.
// Contexts above maxClassSize take a separate allocation (counted in
// Stats.LargeInUse).
const (
	maxClassSize = 8192
	// numClasses counts the classes plus the unused class 0: 32 classes up
	// to 256 bytes and 8 per doubling for the 5 doublings to 8192.
	numClasses = 1 + 32 + 5*8
	// classLarge is the class of a context in a separate allocation.
	classLarge = numClasses
)

// classSizes[k] is the block size of class k (k ≥ 1).
var classSizes [numClasses]uint32

// classOf[(n+7)/8] is the class of an n-byte context, 1 ≤ n ≤ maxClassSize.
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

// A block reference, as the index keeps it: the class in the top bits, the
// block's id (or, for classLarge, its index in shard.large) below; never 0,
// since no class is 0.
const (
	refIDBits = 25
	refIDMask = 1<<refIDBits - 1
)

func makeRef(class uint8, id uint32) uint32 { return uint32(class)<<refIDBits | id }

// byteClass is the slab of one size class in one shard.
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

// alloc hands out a block and returns its id and its address (size bytes,
// contents undefined); false when the class has as many chunks as a block
// id can name.
func (bc *byteClass) alloc() (uint32, unsafe.Pointer, bool) {
	c, i, fresh, per, ok := bc.set.take(1 << (refIDBits - bc.set.shift))
	if !ok {
		return 0, nil, false
	}
	if fresh {
		mem := make([]byte, uintptr(bc.size)*uintptr(per))
		if int(c) == len(bc.chunks) {
			bc.chunks = append(bc.chunks, mem)
		} else {
			bc.chunks[c] = mem
		}
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(bc.chunks[c])), uintptr(i)*uintptr(bc.size))
	return uint32(c)<<bc.set.shift | i, p, true
}

// ptr returns the address of block id.
func (bc *byteClass) ptr(id uint32) unsafe.Pointer {
	off := uintptr(id&(1<<bc.set.shift-1)) * uintptr(bc.size)
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(bc.chunks[id>>bc.set.shift])), off)
}

// free returns block id.
func (bc *byteClass) free(id uint32) {
	if bc.set.give(int32(id>>bc.set.shift), id&(1<<bc.set.shift-1)) {
		bc.set.trim(bc.size, bc.drop)
	}
}

func (bc *byteClass) drop(c int32) { bc.chunks[c] = nil }
