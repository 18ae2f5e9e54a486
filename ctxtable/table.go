package ctxtable

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"runtime"
	"sync"
	"unsafe"
)

// MaxShards is the largest shard count Config accepts.
const MaxShards = 1 << 16

// MaxPayload is the largest payload one context may hold: len(frame) +
// len(userBuf) + scratch, in bytes.
const MaxPayload = 1<<31 - 1

// Errors returned by the table. All are sentinels for errors.Is; errors from
// New wrap ErrInvalidConfig or ErrMetaPointers with the detail.
var (
	// ErrFull is returned by Insert when a shard's storage of one size
	// class is at the most its block ids can name (2^25 contexts). The
	// table sets no other limit: the engine counts its contexts per zone
	// and sends a read over its cap (SPEC R2) without a context.
	ErrFull = errors.New("ctxtable: shard storage full")
	// ErrExists is returned by Insert when the sequence number already has a
	// context; the existing context is untouched.
	ErrExists = errors.New("ctxtable: sequence number already has a context")
	// ErrSize is returned by Insert for a negative scratch size or a payload
	// above MaxPayload.
	ErrSize = errors.New("ctxtable: bad payload size")
	// ErrInvalidConfig is wrapped by New for an out-of-range shard count
	// or a meta type aligned to more than 8 bytes.
	ErrInvalidConfig = errors.New("ctxtable: invalid config")
	// ErrMetaPointers is wrapped by New when the meta type M contains Go
	// pointers (pointers, slices, strings, maps, channels, funcs,
	// interfaces): slabs of M must stay invisible to the garbage collector.
	ErrMetaPointers = errors.New("ctxtable: meta type contains pointers")
)

// Config sets a Table up. The zero Config is valid: the default shard
// count. A Table has no cap of its own: one limit has one owner, and the
// cap of SPEC R2 is the engine's, which counts its contexts per zone.
type Config struct {
	// Shards is the number of independently locked shards: a power of two in
	// [1, MaxShards]; 0 means DefaultShards(). More shards mean less lock
	// contention between senders and a little more idle memory (each shard
	// keeps one spare chunk per size class in use); see BENCHMARKS.md's sweep.
	Shards int
}

// DefaultShards returns the shard count used when Config.Shards is 0: two
// per GOMAXPROCS, rounded up to a power of two, at least 4. Enough that
// concurrent senders rarely meet on a lock, few enough that a counter's
// contexts stay in a handful of sequential memory streams: in BENCHMARKS.md's
// sweep (BenchmarkShards) the single-goroutine cost rises with the shard
// count while the parallel cost stops falling past a few per core.
func DefaultShards() int {
	n := max(2*runtime.GOMAXPROCS(0), 4)
	return 1 << bits.Len(uint(n-1))
}

// Table maps a request's sequence number to its in-flight context: a meta
// value M, the packed request frame, the caller's user buffer and zeroed
// scratch bytes (SPEC R2, R12, R15). See the package comment for the
// concurrency contract. A Table must be made with New.
type Table[M any] struct {
	shards    []shard
	shardMask uint64 // len(shards) - 1
	shardBits uint8  // log2(len(shards))
	metaSize  uint32 // unsafe.Sizeof(M) rounded up to 8
}

// shard is one lock's worth of the table: its index and its slabs.
type shard struct {
	mu      sync.Mutex
	ring    ring
	over    index
	n       int                     // contexts held
	classes *[numClasses]*byteClass // made at the shard's first insert
	large   [][]byte                // contexts above maxClassSize; nil cells are free
	holes   []uint32                // free cells of large
	nLarge  int                     // large contexts held
	nLargeT uint64                  // large contexts allocated since New
	bits    uint8                   // the table's shard bits: a counter value is seq >> bits
	pf      streams                 // where Lookups have been walking (see shard.prefetchAfter)
	_       [64]byte                // keep neighbouring shards' locks off this cache line
}

// minCells is the smallest ring (odd, like every index length); a shard
// makes its ring at its first insert and shrinks back to this size.
const minCells = 65

