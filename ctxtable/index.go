package ctxtable

import (
	"math/bits"
)

// A shard's key index has two parts:
//
//   - ring: a direct-mapped array of 8-byte cells, one per counter value mod
//     its odd length. The counter value of a sequence number is its 32 bits
//     above the shard bits; a cell holds those 32 bits and the context's
//     block reference, and the block's header holds the full sequence number
//     that a match is checked against. Numbers drawn from a counter find
//     their cell without probing, and consecutive numbers sit in consecutive
//     cells, so contexts inserted, answered and deleted in about the order
//     they were sent walk the index sequentially.
//   - over: a Robin Hood index (linear probing, backward-shift deletion, so
//     no tombstones and probe lengths that stay what the load gives under
//     endless churn) of 16-byte entries keyed by a 64-bit mixer of the full
//     sequence number, for whatever does not fit the ring: when a cell is
//     taken by another live number, the older of the two moves to over.
//     Stragglers (contexts that outlive a lap of the ring), and numbers that
//     differ only above the counter bits, end up there. A lookup reads the
//     ring cell and goes to over only if the cell holds another number and
//     over is not empty.
//
// Any key pattern keeps bounded probes this way; a counter's pattern keeps
// one cache line of index per eight contexts.

// cell is one slot of a ring: the counter value of the sequence number it
// holds and the context's block reference (0: empty).
type cell struct {
	lo  uint32
	ref uint32
}

// entry is one cell of the overflow index. Entries are the only thing that
// ever moves (Robin Hood displacement on insert, backward shift on delete);
// blocks stay where they are, which is what keeps a Ref valid.
type entry struct {
	seq  uint64
	ref  uint32 // block reference; 0 marks an empty cell
	dist uint32 // distance from the entry's home cell, in cells
}

// fastmod holds an odd length n and the constant for p mod n without a
// division (Lemire's fastmod). Odd, so a key stride that is a power of two
// cannot make keys share cells.
type fastmod struct {
	n     uint64
	magic uint64 // ^uint64(0)/n + 1
}

func (f *fastmod) set(n int) {
	f.n = uint64(n | 1)
	f.magic = ^uint64(0)/f.n + 1
}

// home returns p mod n. Consecutive keys get consecutive cells.
func (f *fastmod) home(p uint32) uint64 {
	hi, _ := bits.Mul64(f.magic*uint64(p), f.n)
	return hi
}

// ring is a shard's direct-mapped index.
type ring struct {
	fastmod
	cells []cell
	count int
}

func (r *ring) init(n int) {
	r.set(n)
	r.cells = make([]cell, r.n)
	r.count = 0
}

// index is a Robin Hood open-addressing array with linear probing and
// backward-shift deletion.
type index struct {
	fastmod
	cells   []entry
	count   int    // cells in use
	growAt  int    // count above which the index doubles (load 7/8)
	maxDist uint32 // longest displacement any entry has had (high-water mark)
}

// maxLoadNum/maxLoadDen is the load above which an index grows.
const (
	maxLoadNum = 7
	maxLoadDen = 8
)

func (ix *index) init(n int) {
	ix.set(n)
	ix.cells = make([]entry, ix.n)
	ix.count = 0
	ix.growAt = int(ix.n) * maxLoadNum / maxLoadDen
}

// shrinkAt returns the count below which an index halves (load 1/8; after
// halving the load is at most 1/4, far from the 7/8 that grows it).
func (ix *index) shrinkAt() int { return int(ix.n / 8) }

// findOrPlace looks seq up; if absent it returns the cell and distance where
// the Robin Hood insert of seq starts (found false).
func (ix *index) findOrPlace(seq uint64, p uint32) (pos uint64, dist uint32, found bool) {
	i := ix.home(p)
	cells := ix.cells
	for d := uint32(0); ; d++ {
		e := &cells[i]
		if e.ref == 0 || e.dist < d {
			return i, d, false
		}
		if e.seq == seq {
			return i, d, true
		}
		if i++; i == ix.n {
			i = 0
		}
	}
}

// place stores seq→ref starting at cell pos with displacement dist (from
// findOrPlace), pushing richer entries forward. The caller made room.
func (ix *index) place(pos uint64, dist uint32, seq uint64, ref uint32) {
	cur := entry{seq: seq, ref: ref, dist: dist}
	cells := ix.cells
	for i := pos; ; {
		e := &cells[i]
		if e.ref == 0 {
			*e = cur
			ix.maxDist = max(ix.maxDist, cur.dist)
			ix.count++
			return
		}
		if e.dist < cur.dist {
			ix.maxDist = max(ix.maxDist, cur.dist)
			*e, cur = cur, *e
		}
		cur.dist++
		if i++; i == ix.n {
			i = 0
		}
	}
}

// removeAt empties cell pos and shifts the following displaced entries one
// cell back, so no tombstone is left.
func (ix *index) removeAt(pos uint64) {
	cells := ix.cells
	i := pos
	for {
		j := i + 1
		if j == ix.n {
			j = 0
		}
		next := cells[j]
		if next.ref == 0 || next.dist == 0 {
			cells[i] = entry{}
			break
		}
		next.dist--
		cells[i] = next
		i = j
	}
	ix.count--
}

// mix is the 64-bit mixer of the overflow index: the wyhash "mum" of the
// key xored with two constants, one 64×64→128-bit multiply with the halves
// folded, so every output bit depends on every key bit. Measured
// (BenchmarkHash, BenchmarkHashQuality): several times cheaper than
// xxhash.Sum64 of the 8 key bytes and as even on sequential, strided,
// two-counter and random keys.
func mix(seq uint64) uint64 {
	hi, lo := bits.Mul64(seq^0xa0761d6478bd642f, seq^0xe7037ed1a0b428db)
	return hi ^ lo
}

// overKey returns seq's probe key in over.
func overKey(seq uint64) uint32 { return uint32(mix(seq) >> 32) }
