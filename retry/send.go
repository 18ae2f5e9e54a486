package retry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/wire"
	"github.com/valyala/bytebufferpool"
)

// Send packs req, sends it to a proxy of the zone and returns at once with
// the request's sequence number; every answer, or the timeout, comes back
// through RecvResponse with that sequence number, req.AsyncID and a copy of
// req.UserBuffer. If the request is a read that read retry covers (SPEC
// R3: its class has a budget, the zone's configuration lists the command,
// MaxRetries > 0) and the zone is under its cap (SPEC R2), a context keeps
// the packed request so that the engine can re-send it; otherwise the
// request waits Config.WaitTimeout for its answer and is never re-sent.
// A proxy whose Send fails is skipped at once for the next one.
//
// Errors (nothing kept, nothing sent): ErrClosed; ErrUnknownZone;
// ErrBadRequest for a nil request, or wrapping the wire error for a command
// the codec does not carry (SQL and the like), a bad key count or an
// oversize frame; a *NoProxyError (errors.Is ErrNoProxy) when no proxy is
// available, naming each proxy with the reason it could not take the
// request (SPEC R13, issue 29); the transport's own error, as it is, when
// it refused the request itself (it wraps ErrRequestRefused: no other
// proxy is tried);
// ErrTooManyRequests when the zone tracks its maximum of requests;
// ErrPoller on a PollSelf client without Config.OnResponse, which would
// have no reader for the responses (always, whatever came before).
func (c *Client) Send(zone Zone, req *Request) (uint64, error) {
	if c.pollerKind == PollSelf {
		if c.onResponse == nil {
			return 0, ErrPoller
		}
		if _, err := c.selfPolled(); err != nil {
			return 0, err
		}
	}
	return c.send(zone, req, 0, 0)
}

// send is Send for a request whose final result goes to the Do call with
// waiter number waiter (0: the asynchronous API). end, if not 0, is the Do
// caller's deadline in ns since the client's epoch: a read with read retry
// whose budget would end after it takes the time left as its budget (SPEC
// §7 R20: its segments are cut from that, and the engine forgets it then).
func (c *Client) send(zone Zone, req *Request, waiter uint32, end int64) (uint64, error) {
	if req == nil {
		return 0, fmt.Errorf("%w: nil request", ErrBadRequest)
	}
	tok := c.closeMu.RLock()
	defer c.closeMu.RUnlock(tok)
	if c.closed.Load() {
		return 0, ErrClosed
	}
	z := c.zoneOf(zone)
	if z == nil {
		return 0, unknownZone(zone)
	}
	m, conf, err := c.classify(z, req)
	if err != nil {
		return 0, err
	}
	m.waiter = waiter
	// The meta stays on this stack until Insert copies it: a flight field
	// pointing at it would make it escape (flight's pointers leak as one).
	f := flight{c: c, z: z, seq: z.nextSeq()}
	m.timer = sendToken(f.seq)
	bb := getFrameBuf(req)
	defer putFrameBuf(bb)
	bb.B, err = pack(bb.B[:0], wire.RequestHeader{
		Command: req.Command, Seq: f.seq, AsyncID: req.AsyncID, AppID: zone.AppID, ZoneID: zone.ZoneID, Table: req.Table,
	}, req)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	f.now = c.now()
	if end != 0 && m.kind != kindPlain && end-f.now < int64(m.budget()) {
		// At least minDeadlineUnit per unit x: the first timer must not come
		// before the sender has published its handle (sendFirst), which a
		// deadline microseconds away would make routine rather than a
		// stalled sender's accident. The caller's context still ends Do on
		// time; the engine keeps the read that much longer at most.
		left := max(end-f.now, int64(minDeadlineUnit)*int64(triangle(int(m.max)+1)))
		m.budgetUs = uint32(min(left, int64(m.budget())) / int64(time.Microsecond))
	}
	if err := f.admit(&m); err != nil {
		return 0, err
	}
	return f.sendFirst(&m, bb.B, req, conf)
}

// minDeadlineUnit is the shortest first segment x a Do's deadline may cut a
// read's budget to (SPEC §7 R20): 5 ms, so 30 ms for MaxRetries 2.
const minDeadlineUnit = 5 * time.Millisecond