// header is the start of every context's block. The meta follows at
// hdrSize, then the user buffer, the frame and the scratch bytes.
type header struct {
	seq     uint64
	frame   uint32 // bytes
	user    uint32 // bytes
	scratch uint32 // bytes
	live    uint32 // liveMark while the block holds a context (Range skips the others)
}

const (
	hdrSize  = unsafe.Sizeof(header{})
	liveMark = 0x6c697665
)

// New returns an empty table. It fails with an error wrapping
// ErrInvalidConfig for a shard count that is negative, not a power of two or above MaxShards, and with one wrapping
// ErrMetaPointers if M holds Go pointers. New allocates only the table's
// and its shards' headers (BenchmarkIdle); storage grows with the contexts
// held and shrinks as they leave.
func New[M any](cfg Config) (*Table[M], error) {
	if err := checkPointerFree(reflect.TypeFor[M]()); err != nil {
		return nil, err
	}
	var m M
	if unsafe.Alignof(m) > 8 {
		return nil, fmt.Errorf("%w: meta type aligned to %d bytes (at most 8)", ErrInvalidConfig, unsafe.Alignof(m))
	}
	n := cfg.Shards
	switch {
	case n == 0:
		n = DefaultShards()
	case n < 0 || n > MaxShards || n&(n-1) != 0:
		return nil, fmt.Errorf("%w: shard count %d is not a power of two in [1, %d]", ErrInvalidConfig, n, MaxShards)
	}
	t := &Table[M]{
		shards:    make([]shard, n),
		shardMask: uint64(n - 1),
		shardBits: uint8(bits.TrailingZeros(uint(n))),
		metaSize:  uint32(unsafe.Sizeof(m)+7) &^ 7,
	}
	for i := range t.shards {
		t.shards[i].bits = t.shardBits
	}
	return t, nil
}

// Shards returns the shard count.
func (t *Table[M]) Shards() int { return len(t.shards) }

// Len returns the number of contexts held, taking each shard's lock in
// turn, so inserts and deletes running meanwhile may or may not be counted.
func (t *Table[M]) Len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// shardFor returns the shard of seq and its counter value: the low bits
// pick the shard, so consecutive numbers go round-robin over the shards
// and concurrent senders rarely meet on a lock; the 32 bits above them
// pick the ring cell.
func (t *Table[M]) shardFor(seq uint64) (*shard, uint32) {
	return &t.shards[seq&t.shardMask], uint32(seq >> t.shardBits)
}

// block returns the address of the block ref names.
func (sh *shard) block(ref uint32) unsafe.Pointer {
	id := ref & refIDMask
	if ref>>refIDBits == classLarge {
		return unsafe.Pointer(unsafe.SliceData(sh.large[id]))
	}
	return sh.classes[ref>>refIDBits].ptr(id)
}

func hdr(p unsafe.Pointer) *header { return (*header)(p) }

// where is a found context's place in the index: a ring cell, or a cell
// of over (inRing false).
type where struct {
	pos    uint64
	inRing bool
}

// find returns where seq's context is indexed and its block.
func (sh *shard) find(seq uint64, lo uint32) (where, uint32, unsafe.Pointer, bool) {
	if sh.ring.cells == nil {
		return where{}, 0, nil, false
	}
	r := sh.ring.home(lo)
	if c := sh.ring.cells[r]; c.ref != 0 && c.lo == lo {
		if p := sh.block(c.ref); hdr(p).seq == seq {
			return where{r, true}, c.ref, p, true
		}
	}
	if sh.over.count == 0 {
		return where{}, 0, nil, false
	}
	pos, _, ok := sh.over.findOrPlace(seq, overKey(seq))
	if !ok {
		return where{}, 0, nil, false
	}
	ref := sh.over.cells[pos].ref
	return where{pos, false}, ref, sh.block(ref), true
}

