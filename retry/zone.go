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
	rr    atomic.Uint32        // round-robin position (SPEC R13, "ordinary balancing")

	guard *budget.Budget // the storm guard over the zone's reads (SPEC R19); nil: off

	capLog     rateLimit
	exhaustLog rateLimit
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

// proxyInfo is what the client knows of one proxy endpoint.
type proxyInfo struct {
	p    Proxy
	host uint16 // client-wide host number, for SPEC R13
}

// ApplyRoute sets a zone's proxies and applies the retry configuration in
// its CollectUrlList (SPEC R5), adding the zone if it is new. It is what an
// SDK calls on each route update from the directory server, at any time.
// The proxy list replaces the zone's (requests in flight keep the proxies
// they tried); duplicates are ignored. The conf:// element, if any,
// replaces the zone's configuration and is logged (MsgRecvConf); a list
// without one leaves it as it was (an old directory server); a new zone
// without one has read retry off. A malformed element is logged
// (MsgBadConf) and returned as an error wrapping ErrMalformedConf, after the
// proxies are applied and with the old configuration kept. Other errors
// (wrapping ErrInvalidConfig: too many zones or proxies, an empty host) change
// nothing.
func (c *Client) ApplyRoute(zone Zone, proxies []Proxy, collectURLList string) error {
	if c.closed.Load() {
		return ErrClosed
	}
	unique, err := uniqueProxies(proxies)
	if err != nil {
		return err
	}
	parsed := parseConfList(collectURLList)

	var opened []ProxyID
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		c.open(opened) // a dial may take time: not under c.mu
	}()
	if fresh := c.freshProxies(unique); len(*c.proxies.Load())-1+fresh > MaxProxies {
		return fmt.Errorf("%w: more than %d proxy endpoints", ErrInvalidConfig, MaxProxies)
	}
	z := c.zoneOf(zone)
	if z == nil {
		if z, err = c.addZone(zone); err != nil {
			return err
		}
	}
	var rt *route
	rt, opened = c.register(unique)
	z.route.Store(rt)
	return c.applyConf(z, parsed)
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

// addZone creates a zone; c.mu is held.
func (c *Client) addZone(key Zone) (*zone, error) {
	old := *c.zoneByIdx.Load()
	if len(old) >= MaxZones {
		return nil, fmt.Errorf("%w: more than %d zones", ErrInvalidConfig, MaxZones)
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
	z := &zone{key: key, idx: uint64(len(old) + 1), table: table, wheel: wheel}
	if c.guard != nil {
		gc := *c.guard
		gc.Clock = c.clock
		if z.guard, err = budget.New(gc); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	z.route.Store(&route{})
	idx := append(append(make([]*zone, 0, len(old)+1), old...), z)
	c.zoneByIdx.Store(&idx)
	c.zoneByKey.Store(key, z)
	return z, nil
}

// freshProxies counts the proxies (without duplicates) the client does not
// know yet; c.mu is held.
func (c *Client) freshProxies(unique []Proxy) int {
	fresh := 0
	for _, p := range unique {
		if _, ok := c.proxyIDs[p]; !ok {
			fresh++
		}
	}
	return fresh
}

// register gives each proxy of unique (no duplicates, within MaxProxies:
// checked by the caller) its ProxyID and returns the route and the proxies
// seen for the first time, for open; c.mu is held.
func (c *Client) register(unique []Proxy) (*route, []ProxyID) {
	infos := *c.proxies.Load()
	if fresh := c.freshProxies(unique); fresh > 0 {
		infos = append(make([]proxyInfo, 0, len(infos)+fresh), infos...)
	}
	rt := &route{ids: make([]ProxyID, 0, len(unique)), hosts: make([]uint16, 0, len(unique))}
	var opened []ProxyID
	for _, p := range unique {
		id, ok := c.proxyIDs[p]
		if !ok {
			h, ok := c.hostIDs[p.Host]
			if !ok {
				h = uint16(len(c.hostIDs))
				c.hostIDs[p.Host] = h
			}
			id = ProxyID(len(infos))
			infos = append(infos, proxyInfo{p: p, host: h})
			c.proxyIDs[p] = id
			opened = append(opened, id)
		}
		rt.ids = append(rt.ids, id)
		rt.hosts = append(rt.hosts, infos[id].host)
	}
	c.proxies.Store(&infos)
	return rt, opened
}

// open tells the transport about new proxies; until it is done they count
// as unavailable to proxy choice (Transport.Available).
func (c *Client) open(ids []ProxyID) {
	for _, id := range ids {
		p, _ := c.ProxyOf(id)
		if err := c.tr.Open(id, p); err != nil {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgOpenProxyFailed,
				slog.String("proxy", p.String()), slog.String("error", err.Error()))
		}
	}
}

// ProxyOf returns the endpoint of a ProxyID the Client handed to its
// Transport.
func (c *Client) ProxyOf(id ProxyID) (Proxy, bool) {
	infos := *c.proxies.Load()
	if id == 0 || int(id) >= len(infos) {
		return Proxy{}, false
	}
	return infos[id].p, true
}

// Zones returns the zones routes were applied to, in the order they were
// added: a new slice, the caller's. It takes no lock (a zone added
// meanwhile may or may not be listed), so exporters (retry/retryprom) can
// walk every zone's Stats at scrape time.
func (c *Client) Zones() []Zone {
	zs := *c.zoneByIdx.Load()
	out := make([]Zone, len(zs))
	for i, z := range zs {
		out[i] = z.key
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
	zs := *c.zoneByIdx.Load()
	if i == 0 || i > uint64(len(zs)) {
		return nil
	}
	return zs[i-1]
}
