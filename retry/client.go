package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/timerwheel"
	"github.com/readretry/readretry/wire"
	"github.com/valyala/bytebufferpool"
)

// Defaults of Config.
const (
	// DefaultMaxContexts is the per-zone context cap when
	// SetReadRetryMaxContextCountPerZone was not called or got n <= 0
	// (SPEC R2).
	DefaultMaxContexts = 500_000
	// MaxBudget is the largest read retry budget SetReadRetryTimeout takes:
	// contexts keep it in 32 bits of microseconds. Budgets are meant to be
	// below the caller's own timeout, seconds in practice (seed 000 §6).
	MaxBudget = time.Hour
	// DefaultWaitTimeout is Config.WaitTimeout's default.
	DefaultWaitTimeout = 5 * time.Second
	// DefaultMaxWaiting is Config.MaxWaitingPerZone's default.
	DefaultMaxWaiting = 500_000
	// MaxZones is the number of zones one Client can serve: the zone's
	// number travels in the top bits of every sequence number.
	MaxZones = 1<<(64-counterBits) - 1

	counterBits = 40
	counterMask = 1<<counterBits - 1
)

// Zone names one zone of the database: (AppID, ZoneID) (SPEC §1).
type Zone struct {
	AppID  uint32 // the application (the seed's APP_ID)
	ZoneID uint32 // the zone within it (the seed's ZONE_ID)
}

// Config sets up a Client. Only Transport is required.
type Config struct {
	// Transport carries frames to and from the proxies. Required.
	Transport Transport
	// Logger receives the R16 log lines; nil means slog.Default().
	Logger *slog.Logger
	// Clock returns the current time; nil means time.Now. Tests pass a fake
	// clock so that schedules can be checked to the millisecond without
	// sleeping.
	Clock func() time.Time
	// Tick is the timing wheel's tick; 0 means timerwheel.DefaultTick (1 ms).
	// Timers fire at most one tick plus the poll interval late (SPEC R14).
	Tick time.Duration
	// Shards is the context table's shard count per zone (a power of two);
	// 0 means ctxtable.DefaultShards(). See the README's tuning table.
	Shards int
	// WaitTimeout is how long a request without a read retry context (a
	// write, a read with retry off, a read over the cap) waits for its final
	// packet before it ends with ResultWaitRspTimeout. For a multi-packet
	// answer the wait restarts at each packet. 0 means DefaultWaitTimeout.
	WaitTimeout time.Duration
	// MaxWaitingPerZone bounds the requests without a context a zone tracks
	// at once (each keeps its user buffer and a small header); beyond it Send
	// returns ErrTooManyRequests. 0 means DefaultMaxWaiting.
	MaxWaitingPerZone int
}

// Request is one request for Send. Which fields count depends on the
// command's body (wire.BodyKind): Key for simple reads (7, 103, 15); Keys
// for batch reads (23, 117, 153); Key (the part key), Position and Limit for
// index reads (25, 11); Key and Value for writes (1, 3, 5, 9). Send only
// reads the Request and the slices it points to, and keeps none of them.
type Request struct {
	// Command decides the body: one of the eight reads or the writes
	// (wire.Command); any other command is refused with ErrBadRequest.
	Command wire.Command
	// Table is the table name, at most wire.MaxTableName bytes.
	Table string
	// Key is a simple read's or a write's key, or an index read's part key;
	// empty keys are sent as they are. Fields the command does not use are
	// ignored. The whole frame is at most wire.MaxFrameSize (16 MiB).
	Key []byte
	// Value is a write's value.
	Value []byte
	// Keys are a batch read's keys; the answers name each by its index here.
	Keys [][]byte
	// Position is the first stream position an index read asks for (0 = from
	// the start); Limit the most records it wants (0 = all).
	Position uint64
	Limit    uint32
	// AsyncID is the caller's, returned untouched in every Response.
	AsyncID uint64
	// UserBuffer is copied once by Send and returned, byte for byte, by
	// every Response of the request (SPEC R9, R12). At most a few KiB is
	// typical; it counts towards the context's memory (SPEC R15).
	UserBuffer []byte
}

