package ctxtable

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// DefaultCap is the cap used when Config.Cap or SetCap gets n ≤ 0: the
// default maximum number of contexts per zone of SPEC R2.
const DefaultCap = 500_000

// MaxCap is the largest cap a Table accepts (contexts). Slot ids are 32-bit,
// and a cap this size already means tens of GiB of contexts.
const MaxCap = 1 << 30

// MaxShards is the largest shard count Config accepts.
const MaxShards = 1 << 16

// MaxPayload is the largest payload one context may hold: len(frame) +
// len(userBuf) + scratch, in bytes.
const MaxPayload = 1<<31 - 1

// Errors returned by the table. All are sentinels for errors.Is; errors from
// New and SetCap wrap ErrInvalidConfig or ErrMetaPointers with the detail.
var (
	// ErrFull is returned by Insert when the table holds its cap of contexts
	// (SPEC R2): the engine sends the read without a context.
	ErrFull = errors.New("ctxtable: context cap reached")
	// ErrExists is returned by Insert when the sequence number already has a
	// context; the existing context is untouched.
	ErrExists = errors.New("ctxtable: sequence number already has a context")
	// ErrSize is returned by Insert for a negative scratch size or a payload
	// above MaxPayload.
	ErrSize = errors.New("ctxtable: bad payload size")
	// ErrInvalidConfig is wrapped by New and SetCap for an out-of-range cap or shard
	// count.
	ErrInvalidConfig = errors.New("ctxtable: invalid config")
	// ErrMetaPointers is wrapped by New when the meta type M contains Go
	// pointers (pointers, slices, strings, maps, channels, funcs,
	// interfaces): slabs of M must stay invisible to the garbage collector.
	ErrMetaPointers = errors.New("ctxtable: meta type contains pointers")
)

// Config sets a Table up. The zero Config is valid: cap DefaultCap, default
// shard count.
type Config struct {
	// Cap is the maximum number of contexts (SPEC R2, per zone); ≤ 0 means
	// DefaultCap. At most MaxCap.
	Cap int
	// Shards is the number of independently locked shards: a power of two in
	// [1, MaxShards]; 0 means DefaultShards(). More shards mean less lock
	// contention between senders and a little more idle memory (each shard
	// keeps one spare chunk per size class in use); see the README's sweep.
	Shards int // shard count (Config.Shards)
	// Placement says how sequence numbers map to shards and cells; the zero
	// value PlaceCounter suits the engine's counter-made sequence numbers.
	Placement Placement
}

// DefaultShards returns the shard count used when Config.Shards is 0: two
// per GOMAXPROCS, rounded up to a power of two, at least 4. Enough that
// concurrent senders rarely meet on a lock, few enough that a counter's
// contexts stay in a handful of sequential memory streams: in the README's
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
	shards    []shard[M]
	shardMask uint64 // len(shards) - 1
	shardBits uint8  // log2(len(shards))
	hashed    bool   // Config.Placement == PlaceHashed

	capMu sync.Mutex // serializes SetCap

	_       [64]byte
	pool    atomic.Int64 // unreserved cap (see cap.go); written near the cap only
	hoarded atomic.Bool  // some shard may hold credit
	_       [48]byte
	cap     atomic.Int64 // contexts allowed (Config.Cap, SetCap)
	batch   atomic.Int64 // credit per refill, batchFor(cap)
	_       [48]byte
}

// shard is one lock's worth of the table: its index and its slabs.
type shard[M any] struct {
	mu      sync.Mutex
	keys    keys
	credit  int64        // units of cap reserved from the pool, not yet used (cap.go)
	n       atomic.Int64 // keys.count(), for the lock-free Len
	slots   slotSlab[M]
	classes [numClasses]*byteClass
	large   [][]byte // payloads above maxClassSize; nil cells are free
	holes   []uint32 // free cells of large
	nLarge  int      // large payloads held
	nLargeT uint64   // large payloads allocated since New
	_       [64]byte // keep neighbouring shards' locks off this cache line
}

// minCells is the smallest shard index (odd, like every index length);
// shards start there and grow with their content so an idle zone costs
// little memory.
const minCells = 65

