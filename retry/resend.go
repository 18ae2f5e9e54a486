package retry

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/wire"
)

// onFire handles one timer of the zone being advanced: a segment (or a
// plain request's wait) that ended without the answer it waited for.
func (p *poller) onFire(id uint64) {
	z := p.zone
	f, ok := p.flight(z, z.idx<<counterBits|id&counterMask)
	if !ok {
		return // the request ended before its first timer's handle was known
	}
	if f.m.gen != uint16(id>>counterBits) || f.m.done() {
		return // a stale timer: the context has re-armed or ended since
	}
	if atomic.LoadUint64(&f.m.timer) == sendToken(f.seq) {
		// The first timer fired before its sender published the handle
		// (the sender stalled between scheduling and its compare-and-swap,
		// send.go): the sender still writes this context, so the poller
		// must not end it and let the table reuse its block under that
		// write. It looks again a tick later, once the handle is out; the
		// first attempt's deadline has passed by then and is handled as
		// usual (SPEC R6, R14).
		if _, err := z.wheel.ScheduleOffset(time.Duration(f.now)+p.c.tick, id); err == nil {
			return
		}
	}
	atomic.StoreUint64(&f.m.timer, 0)
	f.onDeadline()
}

// onDeadline handles every segment of the request that has ended by now,
// in this one poll (SPEC R14): when segments are shorter than the poll
// interval or the wheel's tick, each one past due is re-sent in turn and the
// request gives up at the budget's end, never one segment per poll. It then
// arms the timer for the segment still running.
func (f *flight) onDeadline() {
	m := f.m
	for !m.done() {
		if m.deadline > f.now {
			// Not over yet: the first timer of a request whose earlier
			// segments were handled here, a complex read whose wait an
			// accepted packet extended after the timer was set (lazy
			// re-arm), or a read that may send nothing more waiting for
			// the end of its budget.
			f.arm()
			return
		}
		if m.kind != kindPlain {
			f.suspectSilent() // SPEC §7 R13 round 3: the silent attempts' proxies
		}
		switch {
		case m.kind == kindPlain:
			f.z.stats.waitTimeouts.Add(1)
			f.finish(ResultWaitRspTimeout)
		case !f.mayResend():
			if m.kind == kindSimple && f.simpleEnd() > m.deadline {
				// SPEC §7 R9/R8/R19: error-code re-sends cut segments
				// short, but a simple read without a good answer still
				// waits for its attempts until first send + T.
				m.deadline = f.simpleEnd()
				continue
			}
			f.giveUp()
		case !f.grantRetry(m.deadline):
			// SPEC R19: the storm guard refused; the read waits for the
			// attempts already out until its budget ends (grantRetry
			// moved the deadline).
		default:
			f.z.stats.retriesTimeout.Add(1)
			f.resend(m.deadline)
		}
	}
}

// giveUp ends a read whose last segment is over (SPEC R9): with what it
// holds (SPEC R8), or ResultReadRetryTimeout.
func (f *flight) giveUp() {
	if f.m.flags&flagHeld != 0 {
		f.settle()
		return
	}
	f.exhaust(ResultReadRetryTimeout)
}

// budgetEnd returns when the request ends if it sends no more attempts
// from base on, base being when its next segment would start (the current
// segment's end after a timeout, now after an error code). A simple read
// ends at first send + T whatever happened before (SPEC §7 R9/R8/R19); a
// complex read waits out the segments its remaining retries would have had,
// each starting where the one before would have ended (SPEC R10, R19).
func (f *flight) budgetEnd(base int64) int64 {
	m := f.m
	if m.kind == kindSimple {
		return f.simpleEnd()
	}
	r, n := int(m.retries), int(m.max)
	return base + int64(triangle(n+1)-triangle(r+1))*int64(segmentUnit(m.budget(), n))
}

// grantRetry asks the zone's storm guard for one re-send (SPEC R19). A
// refusal is counted and stops the request's re-sends for good: the read
// waits for the attempts already out (and an error answer is held, SPEC
// R8) until its budget ends, which budgetEnd computes from base, when the
// refused segment would have started; the deadline never moves earlier.
func (f *flight) grantRetry(base int64) bool {
	g := f.z.guard
	if g == nil || g.TryRetryAt(f.c.at(f.now)) {
		return true
	}
	f.z.stats.retriesRefused.Add(1)
	f.m.deadline = max(f.m.deadline, f.budgetEnd(base))
	f.m.flags |= flagNoResend
	return false
}

// resend sends the next attempt of a read (SPEC R6, R8, R10, R11): the
// whole request for a simple read, the unanswered keys of a batch, the rest
// of an index stream from the next position wanted, each rebuilt from the
// packed original. base is when the next segment starts: the end of the
// last one for a timeout, now for an error code. A retry is used even if no
// proxy is available to take it. The caller arms the timer.
func (f *flight) resend(base int64) {
	m := f.m
	m.retries++
	r, n := int(m.retries), int(m.max)
	budget := m.budget()
	switch {
	case m.kind == kindSimple && m.flags&flagHedged != 0:
		m.deadline = base + hedgedSegment(f.simpleEnd(), base, r, n) // SPEC R21
	case m.kind == kindSimple:
		m.deadline = base + int64(segmentEnd(budget, n, r+1)-segmentEnd(budget, n, r))
	default:
		m.deadline = base + int64(r+1)*int64(segmentUnit(budget, n))
	}
	frame, records, err := f.rebuild(uint16(r))
	if err != nil {
		if errors.Is(err, wire.ErrPosition) || errors.Is(err, wire.ErrNothingMissing) {
			// Nothing is left to ask for (onComplex normally ends such a
			// request at its last record): it is complete.
			f.finish(ResultOK)
			return
		}
		// The original was checked when it was packed: not reached.
		f.exhaust(ResultReadRetryTimeout)
		return
	}
	f.sendAttempt(frame, records)
	p := &f.c.poll
	if cap(frame) <= maxRetainedBuf {
		p.sendBuf = frame[:0]
	} else {
		p.sendBuf = nil // an outsized request's buffer is not kept (SPEC R15)
	}
}

