package retry

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/timerwheel"
	"github.com/readretry/readretry/wire"
)

// releaseNone marks that no delivered context waits for release.
const releaseNone = 0

// poller is the state RecvResponse works with, guarded by Client.pollMu. It
// is reused call after call so that polling allocates nothing at steady
// state.
type poller struct {
	c       *Client
	now     int64 // the time of the current RecvResponse, ns since the epoch
	zone    *zone // the zone whose wheel is advancing
	fire    func(id uint64)
	rsp     Response
	keep    []bool // per-record delivery flags of rsp, grown to the largest packet
	sendBuf []byte // re-sent frames are rebuilt here
	finals  finalQueue
	// sinceAdvance counts packets handled since the wheels last advanced.
	sinceAdvance int
	// release is the sequence number of the context whose final Response
	// was handed out last; it is deleted at the start of the next call,
	// when that Response stops being valid.
	release     uint64
	releaseZone *zone
}

func (p *poller) init(c *Client) {
	p.c = c
	p.fire = p.onFire // one method value, made once: Advance gets no new closure per call
}

// final is a result the engine made, waiting to be delivered.
type final struct {
	z      *zone
	seq    uint64
	result int32
}

// finalQueue is a FIFO of made results. It grows by doubling and never
// shrinks, so it allocates only while it grows past its largest size.
type finalQueue struct {
	buf        []final
	head, size int
}