// Insert stores a context for seq and returns a Ref to it. It copies frame and
// userBuf once into slab storage (the caller keeps ownership of both and may
// reuse them as soon as Insert returns) and reserves scratch zeroed bytes
// after them; meta is copied next to them, so one context is one block of
// memory.
//
// Errors (nothing is changed on error): ErrExists if seq already has a
// context, ErrFull if the shard's storage for the context's size class is
// full (2^25 blocks), ErrSize if
// scratch < 0 or the payload exceeds MaxPayload bytes.
//
// At steady state Insert does not allocate. It allocates a new slab chunk
// (4–256 KiB) when every chunk of the context's size class is full, a larger
// shard index while the table grows, and one []byte for a context above
// 8 KiB.
func (t *Table[M]) Insert(seq uint64, meta M, frame, userBuf []byte, scratch int) (Ref[M], error) {
	payload := uint64(len(frame)) + uint64(len(userBuf)) + uint64(uint(scratch))
	if scratch < 0 || payload > MaxPayload {
		return Ref[M]{}, ErrSize
	}
	total := uintptr(hdrSize) + uintptr(t.metaSize) + uintptr(payload)
	sh, lo := t.shardFor(seq)
	sh.mu.Lock()
	if _, _, _, found := sh.find(seq, lo); found {
		sh.mu.Unlock()
		return Ref[M]{}, ErrExists
	}
	ref, p, ok := sh.alloc(total)
	if !ok {
		sh.mu.Unlock()
		return Ref[M]{}, ErrFull
	}
	// Next fit: the next Insert into this class most likely takes the
	// block after this one; start its cache miss now.
	sh.prefetchAfter(ref, p, 1)
	h := hdr(p)
	h.seq = seq
	h.frame = uint32(len(frame))
	h.user = uint32(len(userBuf))
	h.scratch = uint32(scratch)
	h.live = liveMark
	*(*M)(unsafe.Add(p, hdrSize)) = meta
	if payload > 0 {
		// The user buffer goes first: with the header and the meta it is
		// what an answer touches, so they share the block's first lines.
		buf := unsafe.Slice((*byte)(unsafe.Add(p, hdrSize+uintptr(t.metaSize))), payload)
		n := copy(buf, userBuf)
		n += copy(buf[n:], frame)
		clear(buf[n:])
	}
	t.add(sh, seq, lo, ref)
	sh.n++
	sh.mu.Unlock()
	return Ref[M]{p: p}, nil
}

// prefetchAfter starts loading the n blocks that follow block ref (at p) in
// its slab into the cache, so that the next Insert or Lookup to reach them
// does not wait for memory with the shard's lock held. Blocks are laid out
// in insert order (next fit, slab.go), so the block after the one an
// Insert took is most likely the next Insert's, and the blocks after an
// answered context hold the contexts sent just after it. The hardware's
// own prefetchers follow one stream in address order, but lose a shard
// whose answers interleave two or more streams (several proxies answering
// with different lags: BenchmarkCtxCycle's parallel case puts two streams
// in each shard) and stop at 4 KiB pages. It is a hint: prefetch never
// faults, so the range may run past the chunk's end, and it is not ordered
// with the lock's atomic instructions, so it adds no wait to the critical
// section. A context above 8 KiB has no neighbours in a slab, and a slab
// that fits in a core's cache has nothing to gain (byteClass.large).
func (sh *shard) prefetchAfter(ref uint32, p unsafe.Pointer, n uintptr) {
	k := ref >> refIDBits
	if k == classLarge || !sh.classes[k].large() {
		return
	}
	sz := uintptr(sh.classes[k].size)
	prefetch(uintptr(p)+sz, n*sz)
}

// prefetchMinBytes is the size of a slab's contexts above which Insert and
// Lookup prefetch: below it they stay in a core's cache (256 KiB or more
// of L2 on the machines we measure on) and a prefetch would only cost its
// call, as in the engine's benchmarks with a few reads in flight.
const prefetchMinBytes = 256 << 10

// large reports whether the class's contexts in use exceed prefetchMinBytes.
func (bc *byteClass) large() bool {
	return uintptr(bc.set.inUse)*uintptr(bc.size) > prefetchMinBytes
}

