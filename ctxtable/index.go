package ctxtable

import (
	"math"
	"math/bits"
)

// entry is one cell of a shard's index: a sequence number and the meta slot
// that holds its context. Entries are the only thing that ever moves
// (Robin Hood displacement on insert, backward shift on delete); slots and
// payload blocks stay where they are, which is what keeps a Ref valid.
type entry struct {
	seq  uint64
	slot uint32 // 1 + slot id; 0 marks an empty cell
	dist uint32 // distance from the entry's home cell, in cells
}

// index is a Robin Hood open-addressing array with linear probing and
// backward-shift deletion, so it never holds tombstones: probe lengths under
// endless insert/delete churn stay what the load factor gives, not what
// history left behind. Its length is odd, so a key stride that is a power of
// two cannot make keys share cells; the home cell is the probe key mod the
// length, computed without a division (Lemire's fastmod).
type index struct {
	cells   []entry
	n       uint64 // len(cells), always odd
	magic   uint64 // ^uint64(0)/n + 1, for the division-free p mod n
	count   int    // cells in use
	growAt  int    // count above which the index doubles (load 7/8)
	maxDist uint32 // longest displacement any entry has had (high-water mark)
}

// maxLoadNum/maxLoadDen is the load above which a shard's index doubles.
const (
	maxLoadNum = 7
	maxLoadDen = 8
	// sizeLoad is the load a shard's index is sized for when the table is
	// exactly at its cap and its contexts spread evenly plus a 4σ margin.
	sizeLoad = 0.85
)

// cellsFor returns the index length for a shard expected to hold at most
// perShard contexts (the cap divided by the shard count).
func cellsFor(perShard int) int {
	want := float64(perShard) + 4*math.Sqrt(float64(perShard)) + 8
	return max(int(math.Ceil(want/sizeLoad)), 8)
}

func (ix *index) init(n int) {
	n |= 1 // odd: see index
	ix.cells = make([]entry, n)
	ix.n = uint64(n)
	ix.magic = ^uint64(0)/ix.n + 1
	ix.count = 0
	ix.growAt = n * maxLoadNum / maxLoadDen
}

// home returns the home cell of probe key p: p mod n. Consecutive keys get
// consecutive cells, which is what makes PlaceCounter cache-friendly.
func (ix *index) home(p uint32) uint64 {
	hi, _ := bits.Mul64(ix.magic*uint64(p), ix.n)
	return hi
}

// findOrPlace looks seq up; if absent it returns the cell and distance where
// the Robin Hood insert of seq starts (pos ≥ 0, found false).
func (ix *index) findOrPlace(seq uint64, p uint32) (pos uint64, dist uint32, found bool) {
	i := ix.home(p)
	cells := ix.cells
	for d := uint32(0); ; d++ {
		e := &cells[i]
		if e.slot == 0 || e.dist < d {
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

// place stores seq→slot starting at cell pos with displacement dist (from
// findOrPlace), pushing richer entries forward, and returns the largest
// displacement it gave any entry. The caller made room.
func (ix *index) place(pos uint64, dist uint32, seq uint64, slot uint32) uint32 {
	cur := entry{seq: seq, slot: slot, dist: dist}
	cells := ix.cells
	var top uint32
	for i := pos; ; {
		e := &cells[i]
		if e.slot == 0 {
			*e = cur
			top = max(top, cur.dist)
			ix.maxDist = max(ix.maxDist, top)
			ix.count++
			return top
		}
		if e.dist < cur.dist {
			top = max(top, cur.dist)
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
		if next.slot == 0 || next.dist == 0 {
			cells[i] = entry{}
			break
		}
		next.dist--
		cells[i] = next
		i = j
	}
	ix.count--
}
