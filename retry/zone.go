package retry

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/timerwheel"
)

// Zone names one zone of the database: (AppID, ZoneID) (SPEC §1).
type Zone struct {
	AppID  uint32 // the application (the seed's APP_ID)
	ZoneID uint32 // the zone within it (the seed's ZONE_ID)
}

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
	rr    atomic.Uint32        // re-sends' round-robin position (SPEC R13, "ordinary balancing")
	first atomic.Uint32        // first sends' own round robin: re-sends never move it (SPEC §7 R13 round 3)

	guard *budget.Budget // the storm guard over the zone's reads (SPEC R19); nil: off
	hedge *hedgeEst      // first-answer latency estimate (SPEC R21); nil: Config.Hedge off
	// hedgeComplex is complex reads' first-packet latency estimate (SPEC
	// R21); nil: Config.Hedge off.
	hedgeComplex *hedgeEst

	capLog     rateLimit
	exhaustLog rateLimit
	noProxyLog rateLimit // MsgNoProxy (Send found no proxy)
	stats      zoneCounters
}

// nextSeq returns a new sequence number of the zone: the zone's index in
// the top bits, so that an answer finds its zone, and the zone's counter.
func (z *zone) nextSeq() uint64 { return z.idx<<counterBits | z.seq.Add(1)&counterMask }

// attrs returns the zone's log attributes followed by extra.
func (z *zone) attrs(extra ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{slog.Uint64("app_id", uint64(z.key.AppID)), slog.Uint64("zone_id", uint64(z.key.ZoneID))}, extra...)
}

// route is an immutable snapshot of a zone's proxies, replaced whole on
// each route update so that senders read it without a lock.
type route struct {
	ids   []ProxyID
	hosts []uint16 // hosts[i] is the client-wide host number of ids[i]
}

// ApplyRoute sets a zone's proxies and applies the retry configuration in
// its CollectUrlList (SPEC R5), adding the zone if it is new. It is what an
// SDK calls on each route update from the directory server, at any time.
// The proxy list replaces the zone's (requests in flight keep the proxies
// they tried, which stay open until those attempts end); duplicates are
// ignored. A proxy that no zone's route names any more is released in the
// transport once its attempts in flight have ended, and its ProxyID may go
// to a later endpoint (SPEC R22). New proxies are opened in the transport,
// which never waits on a dial: they count as unavailable until connected.
//
// The conf:// element, if any, replaces the zone's configuration and is
// logged (MsgRecvConf); a list without one leaves it as it was (an old
// directory server); a new zone without one has read retry off. A malformed
// element is logged (MsgBadConf) and returned as an error wrapping
// ErrMalformedConf, after the proxies are applied and with the old
// configuration kept. Other errors change nothing: ErrClosed; ErrTooManyZones
// for a new zone beyond Config.MaxZones; ErrInvalidConfig for more than
// MaxRouteProxies entries, an empty host, or more than MaxProxies endpoints
// in use at once.
//
// ApplyRoute waits for Sends under way when the update leaves a proxy
// unnamed, so it must not be called from inside a Transport's Send.
func (c *Client) ApplyRoute(zone Zone, proxies []Proxy, collectURLList string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if len(proxies) > MaxRouteProxies {
		return fmt.Errorf("%w: a route of %d proxies, more than %d", ErrInvalidConfig, len(proxies), MaxRouteProxies)
	}
	unique, err := uniqueProxies(proxies)
	if err != nil {
		return err
	}
	parsed := parseConfList(collectURLList)

	c.mu.Lock()
	defer c.mu.Unlock()
	z := c.zoneOf(zone)
	fresh := z == nil
	if fresh {
		// Made first and published last, so that a refused update adds no zone.
		if z, err = c.newZone(zone); err != nil {
			return err
		}
	}
	rt, retired, err := c.routeProxies(z.route.Load(), unique)
	if err != nil {
		return err
	}
	z.route.Store(rt)
	if !fresh {
		c.retire(retired)
		return c.applyConf(z, parsed)
	}
	// A new zone gets its configuration before Send can find it: published
	// first, its first reads would go out without read retry (SPEC R5).
	confErr := c.applyConf(z, parsed)
	c.publishZone(z)
	c.retire(retired)
	return confErr
}

// uniqueProxies returns proxies without duplicates, in their first order,
// or an error wrapping ErrInvalidConfig for an empty host. It is linear in
// the list, so a route update costs no more than its size.
func uniqueProxies(proxies []Proxy) ([]Proxy, error) {
	seen := make(map[Proxy]struct{}, len(proxies))
	out := make([]Proxy, 0, len(proxies))
	for _, p := range proxies {
		if p.Host == "" {
			return nil, fmt.Errorf("%w: proxy with an empty host", ErrInvalidConfig)
		}
		if _, ok := seen[p]; !ok {
			seen[p] = struct{}{}
			out = append(out, p)
		}
	}
	return out, nil
}

