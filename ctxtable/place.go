package ctxtable

import "math/bits"

// Placement chooses how a sequence number picks its shard and its cell.
type Placement uint8

const (
	// PlaceCounter is for sequence numbers drawn from a counter (consecutive,
	// or increasing with gaps), as the engine makes them. The low bits pick
	// the shard, so consecutive numbers go round-robin over the shards and
	// concurrent senders rarely meet on a lock. The bits above them pick a
	// cell of the shard's ring directly (no hashing, no probing), so
	// contexts inserted, answered and deleted in about the order they were
	// sent walk their index cells, slots and payload blocks sequentially
	// instead of missing the cache at random: measured 3–5× faster than
	// PlaceHashed with 500,000 resident (BenchmarkPlacement).
	//
	// A context that outlives a lap of the ring (a straggler) or whose cell
	// is taken for any other reason moves to the shard's overflow index, a
	// hashed Robin Hood table (the overflow index), so probes stay bounded for any key
	// pattern. Keys whose low bits are all equal (a stride that is a
	// multiple of the shard count) share one shard: correct, only
	// unsharded.
	PlaceCounter Placement = iota
	// PlaceHashed runs every key through the mixer, which picks the shard
	// from its top bits and the probe key from the 32 bits below; every
	// context lives in the hashed index. Any key pattern spreads evenly over
	// shards and cells, at the price of a random cache line per operation.
	PlaceHashed
)

// mix is the 64-bit mixer of PlaceHashed and of the overflow index: the
// wyhash "mum" of the key xored with two constants, one 64×64→128-bit
// multiply with the halves folded, so every output bit depends on every key
// bit. Measured (BenchmarkHash, BenchmarkHashQuality): several times cheaper
// than xxhash.Sum64 of the 8 key bytes and as even on sequential, strided,
// two-counter and random keys. A plain Fibonacci multiply is ~1.5 ns cheaper
// still, but its output bits depend only on the key bits at or below them,
// and the shard and probe bits come from different parts of the hash; on
// the hashed path, where each operation is dominated by a cache miss, the
// robust mixer costs nothing measurable.
func mix(seq uint64) uint64 {
	hi, lo := bits.Mul64(seq^0xa0761d6478bd642f, seq^0xe7037ed1a0b428db)
	return hi ^ lo
}

// shardFor returns the shard of seq and, under PlaceHashed, seq's mix (0
// otherwise), which overKey reuses.
func (t *Table[M]) shardFor(seq uint64) (*shard[M], uint64) {
	if t.hashed {
		h := mix(seq)
		return &t.shards[h>>(64-t.shardBits)], h
	}
	return &t.shards[seq&t.shardMask], 0
}
