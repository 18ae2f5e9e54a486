package retry

import "github.com/readretry/readretry/wire"

// Held answers (SPEC R7 over R8, R8b). An answer carrying a listed error
// code that cannot be re-sent — no retry left, or the storm guard refused —
// does not end the request while another attempt may still answer well:
// the poller keeps a copy and delivers it only when nothing better can
// come. The same holds for a batch record with a listed code: it counts as
// not answered (re-sent while the request may, SPEC R8b), and a copy waits
// here in case no attempt ever answers that key well. "Nothing better can come" is the budget's end
// (the last segment's timer) or every attempt having answered; then the
// held records of keys still unanswered are delivered as they are, exactly
// once, followed by the held error packet (a real error beats the
// synthetic -19219) or, if there is none and keys are still missing,
// ResultReadRetryTimeout.
//
// Held copies live outside the context table (which holds no pointers) in
// a map from sequence number to heldAnswer, owned by the poller; they are
// freed with the context. Holding is the rare path, so it may allocate.

// heldAnswer is what the poller holds for one request.
type heldAnswer struct {
	pkt      []byte               // the latest error packet, copied; empty if none
	recs     wire.ResponseBuilder // failed batch records, copied, as one frame
	recsBuf  []byte               // the builder's buffer, kept for reuse
	started  bool                 // recs has a frame
	recsDone bool                 // the held records were delivered
}

// maxRetainedBuf is the largest buffer the poller keeps for reuse after a
// use (bytes): larger ones, made for an outsized request, go back to the
// garbage collector (SPEC R15: memory follows load). It is also the largest
// size class of Send's frame pools.
const maxRetainedBuf = 64 << 10

// maxHeldFree is how many emptied heldAnswer values the poller keeps.
const maxHeldFree = 16

// heldFor returns the request's held answer, making it on first use.
func (f *flight) heldFor() *heldAnswer {
	p := &f.c.poll
	if h, ok := p.held[f.seq]; ok {
		return h
	}
	var h *heldAnswer
	if n := len(p.heldFree); n > 0 {
		h, p.heldFree = p.heldFree[n-1], p.heldFree[:n-1]
	} else {
		h = &heldAnswer{}
	}
	if p.held == nil {
		p.held = make(map[uint64]*heldAnswer)
	}
	p.held[f.seq] = h
	f.m.flags |= flagHeld
	return h
}

// holdPacket keeps a copy of an error answer (SPEC R8).
func (f *flight) holdPacket(pkt wire.Response) {
	h := f.heldFor()
	h.pkt = append(h.pkt[:0], pkt.Frame()...)
}

// holdRecord keeps a copy of a batch record with a listed code (SPEC R8b).
// A record that would take the held frame past wire.MaxFrameSize is
// dropped: its key then ends as unanswered.
func (f *flight) holdRecord(pkt wire.Response, rec wire.Record) {
	h := f.heldFor()
	if !h.started {
		h.recs.Start(h.recsBuf[:0], wire.ResponseHeader{
			Command: pkt.Command(), Seq: f.seq, AsyncID: f.asyncID(), Attempt: pkt.Attempt(),
		})
		h.started = true
	}
	_ = h.recs.AddRecord(rec.Tag, rec.Result, rec.Key, rec.Value)
}

// settle ends the request with what it holds: the final result is queued
// and made by deliverHeld.
func (f *flight) settle() {
	f.m.flags |= flagDone
	f.cancelTimer()
	f.c.poll.finals.push(final{z: f.z, seq: f.seq, held: true})
}

// deliverHeld fills the response from the request's held answer and
// reports whether it did; if it did not, the request has been ended with
// ResultReadRetryTimeout (queued). Held records come first (only those of
// keys still unanswered); if keys are still missing after them, the next
// call delivers the held error packet or the timeout.
func (f *flight) deliverHeld() bool {
	p := &f.c.poll
	h := p.held[f.seq]
	if h != nil && h.started && !h.recsDone {
		h.recsDone = true
		if pkt, err := wire.ParseResponse(h.recs.Frame()); err == nil {
			keep := p.keepFor(pkt.RecordCount())
			fresh, complete := f.acceptHeld(pkt, keep)
			f.failedDelivered(fresh)
			switch {
			case complete:
				f.respond(pkt, ResultOK, false, keep, fresh)
				return true
			case fresh > 0:
				f.respond(pkt, ResultOK, true, keep, fresh)
				p.finals.push(final{z: f.z, seq: f.seq, held: true})
				return true
			}
		}
	}
	if h != nil && len(h.pkt) > 0 {
		if pkt, err := wire.ParseResponse(h.pkt); err == nil {
			res := pkt.Result()
			f.z.stats.exhausted.Add(1)
			f.logExhausted(res)
			if f.m.kind == kindSimple {
				f.respond(pkt, res, false, nil, pkt.RecordCount())
			} else {
				keep := p.keepFor(pkt.RecordCount())
				clear(keep)
				f.respond(pkt, res, false, keep, 0)
			}
			return true
		}
	}
	f.exhaust(ResultReadRetryTimeout)
	return false
}

// acceptHeld marks in keep the held records whose key is still unanswered,
// sets their bits, and returns how many and whether every key is now
// answered. Of several held records for one key, the first is delivered.
func (f *flight) acceptHeld(pkt wire.Response, keep []bool) (fresh int, complete bool) {
	bits, nkeys := f.batchBits(), f.batchKeys()
	s := pkt.Scan()
	for i := range keep {
		s.Next()
		keep[i] = s.Tag() < uint64(nkeys) && bits.Set(uint32(s.Tag()))
		if keep[i] {
			fresh++
		}
	}
	answered := f.batchAnswered() + uint32(fresh)
	f.setBatchAnswered(answered)
	return fresh, answered == nkeys
}

// freeHeld forgets the request's held answer, keeping a few emptied ones
// (with buffers no larger than maxRetainedBuf) for reuse.
func (p *poller) freeHeld(seq uint64) {
	h, ok := p.held[seq]
	if !ok {
		return
	}
	delete(p.held, seq)
	if len(p.heldFree) >= maxHeldFree {
		return
	}
	if b := h.recs.Bytes(); cap(b) <= maxRetainedBuf {
		h.recsBuf = b[:0]
	} else {
		h.recsBuf = nil
	}
	if cap(h.pkt) > maxRetainedBuf {
		h.pkt = nil
	}
	*h = heldAnswer{pkt: h.pkt[:0], recsBuf: h.recsBuf}
	p.heldFree = append(p.heldFree, h)
}