// classify decides a request's kind (SPEC R3, R4): a read with read retry
// if its class has a budget and the zone's configuration lists its command,
// else plain. It returns the meta with the budget and MaxRetries the
// request keeps, and the configuration whose error codes it keeps (SPEC
// R1, R5); the cap is checked later (admit).
func (c *Client) classify(z *zone, req *Request) (ctxMeta, *Conf, error) {
	m := ctxMeta{cmd: uint8(req.Command)}
	switch req.Command.Body() {
	case wire.BodyUnknown:
		return m, nil, fmt.Errorf("%w: %w: %v", ErrBadRequest, wire.ErrUnknownCommand, req.Command)
	case wire.BodyKeyValue:
		return m, nil, nil // kindPlain
	case wire.BodyBatch:
		m.kind = kindBatch
	case wire.BodyIndex:
		m.kind = kindIndex
	default:
		m.kind = kindSimple
	}
	budget := c.complexBudget.Load()
	if m.kind == kindSimple {
		budget = c.simpleBudget.Load()
	}
	conf := z.conf.Load()
	if budget > 0 && conf != nil && conf.Enabled() && conf.HasCmd(uint32(req.Command)) {
		m.budgetUs = uint32(budget / int64(time.Microsecond))
		m.max = uint8(conf.MaxRetries)
		m.ncodes = uint8(len(conf.ErrorCodes))
	} else {
		m.kind = kindPlain
	}
	return m, conf, nil
}

// admit takes a unit of the zone's context cap for a read with read retry
// (SPEC R2); at the cap the read goes out plain, counted and logged
// (rate-limited). A plain request takes a unit of Config.MaxWaitingPerZone
// instead, or fails with ErrTooManyRequests. The zone's counters are the
// only limits: the table and the wheel have none. admit then sets the first
// deadline: the first segment's end for a simple read (SPEC R6, R21), the
// first wait x (or Hedge's d, SPEC R21) for a complex read (SPEC R10),
// Config.WaitTimeout for a plain request.
func (f *flight) admit(m *ctxMeta) error {
	c, z := f.c, f.z
	m.firstMs = uint32(f.now / int64(time.Millisecond))
	if m.kind != kindPlain && !z.stats.reserveContext(c.maxContexts.Load()) {
		m.kind, m.budgetUs, m.max, m.ncodes = kindPlain, 0, 0, 0
		z.stats.capHits.Add(1)
		if ok, held := z.capLog.allow(f.now, time.Second); ok {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgReachMaxContext, z.attrs(
				slog.Int64("max_context_count", c.maxContexts.Load()), slog.Uint64("hits", held+1))...)
		}
	}
	if m.kind == kindPlain && !z.stats.reserveWaiting(int64(c.maxWaiting)) {
		return ErrTooManyRequests
	}
	switch m.kind {
	case kindPlain:
		m.deadline = f.now + int64(c.waitTimeout)
	case kindSimple:
		first, hedged := z.firstSegment(m.budget(), int(m.max))
		m.deadline = f.now + int64(first)
		if hedged {
			m.flags |= flagHedged
		}
	default:
		first, _ := z.firstWait(m.budget(), int(m.max)) // x, or the hedged d (SPEC R21)
		m.deadline = f.now + int64(first)
	}
	return nil
}