// Client is a read-retry client serving many zones (SPEC §1). Send may be
// called from any number of goroutines; RecvResponse is serialised
// internally (it is meant for one polling goroutine, and the Response it
// returns stays valid only until the next call). A Client must be made with
// New.
type Client struct {
	tr          Transport
	log         *slog.Logger
	clock       func() time.Time
	epoch       time.Time
	tick        time.Duration
	shards      int
	waitTimeout time.Duration
	maxWaiting  int

	// closeMu lets Close wait for Sends under way: each Send holds it for
	// reading (reader-biased, so senders on many cores do not contend) and
	// Close takes it for writing before it sweeps the tables.
	closeMu *xsync.RBMutex

	simpleBudget  atomic.Int64 // time.Duration, SPEC R1
	complexBudget atomic.Int64
	maxContexts   atomic.Int64 // per zone, SPEC R2
	closed        atomic.Bool

	mu        sync.Mutex                // guards the registries below (route updates; rare)
	zoneByKey *xsync.MapOf[Zone, *zone] // written under mu, read lock-free by Send

	zoneByIdx atomic.Pointer[[]*zone]
	proxies   atomic.Pointer[[]proxyInfo] // indexed by ProxyID
	proxyIDs  map[Proxy]ProxyID
	hostIDs   map[string]uint16

	orphanMu sync.Mutex
	orphans  []orphan
	orphanN  atomic.Int32

	malformed   atomic.Uint64
	unknownSeq  atomic.Uint64
	malformedRL rateLimit

	pollMu sync.Mutex
	poll   poller
}

type proxyInfo struct {
	p    Proxy
	host uint16 // client-wide host number, for SPEC R13
}

// orphan is a context whose timer could not be scheduled (wheel at
// capacity); the poller retries until it can.
type orphan struct {
	z   *zone
	seq uint64
}

