package retry

import "github.com/readretry/readretry/wire"

// accept handles one parsed packet for the request and reports whether it
// filled the caller's response. Packets of a request that has its final
// result are duplicates; packets from a proxy the request never used, or
// carrying another async ID, are stray (SPEC §6). Both are dropped and
// counted.
func (f *flight) accept(pkt wire.Response, from ProxyID) bool {
	if f.m.done {
		f.z.stats.duplicates.Add(1)
		return false
	}
	if f.m.asyncID != pkt.AsyncID() || !f.hasTried(from) {
		f.z.stats.stray.Add(1)
		return false
	}
	switch f.m.kind {
	case kindPlain:
		return f.onPlain(pkt)
	case kindSimple:
		return f.onSimple(pkt)
	default:
		return f.onComplex(pkt)
	}
}

// respond fills the poller's response from a packet: result and haveMore
// as given, the records of pkt filtered by keep (nil: all) of which nrec
// are delivered. A final response ends the request.
func (f *flight) respond(pkt wire.Response, result int32, haveMore bool, keep []bool, nrec int) {
	m := f.m
	f.c.poll.rsp = Response{
		zone: f.z.key, seq: f.seq, asyncID: m.asyncID, cmd: wire.Command(m.cmd), result: result, haveMore: haveMore,
		attempts: int(m.ntried), userBuf: f.ref.UserBuf(), pkt: pkt, hasPkt: true, keep: keep, nrec: nrec,
	}
	f.delivered(!haveMore)
	if !haveMore {
		m.done = true
		f.cancelTimer()
	}
}

// onPlain delivers a packet of a request without read retry as it is; the
// wait restarts at each packet of a multi-packet answer. Such a request has
// one attempt whose packets come in order on one connection, so a packet
// whose index is below the next one expected is a network duplicate:
// dropped and counted (SPEC R12). A gap (a lost packet) cannot be repaired
// without read retry; later packets are still delivered.
func (f *flight) onPlain(pkt wire.Response) bool {
	if pkt.Packet() < f.plainNext() {
		f.z.stats.duplicates.Add(1)
		return false
	}
	f.setPlainNext(pkt.Packet() + 1)
	more := pkt.HaveMore()
	if more {
		f.m.deadline = f.now + int64(f.c.waitTimeout)
	}
	f.respond(pkt, pkt.Result(), more, nil, pkt.RecordCount())
	return true
}

// onRetryCode applies SPEC R8 to an answer's result: a code in the zone's
// error list with retries left re-sends at once, starting the next segment
// now, and reports true (the answer is not delivered). With none left the
// answer is to be delivered as it is, and the read counts and logs as
// exhausted. Any other result reports false.
func (f *flight) onRetryCode(res int32) bool {
	if res == ResultOK {
		return false
	}
	if conf := f.z.conf.Load(); conf == nil || !conf.IsRetryCode(res) {
		return false
	}
	if f.m.retries < f.m.max {
		f.z.stats.retriesCode.Add(1)
		f.cancelTimer()
		f.resend(f.now)
		return true
	}
	f.z.stats.exhausted.Add(1)
	f.logExhausted(res)
	return false
}

// onSimple handles an answer to a simple read with read retry: the first
// good answer from any attempt is delivered (SPEC R7); a listed error code
// re-sends at once while retries remain (SPEC R8), and is delivered as it
// is when none remain.
func (f *flight) onSimple(pkt wire.Response) bool {
	res := pkt.Result()
	if f.onRetryCode(res) {
		return false
	}
	f.respond(pkt, res, false, nil, pkt.RecordCount())
	return true
}