// sendFirst stores the context (meta m, frame, user buffer) and sends the
// first attempt, moving on to the next proxy at once when the transport
// refuses one (SPEC R13). conf is the configuration whose error codes the
// request keeps (SPEC R5).
//
// Handing the context to the poller: the sender fills it (meta, scratch),
// schedules its first timer and publishes the handle, then sends the frame.
// Until the send, only the timer can bring the poller to the context, and
// only after x (a stalled sender); so a failed send that cancels the timer
// takes the context back untouched, and one whose timer already fired
// leaves it to the poller as a lost first attempt. The handle is published
// by a compare-and-swap from the context's send token (sendToken), which
// any store by the poller replaces: a sender never overwrites the poller's
// handle, and one that finds its context gone (the poller finished it
// meanwhile, and the slab reused the place) writes nothing.
func (f *flight) sendFirst(m *ctxMeta, frame []byte, req *Request, conf *Conf) (uint64, error) {
	c, z := f.c, f.z
	stored := frame // a plain request is never rebuilt: it keeps only its user buffer
	if m.kind == kindPlain {
		stored = nil
	}
	// SPEC §7 R13 round 3: a simple read with a retry left may carry the
	// probe of a suspect proxy (health.go).
	mayProbe := c.probeEvery != 0 && m.kind == kindSimple && m.max > 0
	var probe, lastID ProxyID
	var lastErr error // the last Send error, for the NoProxyError
	var skip proxySet
	stall := c.stallAfter(m.deadline - f.now) // a share of the first segment (health.go)
	for {
		p, q, ok := c.chooseFirst(z, &skip, f.now, stall, mayProbe && probe == 0)
		if !ok {
			f.releaseReservation(m.kind)
			return 0, c.noProxy(z, f.now, lastID, lastErr)
		}
		if q != 0 && (z.guard == nil || z.guard.TryRetryAt(c.at(f.now))) {
			probe = q // the storm guard passes the probe like any re-send (SPEC R19)
		}
		if probe == p {
			probe = 0 // no healthy proxy left: the read itself goes to the suspect one
		}
		ref, err := z.table.Insert(f.seq, *m, stored, req.UserBuffer, scratchSize(m.kind, m.max, int(m.ncodes), len(req.Keys)))
		if err != nil {
			f.releaseReservation(m.kind)
			if errors.Is(err, ctxtable.ErrFull) { // a slab's limit, far beyond the zone's bounds
				return 0, ErrTooManyRequests
			}
			return 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		f.ref, f.m = ref, ref.Meta()
		f.initScratch(p, req, conf)
		if probe != 0 {
			// The probe is the read's first re-send, out at once: it uses
			// a retry and is recorded before the context is the poller's.
			f.m.retries = 1
			f.addTried(probe)
		}
		h, err := z.wheel.ScheduleOffset(time.Duration(m.deadline), timerID(f.seq, 0))
		if err != nil {
			// Not reached: the zone's bounds keep the wheel far from full
			// and every deadline in range (MaxContextsPerZone).
			f.untry()
			z.table.Delete(f.seq)
			f.releaseReservation(m.kind)
			return 0, ErrTooManyRequests
		}
		if afterFirstSchedule != nil {
			afterFirstSchedule() // tests only: the sender stalls here
		}
		atomic.CompareAndSwapUint64(&ref.Meta().timer, m.timer, uint64(h))
		if err := c.tr.Send(p, frame); err != nil {
			refused := errors.Is(err, ErrRequestRefused)
			if !refused {
				z.stats.sendFailures.Add(1)
				c.suspect(p, f.now)
			}
			if !z.wheel.Cancel(h) {
				// The timer fired while the sender stalled: the poller owns
				// the request and re-sends it as a lost first attempt.
				z.stats.countSent(wire.Command(m.cmd), m.kind)
				f.sendProbe(probe, frame)
				return f.seq, nil
			}
			f.untry()
			z.table.Delete(f.seq)
			f.ref, f.m = ctxtable.Ref[ctxMeta]{}, nil
			if refused {
				// The request, not the proxy: no other proxy would take
				// it, and the caller gets the transport's own error
				// (SPEC R13, issue 29).
				f.releaseReservation(m.kind)
				return 0, err
			}
			skip.add(p)
			lastID, lastErr = p, err
			continue
		}
		z.stats.countSent(wire.Command(m.cmd), m.kind)
		f.countLoad(wire.Command(m.cmd))
		f.sendProbe(probe, frame)
		return f.seq, nil
	}
}

// noProxy returns the error of a Send that found no proxy to take its
// request (SPEC R13, issue 29): a *NoProxyError naming the zone and, for
// each of the first MaxNoProxyCauses proxies of its route, why it could not
// take it — the error its Send returned (last is the proxy whose Send
// failed last, with lastErr), else what the transport says of it
// (ProxyErrorer), else ErrUnavailable. It logs MsgNoProxy with the error,
// at most once per second per zone. It allocates, on this error path only.
func (c *Client) noProxy(z *zone, now int64, last ProxyID, lastErr error) error {
	rt := z.route.Load()
	infos := *c.proxies.Load()
	pe, _ := c.tr.(ProxyErrorer)
	e := &NoProxyError{Zone: z.key, Proxies: len(rt.ids)}
	for _, id := range rt.ids[:min(len(rt.ids), MaxNoProxyCauses)] {
		var cause error
		if pe != nil {
			cause = pe.ProxyError(id)
		}
		if cause == nil && id == last {
			cause = lastErr
		}
		if cause == nil {
			cause = ErrUnavailable
		}
		e.Causes = append(e.Causes, ProxyCause{Proxy: infos[id].p, Err: cause})
	}
	if ok, held := z.noProxyLog.allow(now, time.Second); ok {
		c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgNoProxy, z.attrs(
			slog.String("error", e.Error()), slog.Uint64("suppressed", held))...)
	}
	return e
}

// sendProbe sends the copy of a read's first frame to the suspect proxy id
// as the read's attempt 1 (SPEC §7 R13 round 3), if id is not 0. The
// context is the poller's by now: only the sender's own frame is read. A
// probe the transport refuses leaves the proxy suspect; the read, which
// recorded the attempt, ends by its budget as usual.
func (f *flight) sendProbe(id ProxyID, frame []byte) {
	if id == 0 {
		return
	}
	bb := framePools[0].Get()
	var err error
	if bb.B, err = wire.AppendResend(bb.B[:0], frame, 1); err == nil {
		f.z.stats.probes.Add(1)
		if err = f.c.tr.Send(id, bb.B); err != nil {
			f.z.stats.sendFailures.Add(1)
		}
	}
	putFrameBuf(bb)
}