// applyConf applies a parsed conf:// element to the zone and logs it
// (SPEC R5, R16): a malformed one is logged and returned, the zone keeping
// its configuration; none leaves it as it was.
func (c *Client) applyConf(z *zone, pc parsedConf) error {
	switch {
	case pc.err != nil:
		c.log.LogAttrs(context.Background(), slog.LevelError, MsgBadConf, z.attrs(slog.String("error", pc.err.Error()))...)
		return pc.err
	case pc.found:
		if pc.clampedFrom != "" {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgConfClamped,
				z.attrs(slog.String("read_retry_max_cnt", pc.clampedFrom), slog.Int("used", MaxMaxRetries))...)
		}
		conf := pc.conf
		z.conf.Store(&conf)
		c.log.LogAttrs(context.Background(), slog.LevelInfo, MsgRecvConf, z.attrs(
			slog.Any("cmds", conf.Cmds), slog.Any("error_codes", conf.ErrorCodes), slog.Int("max_retries", conf.MaxRetries))...)
	}
	return nil
}

// Conf returns the zone's current read retry configuration and whether one
// was received.
func (c *Client) Conf(zone Zone) (Conf, bool) {
	z := c.zoneOf(zone)
	if z == nil {
		return Conf{}, false
	}
	if p := z.conf.Load(); p != nil {
		return *p, true
	}
	return Conf{}, false
}

