package retry

import (
	"context"
	"log/slog"
	"time"

	"github.com/readretry/readretry/wire"
)

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
	// held are the answers held for requests (SPEC R8, R8b; hold.go), by
	// sequence number; heldFree a few emptied ones for reuse.
	held     map[uint64]*heldAnswer
	heldFree []*heldAnswer
	// self is the waiter of the Do call whose goroutine is polling, if one is
	// (do.go: it needs no wake-up).
	self     *waiter
	selfDone bool // self was finished by this poll
	// sinceAdvance counts packets handled since the wheels last advanced.
	sinceAdvance int
	// release is the context whose final Response was handed out last; it
	// is deleted at the start of the next call, when that Response stops
	// being valid.
	release     uint64
	releaseZone *zone
}

// releaseNone marks that no delivered context waits for release.
const releaseNone = 0

func (p *poller) init(c *Client) {
	p.c = c
	p.fire = p.onFire // one method value, made once: Advance gets no new closure per call
}

// flight returns the poller's handle on the context ref of zone z.
func (p *poller) flight(z *zone, seq uint64) (flight, bool) {
	ref, ok := z.table.Lookup(seq)
	if !ok {
		return flight{}, false
	}
	return flight{c: p.c, z: z, seq: seq, ref: ref, m: ref.Meta(), now: p.now}, true
}

// maxPacketsPerAdvance bounds how many packets RecvResponse handles before
// it advances the timing wheels even though more are waiting, so that
// timers keep firing under a load that never lets the inbox empty. It is a
// trade: after a stall, answers queued beyond this many may lose to their
// deadlines; under overload, timers run this many packets late.
const maxPacketsPerAdvance = 16384

// next is RecvResponse under the poller lock: it runs the engine until a
// response for the asynchronous API is ready, handing responses made for Do
// calls to their waiters on the way (route).
func (p *poller) next() (*Response, bool) {
	c := p.c
	if p.release != releaseNone {
		p.drop(p.releaseZone, p.release)
		p.release, p.releaseZone = releaseNone, nil
	}
	if c.closed.Load() {
		return nil, false
	}
	p.now = c.now()
	if p.finalReady() {
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
			p.advance()
			advanced = true
		} else {
			p.sinceAdvance++
			if p.onPacket(frame, from) && p.forCaller() {
				return &p.rsp, true
			}
		}
		// A packet or a timer may have ended a request with a made result.
		if p.finalReady() {
			return &p.rsp, true
		}
	}
}

// finalReady delivers made results until one is for the asynchronous API
// (true) or none is left.
func (p *poller) finalReady() bool {
	for p.deliverFinal() {
		if p.forCaller() {
			return true
		}
	}
	return false
}

// forCaller reports whether the response just made is for the caller of
// RecvResponse; one made for a Do call goes to its waiter instead.
func (p *poller) forCaller() bool {
	if p.rsp.waiter == 0 {
		return true
	}
	p.route()
	return false
}

// advance fires every zone's due timers at the poll's time.
func (p *poller) advance() {
	p.sinceAdvance = 0
	p.c.reapProxies() // SPEC R22: proxies no route names, once their attempts have ended
	for i := range p.c.zones.limit() {
		z := p.c.zones.at(i)
		if z == nil {
			continue
		}
		p.zone = z
		z.wheel.AdvanceOffset(time.Duration(p.now), p.fire)
	}
	p.zone = nil
}

// onPacket handles one received frame and reports whether it filled the
// response for the caller: it finds the frame's context from its sequence
// number and hands the packet to it (answer.go).
func (p *poller) onPacket(frame []byte, from ProxyID) bool {
	pkt, err := wire.ParseResponse(frame)
	if err != nil {
		p.onMalformed(frame, from, err)
		return false
	}
	p.c.trust(from, p.now) // SPEC §7 R13 round 3: a proxy that answers is healthy
	seq := pkt.Seq()
	z := p.c.zoneOfSeq(seq)
	if z == nil {
		p.onUnknown(nil, seq, from)
		return false
	}
	f, ok := p.flight(z, seq)
	if !ok {
		if seq&counterMask > z.seq.Load()&counterMask || seq&counterMask == 0 {
			p.onUnknown(z, seq, from) // never sent by this client
		} else {
			z.stats.duplicates.Add(1) // late: the request has its final result
		}
		return false
	}
	return f.accept(pkt, from)
}

// onUnknown counts and logs (rate-limited) a packet whose sequence number
// names no zone of the client (z nil: client-wide) or a number the zone
// never sent: a proxy's bug or a packet meant for another client, told
// apart from late answers (SPEC R17, §6).
func (p *poller) onUnknown(z *zone, seq uint64, from ProxyID) {
	c := p.c
	var n uint64
	if z == nil {
		n = c.unknownZone.Add(1)
	} else {
		n = z.stats.unknownSeq.Add(1)
	}
	if ok, held := c.unknownRL.allow(p.now, time.Second); ok {
		px, _ := c.ProxyOf(from)
		c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgUnknownSeq, slog.String("proxy", px.String()),
			slog.Uint64("seq", seq), slog.Bool("zone_known", z != nil), slog.Uint64("count", n), slog.Uint64("suppressed", held))
	}
}

// onMalformed counts (client-wide and, when the header names one, against
// its zone) and logs, rate-limited, a frame that failed to parse.
func (p *poller) onMalformed(frame []byte, from ProxyID, err error) {
	c := p.c
	n := c.malformed.Add(1)
	if ok, _ := c.malformedRL.allow(p.now, time.Second); ok {
		px, _ := c.ProxyOf(from)
		c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgMalformedPacket,
			slog.String("proxy", px.String()), slog.String("error", err.Error()), slog.Uint64("count", n))
	}
	if seq, ok := wire.PeekResponseSeq(frame); ok {
		if z := c.zoneOfSeq(seq); z != nil {
			z.stats.malformed.Add(1)
		}
	}
}

// NextDeadline returns the earliest pending timer over all zones, so that
// a caller (or a PollSelf client's driver) can sleep until then when no packet is expected.
func (c *Client) NextDeadline() (time.Time, bool) {
	var best time.Time
	found := false
	for i := range c.zones.limit() {
		z := c.zones.at(i)
		if z == nil {
			continue
		}
		if t, ok := z.wheel.NextDeadline(); ok && (!found || t.Before(best)) {
			best, found = t, true
		}
	}
	return best, found
}