// New returns an empty table. It fails with an error wrapping ErrInvalidConfig for a
// cap above MaxCap or a shard count that is negative, not a power of two or
// above MaxShards, and with one wrapping ErrMetaPointers if M holds Go
// pointers. New allocates only small per-shard headers; storage grows with
// the contexts held and shrinks as they leave.
func New[M any](cfg Config) (*Table[M], error) {
	if err := checkPointerFree(reflect.TypeFor[M]()); err != nil {
		return nil, err
	}
	c, err := normCap(cfg.Cap)
	if err != nil {
		return nil, err
	}
	if cfg.Placement > PlaceHashed {
		return nil, fmt.Errorf("%w: unknown placement %d", ErrInvalidConfig, cfg.Placement)
	}
	n := cfg.Shards
	switch {
	case n == 0:
		n = DefaultShards()
	case n < 0 || n > MaxShards || n&(n-1) != 0:
		return nil, fmt.Errorf("%w: shard count %d is not a power of two in [1, %d]", ErrInvalidConfig, n, MaxShards)
	}
	lg := uint8(bits.TrailingZeros(uint(n)))
	t := &Table[M]{
		shards:    make([]shard[M], n),
		shardMask: uint64(n - 1),
		shardBits: lg,
		hashed:    cfg.Placement == PlaceHashed,
	}
	capCells := cellsFor((c + n - 1) / n)
	t.cap.Store(int64(c))
	t.pool.Store(int64(c))
	t.batch.Store(batchFor(c, n))
	for i := range t.shards {
		sh := &t.shards[i]
		if !t.hashed { // PlaceHashed keeps every entry in over
			sh.keys.ring.init(min(minCells, capCells))
		}
		sh.keys.over.init(min(minCells, capCells))
		sh.slots.set.init(slotSize[M](), 8)
	}
	return t, nil
}

func normCap(n int) (int, error) {
	switch {
	case n <= 0:
		return DefaultCap, nil
	case n > MaxCap:
		return 0, fmt.Errorf("%w: cap %d above MaxCap %d", ErrInvalidConfig, n, MaxCap)
	}
	return n, nil
}

// Shards returns the shard count.
func (t *Table[M]) Shards() int { return len(t.shards) }

// Insert stores a context for seq and returns a Ref to it. It copies frame and
// userBuf once into slab storage (the caller keeps ownership of both and may
// reuse them as soon as Insert returns) and reserves scratch zeroed bytes
// after them; meta is copied into the slot.
//
// Errors (nothing is changed on error): ErrExists if seq already has a
// context, ErrFull if the table holds Cap contexts (SPEC R2), ErrSize if
// scratch < 0 or the payload exceeds MaxPayload bytes.
//
// At steady state Insert does not allocate. It allocates a new slab chunk
// (4–256 KiB) when every chunk of the payload's size class is full, a larger
// shard index while the table grows toward its cap, and one []byte for a
// payload above 8 KiB.
func (t *Table[M]) Insert(seq uint64, meta M, frame, userBuf []byte, scratch int) (Ref[M], error) {
	total := uint64(len(frame)) + uint64(len(userBuf)) + uint64(uint(scratch))
	if scratch < 0 || total > MaxPayload {
		return Ref[M]{}, ErrSize
	}
	sh, h := t.shardFor(seq)
	sh.mu.Lock()
	if _, found := t.find(&sh.keys, seq, h); found {
		sh.mu.Unlock()
		return Ref[M]{}, ErrExists
	}
	switch t.reserve(sh) {
	case capFull:
		sh.mu.Unlock()
		return Ref[M]{}, ErrFull
	case drainFirst:
		// Rare: only when the table reaches its cap while shards still
		// hold credit from when it was far from it.
		sh.mu.Unlock()
		t.drain()
		sh.mu.Lock()
		if _, found := t.find(&sh.keys, seq, h); found {
			sh.mu.Unlock()
			return Ref[M]{}, ErrExists
		}
		if t.reserve(sh) != reserved {
			sh.mu.Unlock()
			return Ref[M]{}, ErrFull
		}
	}
	id, s := sh.slots.alloc()
	s.seq = seq
	s.frameLen = uint32(len(frame))
	s.userLen = uint32(len(userBuf))
	s.scratchLen = uint32(total) - s.frameLen - s.userLen
	s.meta = meta
	buf := sh.allocPayload(s, int(total))
	n := copy(buf, frame)
	n += copy(buf[n:], userBuf)
	clear(buf[n:])
	t.add(sh, seq, h, id+1)
	sh.n.Store(int64(sh.keys.count()))
	sh.mu.Unlock()
	return Ref[M]{s: s, buf: buf}, nil
}

