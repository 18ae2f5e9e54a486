package retry

import (
	"time"

	"github.com/readretry/readretry/wire"
)

// accept handles one parsed packet for the request and reports whether it
// filled the caller's response. Packets of a request that has its final
// result are duplicates; packets from a proxy the request never used, or
// carrying another async ID, are stray (SPEC §6). Both are dropped and
// counted.
func (f *flight) accept(pkt wire.Response, from ProxyID) bool {
	if f.m.done() {
		f.z.stats.duplicates.Add(1)
		return false
	}
	if f.asyncID() != pkt.AsyncID() || !f.hasTried(from) {
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
		zone: f.z.key, seq: f.seq, asyncID: f.asyncID(), cmd: wire.Command(m.cmd), result: result, haveMore: haveMore,
		attempts: int(m.ntried), userBuf: f.ref.UserBuf(), pkt: pkt, hasPkt: true, keep: keep, nrec: nrec,
		waiter: m.waiter,
	}
	f.delivered(!haveMore)
	if !haveMore {
		if result == ResultOK && m.flags&flagFailed != 0 {
			// SPEC §7 R8b/R17/R20: an OK final after failed records is a
			// give-up too; counted and logged once, here at its end.
			f.z.stats.exhausted.Add(1)
			f.logExhausted(result)
		}
		m.flags |= flagDone
		f.cancelTimer()
	}
}

// failedDelivered counts n records about to be delivered with a listed
// error code of their own (SPEC R8b) and marks the request as having given
// up on them (respond counts it once in Exhausted at its final result).
func (f *flight) failedDelivered(n int) {
	if n > 0 {
		f.z.stats.recordsFailed.Add(uint64(n))
		f.m.flags |= flagFailed
	}
}

// onPlain delivers a packet of a request without read retry as it is; the
// wait restarts at each packet of a multi-packet answer, but never beyond
// the request's overall cap (plainCap): a proxy that keeps announcing more
// packets cannot keep it open for ever. Such a request has one attempt whose
// packets come in order on one connection, so a packet whose index is below
// the next one expected is a network duplicate: dropped and counted (SPEC
// R12). A gap (a lost packet) cannot be repaired without read retry; later
// packets are still delivered.
func (f *flight) onPlain(pkt wire.Response) bool {
	if pkt.Packet() < f.plainNext() {
		f.z.stats.duplicates.Add(1)
		return false
	}
	f.setPlainNext(pkt.Packet() + 1)
	more := pkt.HaveMore()
	if more {
		f.m.deadline = min(f.now+int64(f.c.waitTimeout), f.plainEnd())
	}
	f.respond(pkt, pkt.Result(), more, nil, pkt.RecordCount())
	return true
}

// plainEnd is when a request without read retry ends at the latest,
// however many packets its proxy announces (Config.MaxWaitTotal after it
// was sent; ns since the epoch, ms resolution).
func (f *flight) plainEnd() int64 {
	elapsed := int64(uint32(f.now/int64(time.Millisecond))-f.m.firstMs) * int64(time.Millisecond)
	return f.now - elapsed + int64(f.c.maxWaitTotal)
}

// onRetryCode applies SPEC R8 to an answer carrying a listed error code: a
// re-send at once, starting the next segment now, while the request may
// still re-send (reported true: the answer is not delivered); else the
// answer is held (hold.go) until a good answer, the budget's end, or every
// attempt having answered, whichever comes first — R7 wins over R8.
func (f *flight) onRetryCode(pkt wire.Response) {
	if f.tryResend() {
		return
	}
	f.holdPacket(pkt)
	if f.allAnswered() {
		f.settle()
	}
}

// tryResend re-sends an attempt at once after an error answer (SPEC R8,
// R8b) if the request may, counting it as an error-code retry, and reports
// whether it did.
func (f *flight) tryResend() bool {
	if !f.mayResend() || !f.grantRetry(f.now) {
		return false
	}
	f.z.stats.retriesCode.Add(1)
	f.cancelTimer()
	f.resend(f.now)
	if !f.m.done() {
		f.arm()
	}
	return true
}

// onSimple handles an answer to a simple read with read retry: the first
// good answer from any attempt is delivered (SPEC R7); a listed error code
// re-sends at once while the request may, and is held otherwise (SPEC R8).
// Any other result is the store's answer (not found, say) and is delivered
// as it is.
func (f *flight) onSimple(pkt wire.Response) bool {
	f.markAnswered(pkt.Attempt())
	res := pkt.Result()
	if f.isRetryCode(res) {
		f.onRetryCode(pkt)
		return false
	}
	if h := f.z.hedge; h != nil {
		// SPEC R21: the read's first-answer latency, from its first send.
		h.record(f.c, f.now-(f.simpleEnd()-int64(f.m.budget())), f.now)
	}
	f.respond(pkt, res, false, nil, pkt.RecordCount())
	return true
}