// streams tells whether a shard's Lookups walk its memory in streams, so
// that prefetching the blocks after an answered one pays. It remembers the
// block after each of the last len(next) answered contexts; a Lookup that
// lands within two blocks of one of them continues a stream. Scattered
// answers (BenchmarkLookup/scattered) would make every prefetch wasted
// memory traffic, which two cores sharing memory feel (+41% per lookup in
// the parallel scattered case when every Lookup prefetched); so the shard
// prefetches only while most of its recent Lookups continued a stream.
// Kept under the shard's lock.
type streams struct {
	next  [4]uintptr // the address after each of the last answered blocks
	turn  uint8      // the cell of next to overwrite
	score int8       // in [-streamScore, streamScore]: up on a continued stream, down otherwise
}

// streamScore bounds streams.score: after a change of pattern, prefetching
// stops or starts within this many Lookups.
const streamScore = 8

// follow records a Lookup of the block at a (sz bytes) and reports whether
// to prefetch after it.
func (s *streams) follow(a, sz uintptr) bool {
	hit := false
	for _, n := range s.next {
		if a-n < 2*sz { // a in [n, n+2·sz): unsigned, so a below n is no hit
			hit = true
		}
	}
	switch {
	case hit && s.score < streamScore:
		s.score++
	case !hit && s.score > -streamScore:
		s.score--
	}
	s.next[s.turn%uint8(len(s.next))] = a + sz
	s.turn++
	return s.score > 0
}

// alloc takes a block of total bytes; false if its class can name no more.
func (sh *shard) alloc(total uintptr) (uint32, unsafe.Pointer, bool) {
	if total <= maxClassSize {
		if sh.classes == nil {
			sh.classes = new([numClasses]*byteClass)
		}
		k := classOf[(total+7)>>3]
		bc := sh.classes[k]
		if bc == nil {
			bc = newByteClass(classSizes[k])
			sh.classes[k] = bc
		}
		id, p, ok := bc.alloc()
		return makeRef(k, id), p, ok
	}
	var id uint32
	if n := len(sh.holes); n > 0 {
		id = sh.holes[n-1]
	} else if id = uint32(len(sh.large)); id > refIDMask {
		return 0, nil, false
	}
	// make([]byte) of a size above maxClassSize is 8-aligned, as M needs.
	b := make([]byte, total)
	if n := len(sh.holes); n > 0 {
		sh.holes = sh.holes[:n-1]
		sh.large[id] = b
	} else {
		sh.large = append(sh.large, b)
	}
	sh.nLarge++
	sh.nLargeT++
	return makeRef(classLarge, id), unsafe.Pointer(unsafe.SliceData(b)), true
}

// free returns the block of ref, whose context is gone.
func (sh *shard) free(ref uint32, p unsafe.Pointer) {
	hdr(p).live = 0
	id := ref & refIDMask
	if ref>>refIDBits == classLarge {
		sh.large[id] = nil
		sh.holes = append(sh.holes, id)
		sh.nLarge--
		return
	}
	sh.classes[ref>>refIDBits].free(id)
}

// Lookup returns the context of seq. The Ref stays valid until Delete(seq).
// Lookup does not allocate.
func (t *Table[M]) Lookup(seq uint64) (Ref[M], bool) {
	sh, lo := t.shardFor(seq)
	sh.mu.Lock()
	_, ref, p, ok := sh.find(seq, lo)
	if ok && ref>>refIDBits != classLarge {
		// The blocks after an answered context hold the contexts sent
		// next, whose answers most likely come next, if answers walk the
		// shard's memory in streams (they do when they come in about send
		// order; see streams).
		bc := sh.classes[ref>>refIDBits]
		sz := uintptr(bc.size)
		if bc.large() && sh.pf.follow(uintptr(p), sz) {
			prefetch(uintptr(p)+sz, 2*sz)
		}
	}
	sh.mu.Unlock()
	return Ref[M]{p: p}, ok
}

// Delete removes the context of seq, returning its block to the shard's
// slab, and reports whether there was one. Every Ref to it is invalid from
// the moment Delete is called. Delete does not allocate except when the
// shard's index shrinks (its load fell below 1/8).
func (t *Table[M]) Delete(seq uint64) bool {
	sh, lo := t.shardFor(seq)
	sh.mu.Lock()
	w, ref, p, ok := sh.find(seq, lo)
	if !ok {
		sh.mu.Unlock()
		return false
	}
	sh.remove(w)
	sh.free(ref, p)
	sh.n--
	sh.mu.Unlock()
	return true
}