func (q *finalQueue) push(f final) {
	if q.size == len(q.buf) {
		nb := make([]final, max(16, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = f
	q.size++
}

func (q *finalQueue) pop() (final, bool) {
	if q.size == 0 {
		return final{}, false
	}
	f := q.buf[q.head]
	q.buf[q.head] = final{}
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return f, true
}

func (q *finalQueue) reset() {
	clear(q.buf)
	q.head, q.size = 0, 0
}

// maxPacketsPerAdvance bounds how many packets RecvResponse handles before
// it advances the timing wheels even though more are waiting, so that
// timers keep firing under a load that never lets the inbox empty. It is a
// trade: after a stall, answers queued beyond this many may lose to their
// deadlines; under overload, timers run this many packets late (about
// 15 ms at 1 µs a packet).
const maxPacketsPerAdvance = 16384

// RecvResponse drives the engine and returns at most one response (SPEC
// R14). It handles the packets the transport has already received, then
// advances every zone's timing wheel to now — re-sending reads whose
// segment ended, ending those out of retries — then handles packets again,
// until one yields a response for the caller. It never blocks on the
// network; ok is false when nothing is ready. Call it periodically (the
// poll interval adds to timer lateness) or let a Driver call it.
//
// Packets come before timers so that an answer that arrived in time is
// not beaten by its deadline just because the poller was late (a stall, a
// GC pause): SPEC R9 gives up only when no good answer came. So that
// timers still fire when the inbox never empties, the wheels are advanced
// at least once every 16,384 packets.
//
// Call it from one goroutine (or let one Driver call it, and never both):
// the returned Response is the client's single response value, valid until
// the next call to RecvResponse or Close — a call from another goroutine
// overwrites it and releases its context. Calls are serialised internally,
// so two pollers do not corrupt the engine, but each would race on the
// other's Response.
func (c *Client) RecvResponse() (rsp *Response, ok bool) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	p := &c.poll
	if p.release != releaseNone {
		c.dropContext(p.releaseZone, p.release)
		p.release, p.releaseZone = releaseNone, nil
	}
	if c.closed.Load() {
		return nil, false
	}
	p.now = c.now()
	if c.orphanN.Load() > 0 {
		c.scheduleOrphans()
	}
	if c.deliverFinal() {
		return &p.rsp, true
	}
	advanced := false
	for {
		var frame []byte
		var from ProxyID
		ok := false
		if advanced || p.sinceAdvance < maxPacketsPerAdvance {
			frame, from, ok = c.tr.Recv()
		}
		if !ok { // inbox empty, or the packet budget spent: timers' turn
			if advanced {
				return nil, false
			}
			c.advance()
			advanced = true
			if c.deliverFinal() {
				return &p.rsp, true
			}
			continue
		}
		p.sinceAdvance++
		if c.onPacket(frame, from) {
			return &p.rsp, true
		}
		// A packet handled without a response may have ended its request
		// with a made result (a re-send that could not be rebuilt).
		if c.deliverFinal() {
			return &p.rsp, true
		}
	}
}

// advance fires every zone's due timers at the poll's time.
func (c *Client) advance() {
	p := &c.poll
	p.sinceAdvance = 0
	now := c.at(p.now)
	for _, z := range *c.zoneByIdx.Load() {
		p.zone = z
		z.wheel.Advance(now, p.fire)
	}
	p.zone = nil
}

// NextDeadline returns the earliest pending timer over all zones, so that
// a caller (or Driver) can sleep until then when no packet is expected.
func (c *Client) NextDeadline() (time.Time, bool) {
	var best time.Time
	found := false
	for _, z := range *c.zoneByIdx.Load() {
		if t, ok := z.wheel.NextDeadline(); ok && (!found || t.Before(best)) {
			best, found = t, true
		}
	}
	return best, found
}

// dropContext deletes a context, cancelling any timer it still has and
// giving back its cap unit.
func (c *Client) dropContext(z *zone, seq uint64) {
	ref, ok := z.table.Lookup(seq)
	if !ok {
		return
	}
	m := ref.Meta()
	c.cancelTimer(z, m)
	if m.kind != kindPlain {
		z.stats.contexts.Add(-1)
	}
	z.table.Delete(seq)
}

func (c *Client) scheduleOrphans() {
	c.orphanMu.Lock()
	defer c.orphanMu.Unlock()
	kept := c.orphans[:0]
	for i, o := range c.orphans {
		ref, ok := o.z.table.Lookup(o.seq)
		if !ok {
			continue
		}
		m := ref.Meta()
		if m.done || atomic.LoadUint64(&m.timer) != 0 {
			continue
		}
		m.gen++
		h, err := o.z.wheel.Schedule(c.at(m.deadline), timerID(o.seq, m.gen))
		if err != nil {
			// The wheel is still full: keep this and the rest for a later
			// poll rather than walk them all on every call.
			kept = append(kept, c.orphans[i:]...)
			break
		}
		atomic.StoreUint64(&m.timer, uint64(h))
	}
	clear(c.orphans[len(kept):])
	c.orphans = kept
	c.orphanN.Store(int32(len(kept)))
}

// onFire handles one timer of the zone being advanced.
func (p *poller) onFire(id uint64) {
	c, z := p.c, p.zone
	seq := z.idx<<counterBits | id&counterMask
	ref, ok := z.table.Lookup(seq)
	if !ok {
		return // the request ended before its first timer's handle was known
	}
	m := ref.Meta()
	if m.gen != uint16(id>>counterBits) || m.done {
		return // a stale timer: the context has re-armed or ended since
	}
	atomic.StoreUint64(&m.timer, 0)
	if m.deadline > p.now {
		// The segment was extended by an accepted packet after this timer
		// was set (complex reads re-arm lazily): wait on.
		c.arm(z, seq, m)
		return
	}
	if m.kind == kindPlain {
		z.stats.waitTimeouts.Add(1)
		c.finish(z, seq, m, ResultWaitRspTimeout)
		return
	}
	if m.retries >= m.max {
		c.exhaust(z, seq, m, ResultReadRetryTimeout)
		return
	}
	z.stats.retriesTimeout.Add(1)
	c.resend(z, ref.Frame(), ref.Scratch(), seq, m, m.deadline)
}

// arm schedules the context's timer at m.deadline under a new generation.
// The caller has cleared or cancelled the previous timer.
func (c *Client) arm(z *zone, seq uint64, m *ctxMeta) {
	m.gen++
	h, err := z.wheel.Schedule(c.at(m.deadline), timerID(seq, m.gen))
	if err != nil {
		c.addOrphan(z, seq)
		return
	}
	atomic.StoreUint64(&m.timer, uint64(h))
}

// cancelTimer cancels the context's pending timer, if its handle is known.
func (c *Client) cancelTimer(z *zone, m *ctxMeta) {
	if h := atomic.SwapUint64(&m.timer, 0); h != 0 {
		z.wheel.Cancel(timerwheel.Handle(h))
	}
}

// finish ends a request with a result the engine made; it is delivered by
// a later RecvResponse (one response per call).
func (c *Client) finish(z *zone, seq uint64, m *ctxMeta, result int32) {
	m.done = true
	c.cancelTimer(z, m)
	c.poll.finals.push(final{z: z, seq: seq, result: result})
}

// exhaust ends a read that has no retry left (SPEC R9), logging at error
// level, rate-limited per zone.
func (c *Client) exhaust(z *zone, seq uint64, m *ctxMeta, result int32) {
	z.stats.exhausted.Add(1)
	c.logExhausted(z, seq, m, result)
	c.finish(z, seq, m, result)
}

func (c *Client) logExhausted(z *zone, seq uint64, m *ctxMeta, result int32) {
	if ok, held := z.exhaustLog.allow(c.poll.now, time.Second/exhaustedLogsPerSecond); ok {
		c.log.LogAttrs(context.Background(), slog.LevelError, MsgExhausted,
			slog.Uint64("app_id", uint64(z.key.AppID)), slog.Uint64("zone_id", uint64(z.key.ZoneID)),
			slog.Int("retries", int(m.retries)), slog.Int64("cost_ms", int64(uint32(c.poll.now/int64(time.Millisecond))-m.firstMs)),
			slog.Uint64("seq", seq), slog.Uint64("async_id", m.asyncID), slog.Int("result", int(result)),
			slog.Uint64("suppressed", held))
	}
}

// deliverFinal fills the response with the next made result, if any.
func (c *Client) deliverFinal() bool {
	p := &c.poll
	for {
		f, ok := p.finals.pop()
		if !ok {
			return false
		}
		ref, ok := f.z.table.Lookup(f.seq)
		if !ok {
			continue // dropped by Close
		}
		m := ref.Meta()
		p.rsp = Response{
			zone: f.z.key, seq: f.seq, asyncID: m.asyncID, cmd: wire.Command(m.cmd), result: f.result,
			attempts: int(m.ntried), userBuf: ref.UserBuf(),
		}
		c.delivered(f.z, f.seq, true)
		return true
	}
}

// delivered counts a response handed out and, for a final one, arranges
// the context's release at the next call.
func (c *Client) delivered(z *zone, seq uint64, final bool) {
	z.stats.delivered.Add(1)
	if final {
		z.stats.finals.Add(1)
		c.poll.release, c.poll.releaseZone = seq, z
	}
}

// resend sends the next attempt of a read (SPEC R6, R8, R10, R11): the
// whole request for a simple read, the unanswered keys of a batch, the rest
// of an index stream from the next position wanted. base is when the next
// segment starts: the end of the last one for a timeout, now for an error
// code. A retry is used even if no proxy is available to take it.
func (c *Client) resend(z *zone, orig, scratch []byte, seq uint64, m *ctxMeta, base int64) {
	p := &c.poll
	m.retries++
	r, n := int(m.retries), int(m.max)
	budget := m.budget()
	if m.kind == kindSimple {
		m.deadline = base + int64(segmentEnd(budget, n, r+1)-segmentEnd(budget, n, r))
	} else {
		m.deadline = base + int64(r+1)*int64(segmentUnit(budget, n))
	}

	var frame []byte
	var err error
	records := 1
	switch m.kind {
	case kindBatch:
		frame, records, err = wire.AppendPartialBatch(p.sendBuf[:0], orig, wire.Bitset(scratch), uint16(r))
	case kindIndex:
		frame, err = wire.AppendResume(p.sendBuf[:0], orig, m.progress, uint16(r))
	default:
		frame, err = wire.AppendResend(p.sendBuf[:0], orig, uint16(r))
	}
	if err != nil {
		if errors.Is(err, wire.ErrPosition) || errors.Is(err, wire.ErrNothingMissing) {
			// Nothing is left to ask for (onComplex normally ends such a
			// request at its last record): it is complete.
			c.finish(z, seq, m, ResultOK)
			return
		}
		// The original was checked when it was packed: not reached.
		c.exhaust(z, seq, m, ResultReadRetryTimeout)
		return
	}
	p.sendBuf = frame[:0]

	var skip proxySet
	for {
		id, ok := c.choose(z, m, &skip)
		if !ok {
			z.stats.retriesNoProxy.Add(1)
			break
		}
		if err := c.tr.Send(id, frame); err != nil {
			z.stats.sendFailures.Add(1)
			skip.add(id)
			continue
		}
		if int(m.ntried) < len(m.tried) {
			m.tried[m.ntried] = id
			m.ntried++
		}
		z.stats.recordsResent.Add(uint64(records))
		break
	}
	c.arm(z, seq, m)
}

// onPacket handles one received frame and reports whether it filled the
// response for the caller.
func (c *Client) onPacket(frame []byte, from ProxyID) bool {
	pkt, err := wire.ParseResponse(frame)
	if err != nil {
		n := c.malformed.Add(1)
		if ok, _ := c.malformedRL.allow(c.poll.now, time.Second); ok {
			px, _ := c.ProxyOf(from)
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgMalformedPacket,
				slog.String("proxy", px.String()), slog.String("error", err.Error()), slog.Uint64("count", n))
		}
		if seq, ok := wire.PeekResponseSeq(frame); ok {
			if z := c.zoneOfSeq(seq); z != nil {
				z.stats.malformed.Add(1)
			}
		}
		return false
	}
	seq := pkt.Seq()
	z := c.zoneOfSeq(seq)
	if z == nil {
		c.unknownSeq.Add(1)
		return false
	}
	ref, ok := z.table.Lookup(seq)
	if !ok {
		z.stats.duplicates.Add(1) // late: the request has its final result
		return false
	}
	m := ref.Meta()
	if m.done {
		z.stats.duplicates.Add(1)
		return false
	}
	if m.asyncID != pkt.AsyncID() || !m.hasTried(from) {
		z.stats.stray.Add(1)
		return false
	}
	switch m.kind {
	case kindPlain:
		return c.onPlain(z, seq, m, ref.UserBuf(), pkt)
	case kindSimple:
		return c.onSimple(z, seq, m, ref.Frame(), ref.Scratch(), ref.UserBuf(), pkt)
	default:
		return c.onComplex(z, seq, m, ref.Frame(), ref.Scratch(), ref.UserBuf(), pkt)
	}
}

// setResponse fills the response from a packet.
func (c *Client) setResponse(z *zone, seq uint64, m *ctxMeta, userBuf []byte, pkt wire.Response, result int32, haveMore bool, keep []bool, nrec int) {
	c.poll.rsp = Response{
		zone: z.key, seq: seq, asyncID: m.asyncID, cmd: wire.Command(m.cmd), result: result, haveMore: haveMore,
		attempts: int(m.ntried), userBuf: userBuf, pkt: pkt, hasPkt: true, keep: keep, nrec: nrec,
	}
	c.delivered(z, seq, !haveMore)
	if !haveMore {
		m.done = true
		c.cancelTimer(z, m)
	}
}

// onPlain delivers a packet of a request without read retry as it is; the
// wait restarts at each packet of a multi-packet answer. Such a request has
// one attempt whose packets come in order on one connection, so a packet
// whose index is below the next one expected (m.progress) is a network
// duplicate: dropped and counted (SPEC R12). A gap (a lost packet) cannot be
// repaired without read retry; later packets are still delivered.
func (c *Client) onPlain(z *zone, seq uint64, m *ctxMeta, userBuf []byte, pkt wire.Response) bool {
	if uint64(pkt.Packet()) < m.progress {
		z.stats.duplicates.Add(1)
		return false
	}
	m.progress = uint64(pkt.Packet()) + 1
	more := pkt.HaveMore()
	if more {
		m.deadline = c.poll.now + int64(c.waitTimeout)
	}
	c.setResponse(z, seq, m, userBuf, pkt, pkt.Result(), more, nil, pkt.RecordCount())
	return true
}

// onRetryCode applies SPEC R8 to an answer's result: a code in the zone's
// error list with retries left re-sends at once, starting the next segment
// now, and reports true (the answer is not delivered). With none left the
// answer is to be delivered as it is, and the read counts and logs as
// exhausted. Any other result reports false.
func (c *Client) onRetryCode(z *zone, seq uint64, m *ctxMeta, orig, scratch []byte, res int32) bool {
	if res == ResultOK {
		return false
	}
	if conf := z.conf.Load(); conf == nil || !conf.IsRetryCode(res) {
		return false
	}
	if m.retries < m.max {
		z.stats.retriesCode.Add(1)
		c.cancelTimer(z, m)
		c.resend(z, orig, scratch, seq, m, c.poll.now)
		return true
	}
	z.stats.exhausted.Add(1)
	c.logExhausted(z, seq, m, res)
	return false
}

// onSimple handles an answer to a simple read with read retry: the first
// good answer from any attempt is delivered (SPEC R7); a listed error code
// re-sends at once while retries remain (SPEC R8), and is delivered as it
// is when none remain.
func (c *Client) onSimple(z *zone, seq uint64, m *ctxMeta, orig, scratch, userBuf []byte, pkt wire.Response) bool {
	res := pkt.Result()
	if c.onRetryCode(z, seq, m, orig, scratch, res) {
		return false
	}
	c.setResponse(z, seq, m, userBuf, pkt, res, false, nil, pkt.RecordCount())
	return true
}

// onComplex handles a packet of a batch or index read with read retry
// (SPEC R10, R11): only records not delivered before pass — keys not yet
// answered, positions next in stream order — and the wait for the next
// packet restarts at (retries+1)·x. The request is complete when every key
// is answered, or when a last packet ends the stream right where the
// accepted records end.
func (c *Client) onComplex(z *zone, seq uint64, m *ctxMeta, orig, scratch, userBuf []byte, pkt wire.Response) bool {
	p := &c.poll
	res := pkt.Result()
	if res != ResultOK {
		if c.onRetryCode(z, seq, m, orig, scratch, res) {
			return false
		}
		// Any other error ends the request: the caller has had the records
		// accepted so far and now gets the real error (SPEC R8).
		keep := p.keepFor(pkt.RecordCount())
		clear(keep)
		c.setResponse(z, seq, m, userBuf, pkt, res, false, keep, 0)
		return true
	}

	keep := p.keepFor(pkt.RecordCount())
	fresh, foreign := 0, 0 // foreign: key indexes the request never had
	complete := false
	if m.kind == kindBatch {
		bits := wire.Bitset(scratch)
		it := pkt.Records()
		for i := range keep {
			rec, _ := it.Next()
			if rec.Tag >= uint64(m.nkeys) {
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
			z.stats.stray.Add(uint64(foreign))
		}
		m.progress += uint64(fresh)
		complete = m.progress == uint64(m.nkeys)
	} else {
		next, gap := m.progress, false
		it := pkt.Records()
		for i := range keep {
			rec, _ := it.Next()
			keep[i] = !gap && rec.Tag == next
			if keep[i] {
				next++
				fresh++
			} else if rec.Tag > next {
				gap = true // a lost packet before this one: resume will fetch it
			}
		}
		m.progress = next
		// The stream ends where a last packet says, or where the request's
		// limit does: the last packet may be lost once every record is in.
		complete = !gap && (!pkt.HaveMore() && pkt.Cursor() == next || limitReached(orig, next))
	}
	if dropped := pkt.RecordCount() - fresh - foreign; dropped > 0 {
		z.stats.duplicates.Add(uint64(dropped))
	}
	if fresh == 0 && !complete {
		return false
	}
	if !complete {
		// Lazy re-arm: the pending timer fires at the old deadline and
		// waits on to this one (onFire), sparing a Cancel+Schedule per packet.
		m.deadline = p.now + int64(m.retries+1)*int64(segmentUnit(m.budget(), int(m.max)))
	}
	c.setResponse(z, seq, m, userBuf, pkt, ResultOK, !complete, keep, fresh)
	return true
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