// Lookup returns the context of seq. The Ref stays valid until Delete(seq).
// Lookup does not allocate.
func (t *Table[M]) Lookup(seq uint64) (Ref[M], bool) {
	sh, h := t.shardFor(seq)
	sh.mu.Lock()
	w, ok := t.find(&sh.keys, seq, h)
	if !ok {
		sh.mu.Unlock()
		return Ref[M]{}, false
	}
	s := sh.slots.at(sh.keys.slotAt(w))
	buf := sh.payload(s)
	sh.mu.Unlock()
	return Ref[M]{s: s, buf: buf}, true
}

// Delete removes the context of seq, returning its slot and payload block to
// the shard's slabs, and reports whether there was one. Every Ref to it is
// invalid from the moment Delete is called. Delete does not allocate except
// when the shard's index shrinks (its load fell below 1/8).
func (t *Table[M]) Delete(seq uint64) bool {
	sh, h := t.shardFor(seq)
	sh.mu.Lock()
	w, ok := t.find(&sh.keys, seq, h)
	if !ok {
		sh.mu.Unlock()
		return false
	}
	id := sh.keys.slotAt(w)
	t.remove(sh, w)
	s := sh.slots.at(id)
	sh.freePayload(s)
	sh.slots.free(id)
	t.release(sh)
	sh.n.Store(int64(sh.keys.count()))
	sh.mu.Unlock()
	return true
}

// allocPayload gives slot s a payload block of total bytes and returns it.
func (sh *shard[M]) allocPayload(s *slot[M], total int) []byte {
	switch {
	case total == 0:
		s.class, s.block = classNone, 0
		return nil
	case total <= maxClassSize:
		k := classOf[(total+7)>>3]
		bc := sh.classes[k]
		if bc == nil {
			bc = newByteClass(classSizes[k])
			sh.classes[k] = bc
		}
		id, b := bc.alloc()
		s.class, s.block = k, id
		return b[:total:total]
	}
	b := make([]byte, total)
	var id uint32
	if n := len(sh.holes); n > 0 {
		id = sh.holes[n-1]
		sh.holes = sh.holes[:n-1]
		sh.large[id] = b
	} else {
		id = uint32(len(sh.large))
		sh.large = append(sh.large, b)
	}
	sh.nLarge++
	sh.nLargeT++
	s.class, s.block = classLarge, id
	return b
}

// payload returns slot s's payload bytes (frame, user buffer, scratch).
func (sh *shard[M]) payload(s *slot[M]) []byte {
	n := s.frameLen + s.userLen + s.scratchLen
	switch s.class {
	case classNone:
		return nil
	case classLarge:
		return sh.large[s.block][:n:n]
	}
	return sh.classes[s.class].bytes(s.block)[:n:n]
}