// rebuild writes the next attempt's frame into the poller's send buffer
// and returns it with the number of records it asks for again.
func (f *flight) rebuild(attempt uint16) (frame []byte, records int, err error) {
	buf, orig := f.c.poll.sendBuf[:0], f.ref.Frame()
	switch f.m.kind {
	case kindBatch:
		return wire.AppendPartialBatch(buf, orig, f.batchBits(), attempt)
	case kindIndex:
		frame, err = wire.AppendResume(buf, orig, f.indexNext(), attempt)
	default:
		frame, err = wire.AppendResend(buf, orig, attempt)
	}
	return frame, 1, err
}

// sendAttempt sends a re-sent frame to the proxy SPEC R13 chooses, moving on
// at once from a proxy whose Send fails, and records the proxy. A Send
// error wrapping ErrRequestRefused ends the attempt instead: the frame is
// sent nowhere.
func (f *flight) sendAttempt(frame []byte, records int) {
	z := f.z
	var skip proxySet
	for {
		id, ok := f.c.choose(z, f.scratch(), int(f.m.ntried), &skip)
		if !ok {
			z.stats.retriesNoProxy.Add(1)
			return
		}
		if err := f.c.tr.Send(id, frame); err != nil {
			if errors.Is(err, ErrRequestRefused) {
				// The request, not the proxy (SPEC R13, issue 29): no
				// other proxy would take it; it waits for the attempts
				// already out.
				return
			}
			z.stats.sendFailures.Add(1)
			f.c.suspect(id, f.now)
			skip.add(id)
			continue
		}
		f.addTried(id)
		z.stats.recordsResent.Add(uint64(records))
		return
	}
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

// choose picks the proxy for a re-send of a request whose first ntried
// attempts went to the proxies in tried (SPEC R13): an available proxy on a
// host not tried yet, a healthy one before a suspect one (SPEC §7 R13 round
// 3); else an untried port on a tried host, healthy first; else, every
// available proxy having been tried, the least recently tried one. Among
// equals it takes the next in round-robin order from the zone's re-send
// counter, which first sends never move (chooseFirst has its own).
// Unavailable proxies and those in skip are passed over; ok is false if
// none is left. It allocates nothing: routes are short, and a request has
// at most nine attempts.
func (c *Client) choose(z *zone, tried ctxScratch, ntried int, skip *proxySet) (ProxyID, bool) {
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
	best, bestRank, bestLast := -1, rankTried+1, maxAttempts+1
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		id := rt.ids[i]
		if skip.has(id) || !c.tr.Available(id) {
			continue
		}
		rank, last := rankUntriedHost, -1
		for j := range ntried {
			t := tried.tried(j)
			if t == id {
				rank, last = rankTried, j
			} else if rank == rankUntriedHost && int(t) < len(infos) && infos[t].host == rt.hosts[i] {
				rank = rankUntriedPort
			}
		}
		if rank != rankTried && c.isSuspect(&infos[id]) {
			rank++ // a suspect proxy after the healthy ones of its rank
		}
		if rank < bestRank || (rank == rankTried && bestRank == rankTried && last < bestLast) {
			best, bestRank, bestLast = i, rank, last
			if rank == rankUntriedHost {
				break
			}
		}
	}
	if best < 0 {
		return 0, false
	}
	return rt.ids[best], true
}

// The ranks of choose, best first: each untried rank has a healthy and a
// suspect step.
const (
	rankUntriedHost = 0 // healthy proxy on an untried host; 1: suspect
	rankUntriedPort = 2 // healthy untried port on a tried host; 3: suspect
	rankTried       = 4
)

// chooseFirst picks the proxy for a request's first attempt (SPEC R13, §7
// R13 round 3): the next available proxy in the zone's own round robin of
// first sends, skipping suspect proxies and proxies stalled for longer
// than stall ns at now (health.go) while a healthy one is available (with
// every available proxy avoided, the next stalled one, else the next
// suspect one). With wantProbe, a suspect
// proxy passed over on the way whose probe is due is claimed for this
// read's probe and returned as probe (0: none). Proxies in skip are passed
// over; ok is false if none is available.
func (c *Client) chooseFirst(z *zone, skip *proxySet, now, stall int64, wantProbe bool) (id, probe ProxyID, ok bool) {
	if skip.full() {
		return 0, 0, false
	}
	rt := z.route.Load()
	n := len(rt.ids)
	if n == 0 {
		return 0, 0, false
	}
	infos := *c.proxies.Load()
	start := int((z.first.Add(1) - 1) % uint32(n))
	fallback, fallbackSuspect := -1, false
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		id := rt.ids[i]
		if skip.has(id) || !c.tr.Available(id) {
			continue
		}
		l := infos[id].load
		if !c.avoid(l, now, stall) {
			return id, probe, true
		}
		suspect := l.health.suspect.Load() != 0
		if fallback < 0 || (!suspect && fallbackSuspect) {
			fallback, fallbackSuspect = i, suspect
		}
		if wantProbe && probe == 0 && suspect && c.claimProbe(&l.health, now) {
			probe = id
		}
	}
	if fallback < 0 {
		return 0, 0, false
	}
	// No healthy proxy: the read goes to a stalled one if there is one,
	// else to a suspect one, which is a probe of its own; a slot claimed on
	// the way is not used.
	return rt.ids[fallback], 0, true
}
