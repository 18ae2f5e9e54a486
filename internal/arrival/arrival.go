// Package arrival is the order in which a read-retry engine's answers
// arrive, for the benchmarks of the tables that hold in-flight contexts
// (ctxtable's own and bench's side-by-side ones, SPEC R2, R15), so that
// both touch a table the same way.
//
// Sends go out in counter order k = 0, 1, 2, …, round robin over Proxies
// proxies (SPEC R13's ordinary balancing). Each proxy answers its share in
// order over its own TCP stream, with its own latency, so the answers are
// Proxies in-order streams merged, proxy p's running Lag(p) positions
// behind proxy 0's (0, 64, 320, 1344). One answer in 128 is a straggler
// that comes 65,536 answers late (a slow proxy, a lost packet re-sent). A
// table then sees a stream of inserts and four streams of lookups and
// deletes some way behind it: neither one hot cache line nor random keys.
package arrival

// Proxies is the number of proxies, hence of answer streams.
const Proxies = 4

// straggleBy is how many answers later than its turn a straggler comes.
const straggleBy = 65536

// Lag returns how many positions proxy p's answers run behind proxy 0's:
// 64·(4^p − 1)/3.
func Lag(p int) uint64 { return 64 * ((1 << (2 * p)) - 1) / 3 }

// Straggler reports whether k's answer comes late: 1 in 128, spread by a
// multiplicative hash.
func Straggler(k uint64) bool { return (k*0x9E3779B97F4A7C15)>>57 == 0 }

// Order yields the answers' order as counter values k. The zero value
// starts at k = 0. An Order is about 16 KiB (the stragglers in wait) and is
// not safe for concurrent use: one per benchmark worker.
type Order struct {
	next       [Proxies]uint64 // proxy p's next answer is k = next[p]·Proxies + p
	given      uint64          // answers handed out
	head, tail uint64          // stragglers waiting in late
	late       [1024]struct{ k, due uint64 }
}

// Take returns the k answered next: k arrives at time k + Lag(k mod
// Proxies), so the next answer is the earliest of the streams' heads, or a
// straggler whose time has come. Every k is answered exactly once, and
// never before it was sent.
func (a *Order) Take() uint64 {
	a.given++
	if a.head != a.tail {
		if s := &a.late[a.head%uint64(len(a.late))]; s.due <= a.given {
			a.head++
			return s.k
		}
	}
	for {
		best, at := 0, uint64(1<<63)
		for p := range Proxies {
			if t := a.next[p]*Proxies + uint64(p) + Lag(p); t < at {
				best, at = p, t
			}
		}
		k := a.next[best]*Proxies + uint64(best)
		a.next[best]++
		if Straggler(k) && a.tail-a.head < uint64(len(a.late)) {
			a.late[a.tail%uint64(len(a.late))] = struct{ k, due uint64 }{k, a.given + straggleBy}
			a.tail++
			continue
		}
		return k
	}
}

// Front returns the highest k any stream has answered: every k above it
// is still unanswered, hence resident in the table (stragglers aside,
// which are below it).
func (a *Order) Front() uint64 {
	f := uint64(0)
	for p := range Proxies {
		if a.next[p] > 0 {
			f = max(f, (a.next[p]-1)*Proxies+uint64(p))
		}
	}
	return f
}