// onComplex handles a packet of a batch or index read with read retry
// (SPEC R10, R11): only records not delivered before pass — keys not yet
// answered, positions next in stream order — and the wait for the next
// packet restarts at (retries+1)·x. The request is complete when every key
// is answered, or when a last packet ends the stream right where the
// accepted records end.
func (f *flight) onComplex(pkt wire.Response) bool {
	p := &f.c.poll
	res := pkt.Result()
	keep := p.keepFor(pkt.RecordCount())
	if res != ResultOK {
		if f.onRetryCode(res) {
			return false
		}
		// Any other error ends the request: the caller has had the records
		// accepted so far and now gets the real error (SPEC R8).
		clear(keep)
		f.respond(pkt, res, false, keep, 0)
		return true
	}
	var fresh int
	var complete bool
	if f.m.kind == kindBatch {
		fresh, complete = f.acceptBatch(pkt, keep)
	} else {
		fresh, complete = f.acceptIndex(pkt, keep)
	}
	if fresh == 0 && !complete {
		return false
	}
	if !complete {
		// Lazy re-arm: the pending timer fires at the old deadline and
		// waits on to this one (onFire), sparing a Cancel+Schedule per packet.
		f.m.deadline = f.now + int64(f.m.retries+1)*int64(segmentUnit(f.m.budget(), int(f.m.max)))
	}
	f.respond(pkt, ResultOK, !complete, keep, fresh)
	return true
}

// acceptBatch marks in keep the records of a batch packet that answer a key
// for the first time, sets their bits, and returns how many and whether
// every key is now answered. Records naming a key index the request never
// had are stray; repeats are duplicates (SPEC R11, R12).
func (f *flight) acceptBatch(pkt wire.Response, keep []bool) (fresh int, complete bool) {
	bits, nkeys := f.batchBits(), f.batchKeys()
	foreign := 0
	it := pkt.Records()
	for i := range keep {
		rec, _ := it.Next()
		if rec.Tag >= uint64(nkeys) {
			keep[i] = false
			foreign++
			continue
		}
		keep[i] = bits.Set(uint32(rec.Tag))
		if keep[i] {
			fresh++
		}
	}
	if foreign > 0 {
		f.z.stats.stray.Add(uint64(foreign))
	}
	f.countDropped(pkt.RecordCount() - fresh - foreign)
	answered := f.batchAnswered() + uint32(fresh)
	f.setBatchAnswered(answered)
	return fresh, answered == nkeys
}

// acceptIndex marks in keep the records of an index packet that continue
// the stream in order from the next position wanted, and returns how many
// and whether the stream is complete: a last packet ends it right where the
// accepted records end, or the request's limit is reached (the last packet
// may be lost once every record is in). A record past a gap (a lost packet)
// is not accepted: the resume will fetch it again (SPEC R11).
func (f *flight) acceptIndex(pkt wire.Response, keep []bool) (fresh int, complete bool) {
	next, gap := f.indexNext(), false
	it := pkt.Records()
	for i := range keep {
		rec, _ := it.Next()
		keep[i] = !gap && rec.Tag == next
		if keep[i] {
			next++
			fresh++
		} else if rec.Tag > next {
			gap = true
		}
	}
	f.setIndexNext(next)
	f.countDropped(pkt.RecordCount() - fresh)
	complete = !gap && (!pkt.HaveMore() && pkt.Cursor() == next || limitReached(f.ref.Frame(), next))
	return fresh, complete
}

// countDropped counts records dropped as already delivered.
func (f *flight) countDropped(n int) {
	if n > 0 {
		f.z.stats.duplicates.Add(uint64(n))
	}
}

// limitReached reports whether an index read with a limit has every record
// it asked for once next is the next position wanted.
func limitReached(orig []byte, next uint64) bool {
	r, err := wire.ParseRequest(orig)
	if err != nil || r.Limit() == 0 {
		return false
	}
	return next >= r.Position()+uint64(r.Limit())
}

// keepFor returns the per-record flag slice for a packet of n records.
func (p *poller) keepFor(n int) []bool {
	if cap(p.keep) < n {
		p.keep = make([]bool, n)
	}
	return p.keep[:n]
}