// add indexes seq → ref; seq must be absent. It grows the ring first if
// the shard is at load 7/8 of it.
func (t *Table[M]) add(sh *shard, seq uint64, lo uint32, ref uint32) {
	if sh.ring.cells == nil {
		sh.ring.init(minCells)
	} else if 8*(sh.n+1) > 7*int(sh.ring.n) {
		// To load 3/4: growth by a third, so a full table sits between 3/4
		// and 7/8 (about 10 bytes of index a context) instead of anywhere
		// between 7/16 and 7/8 as doubling would leave it.
		sh.rebuild(4 * (sh.n + 1) / 3)
	}
	sh.put(lo, ref, seq)
}

// put indexes a context by its counter value lo; seq is its sequence
// number, or 0 if the caller does not have it at hand (read from the block
// only if needed). When the cell is taken the older of the two numbers
// moves to over: the ring follows the counter. Age is the counter's
// (wrapping) order, the full numbers' when the counter values are equal.
func (sh *shard) put(lo uint32, ref uint32, seq uint64) {
	c := &sh.ring.cells[sh.ring.home(lo)]
	if c.ref != 0 {
		if seq == 0 {
			seq = hdr(sh.block(ref)).seq
		}
		old := hdr(sh.block(c.ref)).seq
		if d := int32(lo - c.lo); d < 0 || d == 0 && int64(seq-old) < 0 {
			sh.addOver(seq, ref)
			return
		}
		sh.addOver(old, c.ref)
		sh.ring.count--
	}
	*c = cell{lo: lo, ref: ref}
	sh.ring.count++
}

// addOver places seq in over, making or doubling it first if need be.
func (sh *shard) addOver(seq uint64, ref uint32) {
	if sh.over.cells == nil {
		sh.over.init(minCells)
	} else if sh.over.count >= sh.over.growAt {
		sh.resizeOver(2 * int(sh.over.n))
	}
	pos, dist, _ := sh.over.findOrPlace(seq, overKey(seq))
	sh.over.place(pos, dist, seq, ref)
}

// remove drops the entry at w and shrinks what became nearly empty.
func (sh *shard) remove(w where) {
	if w.inRing {
		sh.ring.cells[w.pos] = cell{}
		sh.ring.count--
	} else {
		sh.over.removeAt(w.pos)
	}
	switch {
	case 8*(sh.n-1) < int(sh.ring.n) && sh.ring.n > minCells:
		sh.rebuild(max(minCells, 2*(sh.n-1)))
	case !w.inRing && sh.over.count < sh.over.shrinkAt() && sh.over.n > minCells:
		sh.resizeOver(max(minCells, int(sh.over.n/2)))
	}
}

// rebuild re-indexes the shard with a ring of n cells. Only index entries
// move; blocks stay put, so every Ref stays valid. A ring entry's block is
// read only when it meets another in the new ring.
func (sh *shard) rebuild(n int) {
	oldRing, oldOver := sh.ring.cells, sh.over.cells
	maxDist := sh.over.maxDist
	sh.ring.init(n)
	sh.over = index{maxDist: maxDist}
	for _, c := range oldRing {
		if c.ref != 0 {
			sh.put(c.lo, c.ref, 0)
		}
	}
	for i := range oldOver {
		if e := &oldOver[i]; e.ref != 0 {
			sh.put(uint32(e.seq>>sh.bits), e.ref, e.seq)
		}
	}
}

// resizeOver rehashes over into n cells.
func (sh *shard) resizeOver(n int) {
	old := sh.over.cells
	maxDist := sh.over.maxDist
	sh.over.init(n)
	for i := range old {
		if e := &old[i]; e.ref != 0 {
			pos, dist, _ := sh.over.findOrPlace(e.seq, overKey(e.seq))
			sh.over.place(pos, dist, e.seq, e.ref)
		}
	}
	sh.over.maxDist = max(sh.over.maxDist, maxDist)
}

