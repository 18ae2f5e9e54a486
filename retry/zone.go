package retry

import (
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/timerwheel"
)

// zone is one zone's state: its route, configuration, context table,
// timing wheel and counters.
type zone struct {
	key   Zone
	idx   uint64 // 1-based; the top bits of the zone's sequence numbers
	table *ctxtable.Table[ctxMeta]
	wheel *timerwheel.Wheel
	route atomic.Pointer[route]
	conf  atomic.Pointer[Conf] // nil until a conf:// element arrives
	seq   atomic.Uint64        // sequence counter
	rr    atomic.Uint32        // round-robin position (SPEC R13, "ordinary balancing")

	// limit is the most contexts the zone's wheel has room for; the zone's
	// cap is min(the client's cap, limit).
	limit int64

	capLog     rateLimit
	exhaustLog rateLimit
	stats      zoneCounters
}

// maxContexts returns the zone's context cap for the client's cap n.
func (z *zone) maxContexts(n int64) int64 { return min(n, z.limit) }

// route is an immutable snapshot of a zone's proxies, replaced whole on
// each route update so that senders read it without a lock.
type route struct {
	ids   []ProxyID
	hosts []uint16 // hosts[i] is the client-wide host number of ids[i]
}

func (r *route) has(id ProxyID) bool {
	for _, x := range r.ids {
		if x == id {
			return true
		}
	}
	return false
}

// Context kinds.
const (
	kindPlain  uint8 = iota // no read retry: waits Config.WaitTimeout, never re-sent
	kindSimple              // simple read with read retry (SPEC R6)
	kindBatch               // batch read with read retry (SPEC R10, R11: missing keys)
	kindIndex               // index read with read retry (SPEC R10, R11: resume)
)

// maxAttempts is the most packets one request can send: the first and
// MaxMaxRetries re-sends.
const maxAttempts = 1 + MaxMaxRetries

// ctxMeta is the fixed part of one in-flight request's context. It holds no
// Go pointer, so the context table's slabs stay invisible to the garbage
// collector (SPEC R15); the packed frame, the user buffer and a batch read's
// bitset of answered keys live in the table's payload slab.
//
// Ownership: Send fills it before Insert; after the first frame is out,
// only the poller (RecvResponse) touches it, except the timer field, which
// the sender publishes once with a CAS and both sides access atomically.
type ctxMeta struct {
	asyncID  uint64
	timer    uint64 // timerwheel.Handle of the pending timer, 0 if none known; atomic
	deadline int64  // end of the current segment (or wait), ns since the epoch
	progress uint64 // index reads: next stream position wanted; batch reads: keys answered; plain: next packet index
	firstMs  uint32 // first send, ms since the epoch (mod 2^32): only for the exhaustion log's cost
	budgetUs uint32 // the class budget the request was sent with (SPEC R1), µs (MaxBudget fits)
	nkeys    uint32 // batch reads: keys in the request
	tried    [maxAttempts]ProxyID
	cmd      uint8 // wire.Command: every command the codec carries is below 256
	ntried   uint8
	retries  uint8 // re-sends used (SPEC R10: only grows)
	max      uint8 // MaxRetries of the zone's configuration at send time
	kind     uint8
	done     bool   // the final result is queued or delivered
	gen      uint16 // timer generation: a timer whose id carries another is stale
}

// budget returns the request's class budget.
func (m *ctxMeta) budget() time.Duration { return time.Duration(m.budgetUs) * time.Microsecond }

// timerID is a timer's id in the zone's wheel: the sequence counter and the
// context's timer generation.
func timerID(seq uint64, gen uint16) uint64 { return seq&counterMask | uint64(gen)<<counterBits }

func (m *ctxMeta) hasTried(id ProxyID) bool {
	for _, x := range m.tried[:m.ntried] {
		if x == id {
			return true
		}
	}
	return false
}

// proxySet is a small set of proxies a caller skips (those whose Send just
// failed). Its size bounds how many send failures one choice tolerates.
type proxySet struct {
	ids [64]ProxyID
	n   int
}

func (s *proxySet) add(id ProxyID) {
	if s.n < len(s.ids) {
		s.ids[s.n] = id
		s.n++
	}
}

func (s *proxySet) has(id ProxyID) bool {
	for _, x := range s.ids[:s.n] {
		if x == id {
			return true
		}
	}
	return false
}

func (s *proxySet) full() bool { return s.n == len(s.ids) }

// choose picks the proxy for the next attempt of m (SPEC R13): an available
// proxy on a host not tried yet for this request; else an untried port on a
// tried host; else, every available proxy having been tried, the least
// recently tried one. Among equals it takes the next in round-robin order
// from the zone's counter. Unavailable proxies and those in skip are passed
// over; ok is false if none is left. It allocates nothing: routes are
// short, and a request has at most nine attempts.
func (c *Client) choose(z *zone, m *ctxMeta, skip *proxySet) (ProxyID, bool) {
	if skip.full() {
		return 0, false
	}
	rt := z.route.Load()
	n := len(rt.ids)
	if n == 0 {
		return 0, false
	}
	infos := *c.proxies.Load()
	start := int((z.rr.Add(1) - 1) % uint32(n))
	best, bestRank, bestLast := -1, 3, maxAttempts+1
	for k := 0; k < n; k++ {
		i := start + k
		if i >= n {
			i -= n
		}
		id := rt.ids[i]
		if skip.has(id) || !c.tr.Available(id) {
			continue
		}
		// rank 0: untried host; 1: untried port on a tried host; 2: tried.
		rank, last := 0, -1
		for j, t := range m.tried[:m.ntried] {
			if t == id {
				rank, last = 2, j
			} else if rank == 0 && int(t) < len(infos) && infos[t].host == rt.hosts[i] {
				rank = 1
			}
		}
		if rank < bestRank || (rank == 2 && bestRank == 2 && last < bestLast) {
			best, bestRank, bestLast = i, rank, last
			if rank == 0 {
				break
			}
		}
	}
	if best < 0 {
		return 0, false
	}
	return rt.ids[best], true
}