// newZone makes a zone that is not published yet, or ErrTooManyZones;
// c.mu is held.
func (c *Client) newZone(key Zone) (*zone, error) {
	if c.nzones >= c.maxZones {
		return nil, fmt.Errorf("%w: %d zones", ErrTooManyZones, c.maxZones)
	}
	// One owner per limit: the zone's counters decide its caps (SPEC R2,
	// Config.MaxWaitingPerZone); the table and the wheel have none and grow
	// and shrink with what is in flight, so an idle zone costs a few KiB
	// (SPEC R15) and the cap can be raised at any time. The wheel's Start is
	// the client's epoch, so times since it go straight in (ScheduleOffset).
	table, err := ctxtable.New[ctxMeta](ctxtable.Config{Shards: c.shards})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	wheel, err := timerwheel.New(timerwheel.Config{Tick: c.tick, Start: c.epoch})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	z := &zone{key: key, table: table, wheel: wheel}
	if c.guard != nil {
		gc := *c.guard
		gc.Clock = c.clock
		if z.guard, err = budget.New(gc); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	if c.hedge.Percentile > 0 {
		z.hedge, z.hedgeComplex = &hedgeEst{}, &hedgeEst{}
	}
	z.route.Store(&route{})
	return z, nil
}

// publishZone gives a new zone its index — a freed one first — and makes it
// visible to Send and the poller; c.mu is held. Amortised O(1) (SPEC R22):
// the index directory grows a chunk at a time and nothing is copied per
// zone. A reused index carries on its last zone's sequence counter, so an
// answer to the removed zone's requests can never name a request of the new
// one: it is a late answer (Stats.DuplicatesDropped).
func (c *Client) publishZone(z *zone) {
	var slot uint64
	if len(c.zoneFree) > 0 {
		slot = c.zoneFree[0]
		c.zoneFree = c.zoneFree[1:]
		z.seq.Store(c.zoneSeq[slot])
	} else {
		slot = uint64(len(c.zoneSeq))
		c.zoneSeq = append(c.zoneSeq, 0)
	}
	z.idx = slot + 1
	c.zones.set(slot, z)
	c.zoneByKey.Store(z.key, z)
	c.nzones++
}

// RemoveZone removes a zone and releases what it holds (SPEC R22): its
// context table, timing wheel, storm guard and counters go with its last
// request, and its proxies that no other zone's route names are released
// in the transport once their attempts in flight have ended. Exporters
// (retry/retryprom) stop listing it: it is no longer in Zones.
//
// Its requests in flight end as if their budgets had run out, each with its
// one final result through the usual path (RecvResponse, the Config.OnResponse
// callback, or the waiting Do): a read with read retry with what it holds
// or ResultReadRetryTimeout (counted in its zone's Exhausted and logged as
// MsgExhausted, rate-limited), a request without a context with
// ResultWaitRspTimeout. Answers that arrive for them later are dropped and
// counted (ClientStats.UnknownZoneFrames, or DuplicatesDropped of a zone
// that took the removed zone's index).
//
// Send, Do and Stats for the zone then return ErrUnknownZone, until a route
// is applied to it again, which adds it afresh. RemoveZone waits for Sends
// under way and for the poller's current step; it returns ErrUnknownZone
// for a zone the client does not serve and ErrClosed after Close. Like
// ApplyRoute, it must not be called from inside a Transport's Send.
func (c *Client) RemoveZone(zone Zone) error {
	if c.closed.Load() {
		return ErrClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	z := c.zoneOf(zone)
	if z == nil {
		return unknownZone(zone)
	}
	c.zoneByKey.Delete(zone)
	c.zones.set(z.idx-1, nil)
	// A barrier: every Send that found the zone has stored its context or
	// failed; none can find it from now on. Its requests are ended below.
	c.sendBarrier()
	old := z.route.Swap(&route{})
	c.pollMu.Lock()
	c.poll.endZone(z)
	c.pollMu.Unlock()

	c.zoneSeq[z.idx-1] = z.seq.Load()
	c.zoneFree = append(c.zoneFree, z.idx-1)
	c.nzones--
	c.reg.mu.Lock()
	retired := c.reg.uncount(old)
	c.reg.mu.Unlock()
	c.retire(retired)
	return nil
}

// endZone ends every request of a removed zone that has no final result
// yet, as if its budget had run out (RemoveZone); pollMu is held. The
// results are delivered by the next polls, the zone's contexts deleted as
// they are.
func (p *poller) endZone(z *zone) {
	p.now = p.c.now()
	var seqs []uint64
	z.table.Range(func(seq uint64, _ ctxtable.Ref[ctxMeta]) bool {
		seqs = append(seqs, seq)
		return true
	})
	for _, seq := range seqs {
		f, ok := p.flight(z, seq)
		if !ok || f.m.done() {
			continue
		}
		if f.m.kind == kindPlain {
			z.stats.waitTimeouts.Add(1)
			f.finish(ResultWaitRspTimeout)
		} else {
			f.giveUp()
		}
	}
}

// ProxyOf returns the endpoint of a ProxyID the Client handed to its
// Transport (the last one, for an ID released and not given out again).
func (c *Client) ProxyOf(id ProxyID) (Proxy, bool) {
	infos := *c.proxies.Load()
	if id == 0 || int(id) >= len(infos) || infos[id].load == nil {
		return Proxy{}, false
	}
	return infos[id].p, true
}

// Zones returns the zones the client serves now (routes applied, not
// removed), in index order (a zone added after a removal may take the
// removed one's place): a new slice, the caller's. It takes no lock (a zone
// added or removed meanwhile may or may not be listed), so exporters
// (retry/retryprom) can walk every zone's Stats at scrape time.
func (c *Client) Zones() []Zone {
	var out []Zone
	for i := range c.zones.limit() {
		if z := c.zones.at(i); z != nil {
			out = append(out, z.key)
		}
	}
	return out
}

func (c *Client) zoneOf(key Zone) *zone {
	z, _ := c.zoneByKey.Load(key)
	return z
}

// zoneOfSeq finds a sequence number's zone from its top bits.
func (c *Client) zoneOfSeq(seq uint64) *zone {
	i := seq >> counterBits
	if i == 0 {
		return nil
	}
	return c.zones.at(i - 1)
}

// zoneChunkBits sets the size of a chunk of the zone directory: 1,024 zones.
const zoneChunkBits = 10

// zoneChunk is one chunk of the zone directory; chunks never move.
type zoneChunk [1 << zoneChunkBits]atomic.Pointer[zone]

// zoneDir maps a zone's index (minus one) to the zone, read without a lock
// by the poller (an answer's sequence number names its zone's index). It
// grows a chunk at a time, so adding a zone copies nothing but, once per
// 1,024 zones, the list of chunks. Written under Client.mu.
type zoneDir struct {
	chunks atomic.Pointer[[]*zoneChunk]
	n      atomic.Uint64 // slots handed out: every index below it has been used
}

// at returns the zone in slot i, nil if none.
func (d *zoneDir) at(i uint64) *zone {
	cs := d.chunks.Load()
	if cs == nil || i>>zoneChunkBits >= uint64(len(*cs)) {
		return nil
	}
	return (*cs)[i>>zoneChunkBits][i&(1<<zoneChunkBits-1)].Load()
}

// limit returns the number of slots ever handed out; every zone is in a
// slot below it.
func (d *zoneDir) limit() uint64 { return d.n.Load() }

// set puts z (nil: none) in slot i, growing the directory; Client.mu is held.
func (d *zoneDir) set(i uint64, z *zone) {
	var cs []*zoneChunk
	if p := d.chunks.Load(); p != nil {
		cs = *p
	}
	if c := int(i >> zoneChunkBits); c >= len(cs) {
		grown := append(make([]*zoneChunk, 0, c+1), cs...)
		for len(grown) <= c {
			grown = append(grown, new(zoneChunk))
		}
		d.chunks.Store(&grown)
		cs = grown
	}
	cs[i>>zoneChunkBits][i&(1<<zoneChunkBits-1)].Store(z)
	if i >= d.n.Load() {
		d.n.Store(i + 1)
	}
}