// Range calls fn for the contexts in the table until fn returns false. It
// holds no lock while fn runs, so fn may call any Table method (Delete
// included) and a panic in fn leaves nothing locked. Each context present for
// the whole Range is visited exactly once; one inserted or deleted during
// Range may or may not be visited (as with sync.Map.Range). The Ref passed to
// fn follows the usual rule: valid until Delete of its seq. Range does not
// allocate; it is meant for shutdown and leak checks, not the hot path.
func (t *Table[M]) Range(fn func(seq uint64, r Ref[M]) bool) {
	const batch = 32
	var (
		seqs [batch]uint64
		refs [batch]Ref[M]
	)
	for si := range t.shards {
		sh := &t.shards[si]
		for pos := uint64(0); ; {
			sh.mu.Lock()
			n, next, done := sh.collect(pos, seqs[:], func(i int, p unsafe.Pointer) { refs[i] = Ref[M]{p: p} })
			sh.mu.Unlock()
			for k := range n {
				if !fn(seqs[k], refs[k]) {
					return
				}
			}
			if done {
				break
			}
			pos = next
		}
	}
}

// collect copies up to len(seqs) live contexts at positions ≥ pos, a
// position being class<<32 | block id (classLarge: index in large). Blocks
// never move, so walking positions visits each long-lived context once.
func (sh *shard) collect(pos uint64, seqs []uint64, put func(int, unsafe.Pointer)) (n int, next uint64, done bool) {
	take := func(p unsafe.Pointer, at uint64) bool {
		if hdr(p).live != liveMark {
			return true
		}
		if n == len(seqs) {
			next = at
			return false
		}
		seqs[n] = hdr(p).seq
		put(n, p)
		n++
		return true
	}
	for k := uint8(pos >> 32); k < numClasses; k, pos = k+1, uint64(k+1)<<32 {
		if k == 0 || sh.classes == nil || sh.classes[k] == nil {
			continue
		}
		bc := sh.classes[k]
		shift := bc.set.shift
		for c := uint32(pos) >> shift; int(c) < len(bc.chunks); c++ {
			if bc.chunks[c] == nil {
				continue
			}
			end := uint32(len(bc.chunks[c])) / bc.size
			first := uint32(0)
			if c == uint32(pos)>>shift {
				first = uint32(pos) & (1<<shift - 1)
			}
			for i := first; i < end; i++ {
				id := c<<shift | i
				if !take(bc.ptr(id), uint64(k)<<32|uint64(id)) {
					return n, next, false
				}
			}
		}
	}
	first := uint32(0)
	if pos>>32 == classLarge {
		first = uint32(pos)
	}
	for i := first; int(i) < len(sh.large); i++ {
		if b := sh.large[i]; b != nil && !take(unsafe.Pointer(unsafe.SliceData(b)), classLarge<<32|uint64(i)) {
			return n, next, false
		}
	}
	return n, 0, true
}

// Ref is a handle on one context: the address of its block, 8 bytes passed
// by value. All its views point into slab memory owned by the table; they
// stay valid, at the same addresses, while the context lives — other
// inserts, deletes and index growth never move it — and become
// invalid when Delete of its seq is called. The table does not synchronize
// access to the memory behind a Ref: see the package comment. The zero Ref
// is not usable.
type Ref[M any] struct {
	p unsafe.Pointer
}

func metaBytes[M any]() uintptr {
	var m M
	return (unsafe.Sizeof(m) + 7) &^ 7
}

// Meta returns the context's meta, to read and update in place.
func (r Ref[M]) Meta() *M { return (*M)(unsafe.Add(r.p, hdrSize)) }

// Seq returns the context's sequence number.
func (r Ref[M]) Seq() uint64 { return hdr(r.p).seq }

// payload returns the context's bytes after the meta from offset off, n
// bytes, capped at n.
func (r Ref[M]) payload(off, n uint32) []byte {
	if n == 0 {
		return nil // no address: it could lie past the end of the block
	}
	return unsafe.Slice((*byte)(unsafe.Add(r.p, hdrSize+metaBytes[M]()+uintptr(off))), n)
}

