package ctxtable

// keys is one shard's map from sequence number to meta slot id. Under
// PlaceCounter it has two parts:
//
//   - ring: a direct-mapped array, one cell per probe key mod its length. A
//     sequence number drawn from a counter finds its cell with no probing,
//     and consecutive numbers sit in consecutive cells, so contexts that are
//     inserted, answered and deleted in about the order they were sent touch
//     the index sequentially.
//   - over: a Robin Hood index with hashed probe keys for whatever does not
//     fit the ring: when a cell is taken, the older of the two sequence
//     numbers moves to over. Stragglers (contexts that outlive a lap of the
//     ring) end up there; the ring keeps the recent ones. A lookup reads the
//     ring cell and goes to over only if the cell holds another number and
//     over is not empty.
//
// Any key pattern keeps bounded probes this way: the ring never probes, over
// is a hashed Robin Hood table with backward-shift deletion. Under
// PlaceHashed the ring is unused and over holds everything.
type keys struct {
	ring index // never probed: entries sit in their own cell (growAt, shrinkAt size it)
	over index
}

// count returns the contexts indexed.
func (k *keys) count() int { return k.ring.count + k.over.count }

// ringPos returns seq's ring cell (PlaceCounter). Identity on the bits above
// the shard bits; bits above 32 are folded in with an odd multiplier so keys
// differing only there land apart.
func (t *Table[M]) ringPos(k *keys, seq uint64) uint64 {
	x := seq >> t.shardBits
	return k.ring.home(uint32(x) + uint32(x>>32)*0x9e3779b9)
}

// overKey returns seq's probe key in over; h is mix(seq) under PlaceHashed
// (from shardFor), unused otherwise. It never uses the bits that picked the
// shard.
func (t *Table[M]) overKey(seq, h uint64) uint32 {
	if t.hashed {
		return uint32(h >> (32 - t.shardBits))
	}
	return uint32(mix(seq) >> 32)
}

// rehashKey is overKey for an entry being moved, whose hash is not at hand
// (the caller passes mix(seq) only under PlaceHashed; overKey ignores it
// otherwise).
func (t *Table[M]) rehashKey(seq uint64) uint32 { return t.overKey(seq, mix(seq)) }

// where is a found entry's place: a ring cell, or a cell of over.
type where struct {
	pos    uint64
	inRing bool
}

// find returns where seq's entry is.
func (t *Table[M]) find(k *keys, seq, h uint64) (where, bool) {
	if !t.hashed {
		r := t.ringPos(k, seq)
		if e := &k.ring.cells[r]; e.seq == seq && e.slot != 0 {
			return where{r, true}, true
		}
		if k.over.count == 0 {
			return where{}, false
		}
	}
	pos, _, ok := k.over.findOrPlace(seq, t.overKey(seq, h))
	return where{pos, false}, ok
}

// slotAt returns the slot id stored at w.
func (k *keys) slotAt(w where) uint32 {
	if w.inRing {
		return k.ring.cells[w.pos].slot - 1
	}
	return k.over.cells[w.pos].slot - 1
}

// add indexes seq → slot (slot+1 encoded, as in entry); seq must be absent.
// It grows the ring or over first if they are at load 7/8.
func (t *Table[M]) add(sh *shard[M], seq, h uint64, slot uint32) {
	k := &sh.keys
	if t.hashed {
		if k.over.count >= k.over.growAt {
			t.rebuild(sh, t.growTo(int(k.over.n)))
		}
		t.addOver(k, seq, h, slot)
		return
	}
	if k.count() >= k.ring.growAt {
		t.rebuild(sh, t.growTo(int(k.ring.n)))
	}
	r := t.ringPos(k, seq)
	e := &k.ring.cells[r]
	switch {
	case e.slot == 0:
		*e = entry{seq: seq, slot: slot}
		k.ring.count++
		return
	case e.seq < seq:
		// The cell's number is older: it moves to over, the newer takes
		// the cell (the ring follows the counter).
		old := *e
		*e = entry{seq: seq, slot: slot}
		seq, slot = old.seq, old.slot
	}
	t.addOver(k, seq, 0, slot)
}

// addOver places seq in over, doubling over first if it is at load 7/8.
func (t *Table[M]) addOver(k *keys, seq, h uint64, slot uint32) {
	if !t.hashed && k.over.count >= k.over.growAt {
		k.over.resize(2*int(k.over.n), t.rehashKey)
	}
	pos, dist, _ := k.over.findOrPlace(seq, t.overKey(seq, h))
	k.over.place(pos, dist, seq, slot)
}

// remove drops the entry at w and shrinks what became nearly empty.
func (t *Table[M]) remove(sh *shard[M], w where) {
	k := &sh.keys
	if w.inRing {
		k.ring.cells[w.pos] = entry{}
		k.ring.count--
	} else {
		k.over.removeAt(w.pos)
	}
	if t.hashed {
		if k.over.count < k.over.shrinkAt() && k.over.n > minCells {
			t.rebuild(sh, max(minCells, int(k.over.n/2)))
		}
		return
	}
	if k.count() < k.ring.shrinkAt() && k.ring.n > minCells {
		t.rebuild(sh, max(minCells, int(k.ring.n/2)))
	} else if !w.inRing && k.over.count < k.over.shrinkAt() && k.over.n > minCells {
		k.over.resize(max(minCells, int(k.over.n/2)), t.rehashKey)
	}
}

// rebuild re-indexes the shard with n main cells (the ring, or over under
// PlaceHashed). Only index entries move; slots and payload blocks stay put,
// so every Ref stays valid.
func (t *Table[M]) rebuild(sh *shard[M], n int) {
	k := &sh.keys
	if t.hashed {
		k.over.resize(n, t.rehashKey)
		return
	}
	oldRing, oldOver := k.ring.cells, k.over.cells
	maxDist := k.over.maxDist
	k.ring.init(n)
	k.over.init(minCells)
	k.over.maxDist = maxDist
	for _, cells := range [2][]entry{oldRing, oldOver} {
		for i := range cells {
			if e := &cells[i]; e.slot != 0 {
				t.add(sh, e.seq, 0, e.slot)
			}
		}
	}
}

// resize rehashes ix into n cells; key gives each entry's probe key.
func (ix *index) resize(n int, key func(seq uint64) uint32) {
	old := ix.cells
	maxDist := ix.maxDist
	ix.init(n)
	for i := range old {
		if e := &old[i]; e.slot != 0 {
			pos, dist, _ := ix.findOrPlace(e.seq, key(e.seq))
			ix.place(pos, dist, e.seq, e.slot)
		}
	}
	ix.maxDist = max(ix.maxDist, maxDist)
}

// growTo returns the main index length after growth: doubling, but stopping
// once at the size that fits the current cap, so a full table sits near
// sizeLoad instead of anywhere between 7/16 and 7/8.
func (t *Table[M]) growTo(n int) int {
	capN := cellsFor((t.Cap() + len(t.shards) - 1) / len(t.shards))
	if n < capN && 2*n > capN {
		return capN
	}
	return 2 * n
}

// shrinkAt returns the count below which an index halves (load 1/8; after
// halving the load is at most 1/4, far from the 7/8 that grows it).
func (ix *index) shrinkAt() int { return int(ix.n / 8) }
