package idem

import (
	"hash/maphash"
	"sync"
)

// Scopes, quotas and eviction of a Memory store (one of memory.go's jobs;
// SPEC I5 round 3). A store key made by ScopedKey with a non-empty scope
// belongs to that scope; every other key (no separator, or the empty
// scope of GlobalScope) belongs to the unscoped party, id 0, which has no
// quota. Two ledgers:
//
//   - store-wide, per scope: its live entries (claims, pending or done,
//     and tokens) and the bytes of its stored results, in a striped table
//     (scopeStripes mutexes, each locked after a shard's, never before);
//   - per shard, per scope: its done entries in order of completion (a
//     list through memSlot.prev/next), their number and bytes.
//
// A claim or token of a scope at its entry quota is refused (ErrQuota). A
// result that would take its scope past its byte quota first evicts that
// scope's oldest done entries in the shard. A shard at its share of
// Capacity or MaxBytes evicts the oldest done entry of the claimant's own
// scope, and only when that scope has none there, of the scope holding
// the most there (entries for room, bytes for bytes; the older head on a
// tie): a scope that floods the store gives way first, and nobody else's
// answers go while it has any.

// scopeStripes is the number of independently locked parts of the
// store-wide scope table.
const scopeStripes = 64

// scopeUse is one scope's store-wide use.
type scopeUse struct {
	entries int32
	bytes   int64
}

type scopeStripe struct {
	mu  sync.Mutex
	use map[uint64]scopeUse
	_   [40]byte // keeps neighbouring stripes off one cache line
}

// doneList is one scope's done entries in one shard, oldest first.
type doneList struct {
	head, tail uint32 // slot index + 1; noSlot ends
	n          int32
	bytes      int64
}

// scopeID returns the id of key's scope: 0 for the unscoped party, else a
// seeded hash of the scope that is never 0.
func (m *Memory) scopeID(key []byte) uint64 {
	scope, ok := keyScope(key)
	if !ok || len(scope) == 0 {
		return 0
	}
	return maphash.Bytes(m.seed, scope) | 1
}

func (m *Memory) stripe(sid uint64) *scopeStripe { return &m.stripes[sid%scopeStripes] }

// charge counts one more live entry against scope sid, or reports false
// (counting nothing) when the scope is at its entry quota.
func (m *Memory) charge(sid uint64) bool {
	if sid == 0 || m.quota < 0 {
		return true
	}
	st := m.stripe(sid)
	st.mu.Lock()
	u := st.use[sid]
	ok := int(u.entries) < m.quota
	if ok {
		u.entries++
		st.use[sid] = u
	}
	st.mu.Unlock()
	return ok
}

// account adds entries and bytes (either may be negative) to scope sid's
// use, dropping the scope from the table when it holds nothing.
func (m *Memory) account(sid uint64, entries int32, bytes int64) {
	if sid == 0 || m.quota < 0 {
		return
	}
	st := m.stripe(sid)
	st.mu.Lock()
	u := st.use[sid]
	u.entries += entries
	u.bytes += bytes
	if u.entries <= 0 && u.bytes <= 0 {
		delete(st.use, sid)
	} else {
		st.use[sid] = u
	}
	st.mu.Unlock()
}

// scopeBytes returns scope sid's stored bytes, store-wide.
func (m *Memory) scopeBytes(sid uint64) int64 {
	if sid == 0 || m.quota < 0 {
		return 0
	}
	st := m.stripe(sid)
	st.mu.Lock()
	b := st.use[sid].bytes
	st.mu.Unlock()
	return b
}

// linkDone appends slot to the tail of its scope's done list.
func (sh *memShard) linkDone(slot uint32) {
	s := &sh.slots[slot]
	sh.seq++
	s.seq = sh.seq
	l := sh.done[s.scope]
	s.prev, s.next = l.tail, noSlot
	if l.tail != noSlot {
		sh.slots[l.tail-1].next = slot + 1
	} else {
		l.head = slot + 1
	}
	l.tail = slot + 1
	l.n++
	l.bytes += int64(len(sh.results[slot]))
	sh.done[s.scope] = l
}

// unlinkDone removes slot from its scope's done list.
func (sh *memShard) unlinkDone(slot uint32) {
	s := &sh.slots[slot]
	l := sh.done[s.scope]
	if s.prev != noSlot {
		sh.slots[s.prev-1].next = s.next
	} else {
		l.head = s.next
	}
	if s.next != noSlot {
		sh.slots[s.next-1].prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = noSlot, noSlot
	l.n--
	l.bytes -= int64(len(sh.results[slot]))
	if l.n == 0 {
		delete(sh.done, s.scope)
	} else {
		sh.done[s.scope] = l
	}
}

// victim returns the done entry (slot index + 1) to evict for a claimant of
// scope sid: the oldest of sid's own in the shard, else the oldest of the
// scope holding the most there — by bytes when byBytes, else by entries —
// and noSlot when the shard holds no done entry.
func (sh *memShard) victim(sid uint64, byBytes bool) uint32 {
	if l, ok := sh.done[sid]; ok {
		return l.head
	}
	var best doneList
	found := false
	for _, l := range sh.done {
		if !found || more(l, best, byBytes) || !more(best, l, byBytes) && older(sh.slots[l.head-1].seq, sh.slots[best.head-1].seq) {
			best, found = l, true
		}
	}
	if !found {
		return noSlot
	}
	return best.head
}

// more reports whether a holds more than b (bytes or entries).
func more(a, b doneList, byBytes bool) bool {
	if byBytes {
		return a.bytes > b.bytes
	}
	return a.n > b.n
}

// older reports whether completion number a came before b (they wrap).
func older(a, b uint32) bool { return int32(a-b) < 0 }

// evict removes a done entry (slot index + 1, not noSlot), counting it as
// an eviction if it was still live.
func (m *Memory) evict(sh *memShard, v uint32, now int64) {
	slot := v - 1
	if sh.slots[slot].expires > now {
		m.evictions.Add(1)
	}
	m.remove(sh, slot, true)
}