// countLoad deposits a read whose first attempt is out into the zone's
// storm guard, whose ratio is over the reads that reached a proxy (SPEC
// §7 R19: a refused Send — no proxy, unknown zone, full table, closed
// client — deposits nothing, so refusals cannot buy re-sends).
// The context is the poller's once its frame is out: cmd comes from the
// sender's own copy of the meta.
func (f *flight) countLoad(cmd wire.Command) {
	if g := f.z.guard; g != nil && cmd.IsRead() {
		g.Request()
	}
}

// afterFirstSchedule, when set (tests only, never while a client runs),
// is called by a sender between scheduling its read's first timer and
// publishing the handle: the window in which the poller may see that timer
// fire (resend.go, onFire).
var afterFirstSchedule func()

// sendToken is a context's timer field until its sender publishes the
// first timer's handle: unique among the zone's contexts in flight, never
// 0, and never a timerwheel.Handle (whose top bit is always set).
func sendToken(seq uint64) uint64 { return 1<<62 | seq&counterMask }

// initScratch writes the first attempt's proxy, the error codes of conf
// and the kind's starting progress into a context just inserted (its
// scratch is zeroed).
func (f *flight) initScratch(first ProxyID, req *Request, conf *Conf) {
	f.m.ntried = 0
	f.addTried(first)
	codes := f.codes()
	for i := range int(f.m.ncodes) {
		binary.LittleEndian.PutUint32(codes[4*i:], uint32(conf.ErrorCodes[i]))
	}
	switch f.m.kind {
	case kindBatch:
		binary.LittleEndian.PutUint32(f.state()[4:], uint32(len(req.Keys)))
	case kindIndex:
		f.setIndexNext(req.Position)
	case kindSimple:
		f.setSimpleEnd(f.now + int64(f.m.budget()))
	case kindPlain:
		binary.LittleEndian.PutUint64(f.state()[4:], req.AsyncID)
	}
}

// releaseReservation gives back the unit a failed Send reserved for a
// request of kind: of the context cap, or of the plain requests' bound.
func (f *flight) releaseReservation(kind uint8) { f.z.stats.release(kind) }

// framePools hold the buffers Send packs frames into, one pool per size
// class. bytebufferpool drops buffers above the 95th percentile of the sizes
// it sees, so a single pool fed mostly simple reads would allocate afresh for
// every large batch frame; a pool per class calibrates to its own sizes.
// Frames above the largest class (maxRetainedBuf) are packed into a buffer
// of their own that is not kept (SPEC R15: no buffer grows for one outsized
// request and stays grown).
var framePools [3]bytebufferpool.Pool

// getFrameBuf returns a buffer for req's frame: from the pool of its size
// class — up to 256 B, 4 KiB, 64 KiB, estimated from the keys and values
// without packing — or a fresh one for a larger frame.
func getFrameBuf(req *Request) *bytebufferpool.ByteBuffer {
	n := wire.RequestHeaderSize + len(req.Table) + 16 + len(req.Key) + len(req.Value)
	for _, k := range req.Keys {
		n += 8 + len(k)
	}
	switch {
	case n <= 256:
		return framePools[0].Get()
	case n <= 4<<10:
		return framePools[1].Get()
	case n <= maxRetainedBuf:
		return framePools[2].Get()
	}
	return &bytebufferpool.ByteBuffer{}
}

// putFrameBuf returns a buffer to the pool of its capacity's class, or
// drops it when it is above the largest (an outsized frame's).
func putFrameBuf(bb *bytebufferpool.ByteBuffer) {
	switch n := cap(bb.B); {
	case n <= 256:
		framePools[0].Put(bb)
	case n <= 4<<10:
		framePools[1].Put(bb)
	case n <= maxRetainedBuf:
		framePools[2].Put(bb)
	}
}

// pack appends req's frame to dst.
func pack(dst []byte, h wire.RequestHeader, req *Request) ([]byte, error) {
	switch h.Command.Body() {
	case wire.BodyKey:
		return wire.AppendKeyRequest(dst, h, req.Key)
	case wire.BodyBatch:
		return wire.AppendBatchRequest(dst, h, req.Keys)
	case wire.BodyIndex:
		return wire.AppendIndexRequest(dst, h, req.Key, req.Position, req.Limit)
	case wire.BodyKeyValue:
		return wire.AppendWriteRequest(dst, h, req.Key, req.Value)
	}
	return dst, wire.ErrUnknownCommand
}