// New returns a Client with read retry off (both budgets 0, SPEC R1) and no
// zones. Errors wrap ErrInvalidConfig: no Transport, a negative duration or
// count.
func New(cfg Config) (*Client, error) {
	if cfg.Transport == nil {
		return nil, fmt.Errorf("%w: Config.Transport is nil", ErrInvalidConfig)
	}
	if cfg.Tick < 0 || cfg.WaitTimeout < 0 || cfg.MaxWaitingPerZone < 0 || cfg.Shards < 0 {
		return nil, fmt.Errorf("%w: negative Tick, WaitTimeout, MaxWaitingPerZone or Shards", ErrInvalidConfig)
	}
	c := &Client{
		tr:          cfg.Transport,
		log:         cfg.Logger,
		clock:       cfg.Clock,
		tick:        cfg.Tick,
		shards:      cfg.Shards,
		waitTimeout: cfg.WaitTimeout,
		maxWaiting:  cfg.MaxWaitingPerZone,
		closeMu:     xsync.NewRBMutex(),
		proxyIDs:    make(map[Proxy]ProxyID),
		hostIDs:     make(map[string]uint16),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	if c.tick == 0 {
		c.tick = timerwheel.DefaultTick
	}
	if c.waitTimeout == 0 {
		c.waitTimeout = DefaultWaitTimeout
	}
	if c.maxWaiting == 0 {
		c.maxWaiting = DefaultMaxWaiting
	}
	c.epoch = c.clock()
	c.maxContexts.Store(DefaultMaxContexts)
	c.zoneByKey = xsync.NewMapOf[Zone, *zone]()
	c.zoneByIdx.Store(&[]*zone{})
	c.proxies.Store(&[]proxyInfo{{}}) // ProxyID 0 is never used
	c.poll.init(c)
	return c, nil
}

// now returns the time since the client's epoch in nanoseconds: the unit of
// every time kept in a context.
func (c *Client) now() int64 { return int64(c.clock().Sub(c.epoch)) }

// at converts a time since the epoch back to a time.Time for the wheel.
func (c *Client) at(ns int64) time.Time { return c.epoch.Add(time.Duration(ns)) }

// SetReadRetryTimeout sets the read retry budgets (SPEC R1): simple for
// simple reads (7, 103, 15; the seed recommends 3 s) and complex for
// complex reads (the seed recommends 6 s). Zero turns that class off; both
// are zero after New. It may be called before or after zones are added, and
// again at run time: a change applies to reads sent after it, a read in
// flight keeps the budget it was sent with. Budgets are kept to the
// microsecond. Negative values and values above MaxBudget return an error
// wrapping ErrInvalidConfig and change nothing. Logs MsgSetOption.
func (c *Client) SetReadRetryTimeout(simple, complex time.Duration) error {
	if simple < 0 || complex < 0 || simple > MaxBudget || complex > MaxBudget {
		return fmt.Errorf("%w: read retry timeout out of range [0, %v] (simple %v, complex %v)", ErrInvalidConfig, MaxBudget, simple, complex)
	}
	simple, complex = simple.Truncate(time.Microsecond), complex.Truncate(time.Microsecond)
	c.simpleBudget.Store(int64(simple))
	c.complexBudget.Store(int64(complex))
	c.log.LogAttrs(context.Background(), slog.LevelInfo, MsgSetOption,
		slog.Int64("simple_ms", simple.Milliseconds()), slog.Int64("complex_ms", complex.Milliseconds()))
	return nil
}

// ReadRetryTimeout returns the budgets set by SetReadRetryTimeout.
func (c *Client) ReadRetryTimeout() (simple, complex time.Duration) {
	return time.Duration(c.simpleBudget.Load()), time.Duration(c.complexBudget.Load())
}

// SetReadRetryMaxContextCountPerZone sets the most read retry contexts one
// zone keeps (SPEC R2); n <= 0 means DefaultMaxContexts (500,000). Zones
// added later inherit it. At the cap a read is still sent, without a
// context: it will not be retried. Lowering the cap never drops contexts in
// flight; new reads wait for the count to fall below it. A zone's timing
// wheel is sized when the zone is added, for the larger of the cap then and
// DefaultMaxContexts; a zone added earlier keeps at most that many contexts
// (logged as MsgCapClamped), so set a cap above 500,000 before ApplyRoute.
func (c *Client) SetReadRetryMaxContextCountPerZone(n int) {
	if n <= 0 {
		n = DefaultMaxContexts
	}
	n = min(n, ctxtable.MaxCap-c.maxWaiting)
	c.maxContexts.Store(int64(n))
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "set read retry max context count",
		slog.Int("max_context_count", n))
	for _, z := range *c.zoneByIdx.Load() {
		// The table's own cap also bounds requests without retry; the zone
		// counter (zoneCounters.reserveContext) enforces the context cap.
		capN := z.maxContexts(int64(n))
		_ = z.table.SetCap(int(capN) + c.maxWaiting)
		if capN < int64(n) {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgCapClamped,
				slog.Uint64("app_id", uint64(z.key.AppID)), slog.Uint64("zone_id", uint64(z.key.ZoneID)),
				slog.Int("max_context_count", n), slog.Int64("used", capN))
		}
	}
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
	for _, p := range proxies {
		if p.Host == "" {
			return fmt.Errorf("%w: proxy with an empty host", ErrInvalidConfig)
		}
	}
	conf, rawMax, found, confErr := confFromList(collectURLList)

	var opened []ProxyID
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		c.open(opened) // a dial may take time: not under c.mu
	}()
	z := c.zoneOf(zone)
	if z == nil {
		var err error
		if z, err = c.addZone(zone); err != nil {
			return err
		}
	}
	rt, opened, err := c.register(proxies)
	if err != nil {
		return err
	}
	z.route.Store(rt)
	attrs := func(extra ...slog.Attr) []slog.Attr {
		return append([]slog.Attr{slog.Uint64("app_id", uint64(zone.AppID)), slog.Uint64("zone_id", uint64(zone.ZoneID))}, extra...)
	}
	switch {
	case confErr != nil:
		c.log.LogAttrs(context.Background(), slog.LevelError, MsgBadConf, attrs(slog.String("error", confErr.Error()))...)
		return confErr
	case found:
		if rawMax > MaxMaxRetries {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgConfClamped,
				attrs(slog.Int("read_retry_max_cnt", rawMax), slog.Int("used", MaxMaxRetries))...)
		}
		z.conf.Store(&conf)
		c.log.LogAttrs(context.Background(), slog.LevelInfo, MsgRecvConf, attrs(
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
	// The wheel is sized once, for the larger of the cap now and the
	// default, so that raising the cap later needs no new wheel; timers of
	// contexts that ended before their sender published the timer's handle
	// linger until they fire (see the package comment), so it has room for
	// twice the requests the zone can track. The zone's cap can never
	// exceed what that wheel holds (zone.limit).
	cur := int(c.maxContexts.Load())
	wheelCap := min(2*(max(cur, DefaultMaxContexts)+c.maxWaiting)+1024, timerwheel.MaxCapacity)
	limit := int64((wheelCap-1024)/2 - c.maxWaiting)
	table, err := ctxtable.New[ctxMeta](ctxtable.Config{Cap: int(min(int64(cur), limit)) + c.maxWaiting, Shards: c.shards})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	wheel, err := timerwheel.New(c.tick, c.epoch, wheelCap)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	z := &zone{key: key, idx: uint64(len(old) + 1), table: table, wheel: wheel, limit: limit}
	z.route.Store(&route{})
	idx := append(append(make([]*zone, 0, len(old)+1), old...), z)
	c.zoneByIdx.Store(&idx)
	c.zoneByKey.Store(key, z)
	return z, nil
}

// register gives each proxy its ProxyID and returns the route and the
// proxies seen for the first time, for open; c.mu is held.
func (c *Client) register(proxies []Proxy) (*route, []ProxyID, error) {
	infos := *c.proxies.Load()
	fresh := 0
	for _, p := range proxies {
		if _, ok := c.proxyIDs[p]; !ok {
			fresh++
		}
	}
	if len(infos)-1+fresh > MaxProxies {
		return nil, nil, fmt.Errorf("%w: more than %d proxy endpoints", ErrInvalidConfig, MaxProxies)
	}
	rt := &route{}
	var opened []ProxyID
	if fresh > 0 {
		infos = append(make([]proxyInfo, 0, len(infos)+fresh), infos...)
	}
	for _, p := range proxies {
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
		if !rt.has(id) {
			rt.ids = append(rt.ids, id)
			rt.hosts = append(rt.hosts, infos[id].host)
		}
	}
	c.proxies.Store(&infos)
	return rt, opened, nil
}

// open tells the transport about new proxies; until it is done they count
// as unavailable to proxy choice (Transport.Available).
func (c *Client) open(ids []ProxyID) {
	for _, id := range ids {
		p, _ := c.ProxyOf(id)
		if err := c.tr.Open(id, p); err != nil {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, "open proxy failed",
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

// Stats returns a snapshot of a zone's counters (SPEC R17), or
// ErrUnknownZone.
func (c *Client) Stats(zone Zone) (Stats, error) {
	z := c.zoneOf(zone)
	if z == nil {
		return Stats{}, ErrUnknownZone
	}
	return z.stats.snapshot(), nil
}

// InFlight returns how many requests a zone tracks now (with and without a
// read retry context) and how many timers its wheel holds; both fall to 0
// once every request has its final result and its last timer has fired
// (leak checks, SPEC §6). An unknown zone reports 0, 0; check the zone with
// Stats when that matters.
func (c *Client) InFlight(zone Zone) (requests, timers int) {
	z := c.zoneOf(zone)
	if z == nil {
		return 0, 0
	}
	return z.table.Len(), z.wheel.Len()
}

// TableStats returns the zone's context table figures (memory, probe
// length), for the R15 footprint and tests.
func (c *Client) TableStats(zone Zone) (ctxtable.Stats, error) {
	z := c.zoneOf(zone)
	if z == nil {
		return ctxtable.Stats{}, ErrUnknownZone
	}
	return z.table.Stats(), nil
}

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
// ErrBadRequest wrapping the wire error for a command the codec does not
// carry (SQL and the like), a bad key count or an oversize frame;
// ErrNoProxy when no proxy is available; ErrTooManyRequests when the zone
// tracks its maximum of requests.
func (c *Client) Send(zone Zone, req *Request) (uint64, error) {
	tok := c.closeMu.RLock()
	defer c.closeMu.RUnlock(tok)
	if c.closed.Load() {
		return 0, ErrClosed
	}
	z := c.zoneOf(zone)
	if z == nil {
		return 0, ErrUnknownZone
	}
	cmd := req.Command
	body := cmd.Body()
	if body == wire.BodyUnknown {
		return 0, fmt.Errorf("%w: %w: %v", ErrBadRequest, wire.ErrUnknownCommand, cmd)
	}

	m := ctxMeta{asyncID: req.AsyncID, cmd: uint8(cmd)}
	scratch := 0
	switch body {
	case wire.BodyKeyValue:
		m.kind = kindPlain
	case wire.BodyBatch:
		m.kind = kindBatch
		m.nkeys = uint32(len(req.Keys))
		scratch = wire.BitsetLen(len(req.Keys))
	case wire.BodyIndex:
		m.kind = kindIndex
		m.progress = req.Position
	default:
		m.kind = kindSimple
	}
	if m.kind != kindPlain {
		budget := c.complexBudget.Load()
		if m.kind == kindSimple {
			budget = c.simpleBudget.Load()
		}
		conf := z.conf.Load()
		if budget > 0 && conf != nil && conf.Enabled() && conf.HasCmd(uint32(cmd)) {
			m.budgetUs = uint32(budget / int64(time.Microsecond))
			m.max = uint8(conf.MaxRetries)
		} else {
			m.kind = kindPlain
		}
	}
	if m.kind == kindPlain {
		m.progress, m.nkeys = 0, 0 // progress counts packets for plain requests (onPlain)
	}

	seq := z.idx<<counterBits | z.seq.Add(1)&counterMask
	pool := framePool(req)
	bb := pool.Get()
	defer pool.Put(bb)
	frame, err := pack(bb.B[:0], wire.RequestHeader{
		Command: cmd, Seq: seq, AsyncID: req.AsyncID, AppID: zone.AppID, ZoneID: zone.ZoneID, Table: req.Table,
	}, req)
	bb.B = frame
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}

	now := c.now()
	m.firstMs = uint32(now / int64(time.Millisecond))
	stored := frame
	if m.kind != kindPlain && !z.stats.reserveContext(z.maxContexts(c.maxContexts.Load())) {
		m.kind, m.budgetUs, m.max, m.progress, m.nkeys = kindPlain, 0, 0, 0, 0
		z.stats.capHits.Add(1)
		if ok, held := z.capLog.allow(now, time.Second); ok {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgReachMaxContext,
				slog.Uint64("app_id", uint64(zone.AppID)), slog.Uint64("zone_id", uint64(zone.ZoneID)),
				slog.Int64("max_context_count", c.maxContexts.Load()), slog.Uint64("hits", held+1))
		}
	}
	switch m.kind {
	case kindPlain:
		m.deadline = now + int64(c.waitTimeout)
		stored, scratch = nil, 0
	case kindSimple:
		m.deadline = now + int64(segmentEnd(m.budget(), int(m.max), 1))
	default:
		m.deadline = now + int64(segmentUnit(m.budget(), int(m.max)))
	}

	var skip proxySet
	for {
		p, ok := c.choose(z, &m, &skip)
		if !ok {
			c.releaseReservation(z, &m)
			return 0, ErrNoProxy
		}
		m.tried[0], m.ntried = p, 1
		ref, err := z.table.Insert(seq, m, stored, req.UserBuffer, scratch)
		if err != nil {
			c.releaseReservation(z, &m)
			if errors.Is(err, ctxtable.ErrFull) {
				return 0, ErrTooManyRequests
			}
			return 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		// Until the frame is out, nothing else can reach this context (no
		// answer can come, no timer exists), so a failed send can take it
		// back and try the next proxy.
		if err := c.tr.Send(p, frame); err != nil {
			z.table.Delete(seq)
			z.stats.sendFailures.Add(1)
			skip.add(p)
			continue
		}
		switch {
		case cmd.IsRead() && m.kind == kindPlain:
			z.stats.readsSent.Add(1)
			z.stats.otherSent.Add(1)
		case cmd.IsRead():
			z.stats.readsSent.Add(1)
		default:
			z.stats.writesSent.Add(1)
		}
		// From here the poller may own the context (an answer may already be
		// in); the sender only publishes the first timer's handle, with a CAS
		// that loses to any handle the poller stored.
		h, err := z.wheel.Schedule(c.at(m.deadline), timerID(seq, 0))
		if err != nil {
			c.addOrphan(z, seq)
		} else {
			atomic.CompareAndSwapUint64(&ref.Meta().timer, 0, uint64(h))
		}
		return seq, nil
	}
}

// releaseReservation gives back the cap unit a failed Send reserved.
func (c *Client) releaseReservation(z *zone, m *ctxMeta) {
	if m.kind != kindPlain {
		z.stats.contexts.Add(-1)
	}
}

func (c *Client) addOrphan(z *zone, seq uint64) {
	c.orphanMu.Lock()
	c.orphans = append(c.orphans, orphan{z, seq})
	c.orphanN.Store(int32(len(c.orphans)))
	c.orphanMu.Unlock()
}

// framePools hold the buffers Send packs frames into, one pool per size
// class. bytebufferpool drops buffers above the 95th percentile of the sizes
// it sees, so a single pool fed mostly simple reads would allocate afresh for
// every large batch frame; a pool per class calibrates to its own sizes.
var framePools [4]bytebufferpool.Pool

// framePool returns the pool for req's frame size: up to 256 B, 4 KiB,
// 64 KiB, or larger (estimated from the keys and values, not packed).
func framePool(req *Request) *bytebufferpool.Pool {
	n := wire.RequestHeaderSize + len(req.Table) + 16 + len(req.Key) + len(req.Value)
	for _, k := range req.Keys {
		n += 8 + len(k)
	}
	switch {
	case n <= 256:
		return &framePools[0]
	case n <= 4<<10:
		return &framePools[1]
	case n <= 64<<10:
		return &framePools[2]
	}
	return &framePools[3]
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

// Close ends the client: it waits for Sends under way to return, then Send
// and ApplyRoute return ErrClosed from then on, RecvResponse returns
// nothing, and every request still tracked is dropped without a final
// result (their buffers return to the zone tables' slabs). Close does not
// close the Transport, which the caller owns. It is safe to call more than
// once.
func (c *Client) Close() error {
	c.closeMu.Lock() // waits for Sends under way: none can insert after the sweep
	c.closed.Store(true)
	c.closeMu.Unlock()
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	c.poll.release = releaseNone
	var seqs []uint64
	for _, z := range *c.zoneByIdx.Load() {
		seqs = seqs[:0]
		z.table.Range(func(seq uint64, r ctxtable.Ref[ctxMeta]) bool {
			seqs = append(seqs, seq)
			return true
		})
		for _, seq := range seqs {
			c.dropContext(z, seq)
		}
	}
	c.poll.finals.reset()
	return nil
}
