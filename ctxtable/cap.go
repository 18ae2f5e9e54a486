package ctxtable

import "fmt"

// Cap accounting (SPEC R2) without a global counter on the hot path, for a
// table that has a cap; a table without one (the default, and the engine's
// since it counts its contexts per zone itself) skips all of this.
//
// A single atomic count would be written by every Insert and Delete on
// every core: one contended cache line for the whole table. Instead the
// table keeps the unreserved part of the cap in pool and lets each shard
// hold credit, units of cap taken from the pool in batches and spent or
// refilled under the shard's own lock. At all times
//
//	cap = pool + Σ shard.credit + Σ contexts held
//
// Far from the cap (pool ≥ lowWater) an Insert spends local credit and a
// Delete returns its unit to local credit, so neither touches a shared line
// except to read pool. Near the cap (pool < lowWater) credit is no longer
// hoarded: an Insert takes exactly one unit from the pool and a Delete gives
// one back, and an Insert that finds the pool empty while some shard may
// still hold credit drains every shard's credit into the pool (one shard
// lock at a time) and tries once more. So ErrFull is exact: a lone
// goroutine can fill the table to exactly Cap contexts and gets ErrFull on
// the next, whatever the shard count; under concurrency an Insert can only
// see the count as of some moment during its call, as with any counter.
//
// Len reads each shard's count (an atomic written under the shard lock), so
// it never takes a lock either.

// maxBatch bounds the credit one refill takes.
const maxBatch = 256

// batchFor returns the refill batch for a cap over shards: small enough
// that all shards' credit together is a small part of the cap.
func batchFor(capacity, shards int) int64 {
	return int64(max(1, min(maxBatch, capacity/(16*shards))))
}

// lowWater is the pool level below which credit is not hoarded: twice the
// credit all shards may hold.
func (t *Table[M]) lowWater(batch int64) int64 {
	return 2 * batch * int64(len(t.shards))
}

type reservation uint8

const (
	reserved   reservation = iota
	capFull                // no room: ErrFull
	drainFirst             // pool empty but shards may hold credit: drain and retry
)

// reserve takes one unit of cap for an insert into sh. sh.mu is held.
func (t *Table[M]) reserve(sh *shard) reservation {
	if sh.credit > 0 {
		sh.credit--
		return reserved
	}
	for {
		p := t.pool.Load()
		b := t.batch.Load()
		switch {
		case p >= t.lowWater(b):
			if t.pool.CompareAndSwap(p, p-b) {
				sh.credit = b - 1
				t.markHoarded()
				return reserved
			}
		case p > 0:
			if t.pool.CompareAndSwap(p, p-1) {
				return reserved
			}
		case t.hoarded.Load():
			return drainFirst
		default:
			return capFull
		}
	}
}

// release gives back the unit of a deleted context. sh.mu is held.
func (t *Table[M]) release(sh *shard) {
	b := t.batch.Load()
	if t.pool.Load() < t.lowWater(b) {
		t.pool.Add(1)
		return
	}
	sh.credit++
	t.markHoarded()
	if sh.credit > 2*b {
		sh.credit -= b
		t.pool.Add(b)
	}
}

func (t *Table[M]) markHoarded() {
	if !t.hoarded.Load() {
		t.hoarded.Store(true)
	}
}

// drain moves every shard's credit back to the pool, one shard lock at a
// time (never while holding another, so it cannot deadlock).
func (t *Table[M]) drain() {
	t.hoarded.Store(false)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if sh.credit > 0 {
			t.pool.Add(sh.credit)
			sh.credit = 0
		}
		sh.mu.Unlock()
	}
}

// SetCap changes the cap at run time (SPEC R1/R2: a new value applies to
// inserts after it). n ≤ 0 removes the cap. Lowering the cap below Len
// drops nothing: live contexts stay until deleted, and Insert returns
// ErrFull until Len is below the new cap. A cap above MaxCap returns an
// error wrapping ErrInvalidConfig and changes nothing. Safe to call
// concurrently with every other method; SetCap calls are serialized.
// Setting or removing the cap, and lowering it, visit each shard's lock.
func (t *Table[M]) SetCap(n int) error {
	if n > MaxCap {
		return fmt.Errorf("%w: cap %d above MaxCap %d", ErrInvalidConfig, n, MaxCap)
	}
	t.capMu.Lock()
	defer t.capMu.Unlock()
	if !t.capped.Load() || n <= 0 {
		// Switching the accounting on or off: with every shard locked, no
		// Insert or Delete is halfway through it, and the pool starts from
		// the contexts actually held.
		for i := range t.shards {
			t.shards[i].mu.Lock()
		}
		held := 0
		for i := range t.shards {
			held += t.shards[i].n
			t.shards[i].credit = 0
		}
		t.hoarded.Store(false)
		if n <= 0 {
			t.cap.Store(0)
			t.pool.Store(0)
			t.capped.Store(false)
		} else {
			t.cap.Store(int64(n))
			t.batch.Store(batchFor(n, len(t.shards)))
			t.pool.Store(int64(n - held))
			t.capped.Store(true)
		}
		for i := range t.shards {
			t.shards[i].mu.Unlock()
		}
		return nil
	}
	old := t.cap.Swap(int64(n))
	t.batch.Store(batchFor(n, len(t.shards)))
	t.pool.Add(int64(n) - old)
	if int64(n) < old {
		t.drain()
	}
	return nil
}

// Cap returns the current cap (contexts); 0: none.
func (t *Table[M]) Cap() int { return int(t.cap.Load()) }

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