// onComplex handles a packet of a batch or index read with read retry
// (SPEC R10, R11): only records not delivered before pass — keys not yet
// answered, positions next in stream order — and the wait for the next
// packet restarts at (retries+1)·x. The request is complete when every key
// is answered, or when a last packet ends the stream right where the
// accepted records end. Records with a listed error code count as not
// answered while the request may re-send (SPEC R8b).
func (f *flight) onComplex(pkt wire.Response) bool {
	res := pkt.Result()
	if !pkt.HaveMore() || res != ResultOK {
		f.markAnswered(pkt.Attempt()) // this attempt's stream has ended
	}
	keep := f.c.poll.keepFor(pkt.RecordCount())
	if res != ResultOK {
		if f.isRetryCode(res) {
			f.onRetryCode(pkt)
			return false
		}
		// Any other error ends the request: the caller has had the records
		// accepted so far and now gets the real error (SPEC R8).
		clear(keep)
		f.respond(pkt, res, false, keep, 0)
		return true
	}
	if f.m.flags&flagPacket == 0 {
		f.m.flags |= flagPacket
		if h := f.z.hedgeComplex; h != nil {
			// SPEC R21: the read's first-packet latency, from its first
			// send. The first send is kept in ms (firstMs): one ms is added
			// so the sample errs late, never re-sending before the percentile.
			elapsed := int64(uint32(f.now/int64(time.Millisecond))-f.m.firstMs) * int64(time.Millisecond)
			h.record(f.c, elapsed+int64(time.Millisecond), f.now)
		}
	}
	var fresh, failed int
	var complete bool
	if f.m.kind == kindBatch {
		fresh, failed, complete = f.acceptBatch(pkt, keep)
	} else {
		fresh, failed, complete = f.acceptIndex(pkt, keep)
	}
	if fresh > 0 && !complete {
		// Lazy re-arm: the pending timer fires at the old deadline and
		// waits on to this one (onFire), sparing a Cancel+Schedule per packet.
		// A read the storm guard stopped keeps the end it was given then
		// (SPEC R19): a packet never shortens its wait.
		next := f.now + int64(f.m.retries+1)*int64(segmentUnit(f.m.budget(), int(f.m.max)))
		if f.m.flags&flagNoResend != 0 {
			next = max(next, f.m.deadline)
		}
		f.m.deadline = next
	}
	switch {
	case complete:
	case failed > 0 && !pkt.HaveMore() && f.tryResend():
		// SPEC R8b: the attempt ended with records that failed; they go out
		// again at once, like a whole answer with a listed code.
	case f.m.flags&flagHeld != 0 && f.allAnswered():
		f.settle() // nothing else can answer the held records (SPEC R8)
	}
	if fresh == 0 && !complete {
		return false
	}
	f.respond(pkt, ResultOK, !complete, keep, fresh)
	return true
}

// acceptBatch marks in keep the records of a batch packet that answer a key
// for the first time, sets their bits, and returns how many, how many
// failed with a listed code and stay unanswered (SPEC R8b; each is held,
// hold.go, in case no attempt ever answers its key well), and whether
// every key is now answered. Records naming a key index the request never
// had are stray; repeats are duplicates (SPEC R11, R12).
func (f *flight) acceptBatch(pkt wire.Response, keep []bool) (fresh, failed int, complete bool) {
	bits, nkeys := f.batchBits(), f.batchKeys()
	foreign := 0
	s := pkt.Scan()
	for i := range keep {
		s.Next()
		tag := s.Tag()
		keep[i] = false
		switch {
		case tag >= uint64(nkeys):
			foreign++
		case bits.Has(uint32(tag)):
		case f.isRetryCode(s.Result()):
			f.holdRecord(pkt, s.Record())
			failed++
		default:
			keep[i] = bits.Set(uint32(tag))
			fresh++
		}
	}
	if foreign > 0 {
		f.z.stats.stray.Add(uint64(foreign))
	}
	f.countDropped(pkt.RecordCount() - fresh - failed - foreign)
	answered := f.batchAnswered() + uint32(fresh)
	f.setBatchAnswered(answered)
	return fresh, failed, answered == nkeys
}

// acceptIndex marks in keep the records of an index packet that continue
// the stream in order from the next position wanted, and returns how many,
// whether the run stopped at a record with a listed code (SPEC R8b: the
// resume starts at its position, while the request may re-send; after
// that it is delivered as it is), and whether the stream is complete: a
// last packet ends it right where the accepted records end, or the
// request's limit is reached (the last packet may be lost once every
// record is in). A record past a gap (a lost packet) is not accepted: the
// resume will fetch it again (SPEC R11).
func (f *flight) acceptIndex(pkt wire.Response, keep []bool) (fresh, failed int, complete bool) {
	next, stop := f.indexNext(), false
	retryable := f.mayResend()
	given := 0 // records delivered with a listed code: no retry left for them
	s := pkt.Scan()
	for i := range keep {
		s.Next()
		tag := s.Tag()
		keep[i] = false
		switch {
		case stop || tag < next:
		case tag > next:
			stop = true // a lost packet before this record
		case retryable && f.isRetryCode(s.Result()):
			stop, failed = true, 1
		default:
			if f.isRetryCode(s.Result()) { // no retry left: delivered as it is (SPEC R8b)
				given++
			}
			keep[i] = true
			next++
			fresh++
		}
	}
	f.failedDelivered(given)
	f.setIndexNext(next)
	f.countDropped(pkt.RecordCount() - fresh - failed)
	complete = !stop && (!pkt.HaveMore() && pkt.Cursor() == next || limitReached(f.ref.Frame(), next))
	return fresh, failed, complete
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

// keepFor returns the per-record flag slice for a packet of n records: the
// poller's, grown to the largest packet up to maxRetainedBuf flags, or for
// an outsized packet a slice of its own that is not kept (SPEC R15: no
// buffer grows for one outsized request and stays grown). The slice lives
// in the Response until the next poll.
func (p *poller) keepFor(n int) []bool {
	if n > maxRetainedBuf {
		return make([]bool, n)
	}
	if cap(p.keep) < n {
		p.keep = make([]bool, n)
	}
	return p.keep[:n]
}