func (sh *shard[M]) freePayload(s *slot[M]) {
	switch s.class {
	case classNone:
	case classLarge:
		sh.large[s.block] = nil
		sh.holes = append(sh.holes, s.block)
		sh.nLarge--
	default:
		sh.classes[s.class].free(s.block)
	}
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
			n, next, done := sh.collect(pos, seqs[:], refs[:])
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

// collect copies up to len(seqs) live contexts at slot positions ≥ pos
// (position = chunk<<shift | index, like a slot id). Slots never move, so
// walking positions visits each long-lived context once.
func (sh *shard[M]) collect(pos uint64, seqs []uint64, refs []Ref[M]) (n int, next uint64, done bool) {
	ss := &sh.slots
	shift := ss.set.shift
	for c := pos >> shift; c < uint64(len(ss.chunks)); c, pos = c+1, (c+1)<<shift {
		chunk := ss.chunks[c]
		end := min(uint64(ss.set.info[c].bump), uint64(len(chunk)))
		for i := pos & (1<<shift - 1); i < end; i++ {
			s := &chunk[i]
			if s.class == classFree {
				continue
			}
			if n == len(seqs) {
				return n, c<<shift | i, false
			}
			seqs[n] = s.seq
			refs[n] = Ref[M]{s: s, buf: sh.payload(s)}
			n++
		}
	}
	return n, 0, true
}

// Ref is a handle on one context: a pointer to its slot and its payload
// bytes, 32 bytes passed by value. All its views point into slab memory
// owned by the table; they stay valid, at the same addresses, while the
// context lives — other inserts, deletes, shard growth and SetCap never move
// it — and become invalid when Delete of its seq is called. The table does
// not synchronize access to the memory behind a Ref: see the package comment.
// The zero Ref is not usable.
type Ref[M any] struct {
	s   *slot[M]
	buf []byte
}

// Meta returns the context's meta, to read and update in place.
func (r Ref[M]) Meta() *M { return &r.s.meta }

// Seq returns the context's sequence number.
func (r Ref[M]) Seq() uint64 { return r.s.seq }

// Frame returns the copy of the packed request frame made by Insert
// (len(frame) bytes). The engine may overwrite it in place (for example to
// bump an attempt number) but not grow it.
func (r Ref[M]) Frame() []byte {
	n := r.s.frameLen
	return r.buf[:n:n]
}

// UserBuf returns the copy of the caller's user buffer made by Insert.
func (r Ref[M]) UserBuf() []byte {
	a := r.s.frameLen
	b := a + r.s.userLen
	return r.buf[a:b:b]
}

// Scratch returns the scratch bytes reserved by Insert, zeroed at insert,
// for the engine's own per-context state (for example the bitset of answered
// keys of a batch read).
func (r Ref[M]) Scratch() []byte {
	a := r.s.frameLen + r.s.userLen
	return r.buf[a:len(r.buf):len(r.buf)]
}

// Stats is a snapshot of a table's size and storage, for tests, leak checks
// and the R15 memory figures.
type Stats struct {
	Len    int // contexts held
	Cap    int // current cap
	Shards int

	IndexCells int // ring and overflow index cells across shards (16 bytes each)
	// Bytes is the memory the table holds for its contexts: slab chunks
	// plus index cells, in bytes (SlabBytes + 16·IndexCells).
	Bytes int64
	// Overflow is the number of contexts in the shards' hashed overflow
	// indexes rather than their rings (all of them under PlaceHashed).
	Overflow int
	// MaxProbe is the longest displacement from its home cell any overflow
	// entry has had since New (cells): a lookup reads at most the ring cell
	// plus MaxProbe+1 overflow cells.
	MaxProbe int

	MetaChunks    int    // meta slab chunks held (one heap object each)
	PayloadChunks int    // payload slab chunks held (one heap object each)
	SlabBytes     int64  // bytes of meta and payload chunks held
	PayloadBlocks int    // payload blocks in use (one per context with a payload ≤ 8 KiB)
	PayloadAllocs uint64 // payload blocks handed out since New
	PayloadFrees  uint64 // payload blocks returned since New
	LargeInUse    int    // payloads above 8 KiB held in separate allocations
	LargeAllocs   uint64 // separate allocations made since New
}

// Stats returns a snapshot, taking each shard's lock in turn.
func (t *Table[M]) Stats() Stats {
	st := Stats{Cap: t.Cap(), Shards: len(t.shards)}
	slotBytes := int64(slotSize[M]())
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		st.Len += sh.keys.count()
		st.IndexCells += int(sh.keys.ring.n + sh.keys.over.n)
		st.Overflow += sh.keys.over.count
		st.MaxProbe = max(st.MaxProbe, int(sh.keys.over.maxDist))
		st.MetaChunks += sh.slots.set.chunks
		st.SlabBytes += int64(sh.slots.set.blocks) * slotBytes
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
		st.LargeInUse += sh.nLarge
		st.LargeAllocs += sh.nLargeT
		sh.mu.Unlock()
	}
	st.Bytes = st.SlabBytes + int64(st.IndexCells)*int64(unsafe.Sizeof(entry{}))
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