// Frame returns the copy of the packed request frame made by Insert
// (len(frame) bytes). The engine may overwrite it in place (for example to
// bump an attempt number) but not grow it.
func (r Ref[M]) Frame() []byte {
	h := hdr(r.p)
	return r.payload(h.user, h.frame)
}

// UserBuf returns the copy of the caller's user buffer made by Insert.
func (r Ref[M]) UserBuf() []byte { return r.payload(0, hdr(r.p).user) }

// Scratch returns the scratch bytes reserved by Insert, zeroed at insert,
// for the engine's own per-context state (for example the bitset of answered
// keys of a batch read).
func (r Ref[M]) Scratch() []byte {
	h := hdr(r.p)
	return r.payload(h.frame+h.user, h.scratch)
}

// Stats is a snapshot of a table's size and storage, for tests, leak checks
// and the R15 memory figures.
type Stats struct {
	Len    int // contexts held
	Shards int

	IndexCells int // ring (8 bytes each) and overflow (16 bytes each) cells across shards
	// Bytes is the memory the table holds for its contexts: slab chunks,
	// large contexts and index cells, in bytes.
	Bytes int64
	// Overflow is the number of contexts in the shards' hashed overflow
	// indexes rather than their rings.
	Overflow int
	// MaxProbe is the longest displacement from its home cell any overflow
	// entry has had since New (cells): a lookup reads at most the ring cell
	// plus MaxProbe+1 overflow cells.
	MaxProbe int

	PayloadChunks int    // slab chunks held (one heap object each)
	SlabBytes     int64  // bytes of slab chunks held
	PayloadBlocks int    // blocks in use: one per context up to 8 KiB (header, meta and payload)
	PayloadAllocs uint64 // blocks handed out since New
	PayloadFrees  uint64 // blocks returned since New
	LargeInUse    int    // contexts above 8 KiB held in separate allocations
	LargeAllocs   uint64 // separate allocations made since New
}

// Stats returns a snapshot, taking each shard's lock in turn.
func (t *Table[M]) Stats() Stats {
	st := Stats{Shards: len(t.shards)}
	var large int64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		st.Len += sh.n
		st.IndexCells += len(sh.ring.cells) + len(sh.over.cells)
		st.Bytes += int64(len(sh.ring.cells))*int64(unsafe.Sizeof(cell{})) + int64(len(sh.over.cells))*int64(unsafe.Sizeof(entry{}))
		st.Overflow += sh.over.count
		st.MaxProbe = max(st.MaxProbe, int(sh.over.maxDist))
		if sh.classes != nil {
			for _, bc := range sh.classes {
				if bc == nil {
					continue
				}
				st.PayloadChunks += bc.set.chunks
				st.SlabBytes += int64(bc.set.blocks) * int64(bc.size)
				st.PayloadBlocks += bc.set.inUse
				st.PayloadAllocs += bc.set.allocs
				st.PayloadFrees += bc.set.frees
			}
		}
		for _, b := range sh.large {
			large += int64(len(b))
		}
		st.LargeInUse += sh.nLarge
		st.LargeAllocs += sh.nLargeT
		sh.mu.Unlock()
	}
	st.Bytes += st.SlabBytes + large
	return st
}

// checkPointerFree returns an error wrapping ErrMetaPointers if values of
// type typ contain Go pointers.
func checkPointerFree(typ reflect.Type) error {
	if path := pointerPath(typ, typ.String()); path != "" {
		return fmt.Errorf("%w: %s", ErrMetaPointers, path)
	}
	return nil
}

// pointerPath returns a description of the first pointer found in typ, or "".
func pointerPath(typ reflect.Type, at string) string {
	switch typ.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return ""
	case reflect.Array:
		if typ.Len() == 0 {
			return ""
		}
		return pointerPath(typ.Elem(), at+"[...]")
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if p := pointerPath(f.Type, at+"."+f.Name); p != "" {
				return p
			}
		}
		return ""
	}
	return at + " is a " + typ.Kind().String()
}
