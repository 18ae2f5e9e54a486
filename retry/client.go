package retry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/internal/ticker"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/timerwheel"
	"github.com/readretry/readretry/wire"
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
	// MaxContextsPerZone is the largest context cap: 2^24 contexts per zone
	// (gigabytes of contexts already). With MaxWaitingPerZone it keeps a
	// zone's pending timers far below what its timing wheel can hold
	// (timerwheel.MaxCapacity, 2^26), so scheduling a timer cannot fail.
	MaxContextsPerZone = 1 << 24
	// DefaultMaxWaiting is Config.MaxWaitingPerZone's default.
	DefaultMaxWaiting = 500_000
	// MaxWaitingPerZone is the largest Config.MaxWaitingPerZone: 2^24.
	MaxWaitingPerZone = 1 << 24
	// MaxTick bounds Config.Tick and Config.PollInterval (1 s): each adds to
	// the lateness of every deadline (SPEC R14), so a larger one would
	// quietly stretch every read retry schedule.
	MaxTick = time.Second
	// MaxWaitTimeout bounds Config.WaitTimeout (24 h), and 30 times it
	// Config.MaxWaitTotal, so every deadline fits the timing wheel.
	MaxWaitTimeout = 24 * time.Hour
	// DefaultRetryRatio is the storm guard's default ratio (SPEC R19): a
	// zone re-sends at most 0.4 reads per read over the window. It keeps a
	// zone with one host of four dark whole (a quarter of the reads need one
	// re-send each) while a zone whose proxies are all down sends at most
	// about 1.4 attempts per read instead of 1 + MaxRetries.
	DefaultRetryRatio = 0.4
	// DefaultMaxWaitRounds is Config.MaxWaitTotal's default in units of
	// WaitTimeout: a request without read retry is open at most 16 wait
	// timeouts, however many packets its proxy announces.
	DefaultMaxWaitRounds = 16
	// MaxZones is the largest Config.MaxZones: the zone's index travels in
	// the top bits of every sequence number.
	MaxZones = 1<<(64-counterBits) - 1
	// DefaultMaxZones is Config.MaxZones's default: 65,536 zones served at
	// once. An idle zone costs a few KiB (SPEC R15) and every poll visits
	// each zone's timing wheel, so the bound keeps a client that is told
	// about zones without end from growing without end (SPEC R22).
	DefaultMaxZones = 1 << 16

	// DefaultProbeInterval is Config.ProbeInterval's default (SPEC §7 R13
	// round 3): a dark proxy costs one copied attempt per second, and a
	// proxy back from the dark is trusted again within about a second.
	DefaultProbeInterval = time.Second

	counterBits = 40
	counterMask = 1<<counterBits - 1
)

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
	// Tick is the timing wheel's tick; 0 means timerwheel.DefaultTick (1 ms),
	// at most MaxTick. Timers fire at most one tick plus the poll interval
	// late (SPEC R14).
	Tick time.Duration
	// Shards is the context table's shard count per zone, a power of two up
	// to ctxtable.MaxShards; 0 means ctxtable.DefaultShards(). See the
	// shard-count table in BENCHMARKS.md.
	Shards int
	// WaitTimeout is how long a request without a read retry context (a
	// write, a read with retry off, a read over the cap) waits for its final
	// packet before it ends with ResultWaitRspTimeout. For a multi-packet
	// answer the wait restarts at each packet, up to MaxWaitTotal. 0 means
	// DefaultWaitTimeout.
	WaitTimeout time.Duration
	// MaxWaitTotal caps the life of a request without a read retry context:
	// however many packets its proxy sends with "more follow", it ends with
	// ResultWaitRspTimeout this long after Send (ms resolution), so a
	// misbehaving proxy cannot keep it, its user buffer and its caller
	// waiting for ever. 0 means DefaultMaxWaitRounds × WaitTimeout; it is
	// raised to WaitTimeout if below.
	MaxWaitTotal time.Duration
	// RetryBudget tunes each zone's storm guard (SPEC R19): a retry budget
	// (package budget, SPEC B4) over the zone's reads that every re-send —
	// after a timeout or an error code — must pass. A refused re-send is not
	// sent: the read waits for the attempts already out until its budget
	// ends, and the refusal is counted (Stats.RetriesRefused). Zero fields
	// take budget's defaults, except Ratio, whose zero means
	// DefaultRetryRatio; Clock is ignored (the client's is used).
	RetryBudget budget.Config
	// NoRetryBudget turns the storm guard off: every re-send read retry
	// schedules is sent.
	NoRetryBudget bool
	// Poller chooses, once, who drives the client (SPEC R14, R20): PollSelf
	// (the zero value: Do is all a caller needs, the client polls itself)
	// or PollHand (the caller's RecvResponse loop). See Poller.
	Poller Poller
	// OnResponse receives the responses of Send on a PollSelf client; Send
	// needs it there (without it Send returns ErrPoller, since no one would
	// read its responses) and it must be nil with PollHand (New refuses it:
	// the RecvResponse loop gets them). The Response is valid only during
	// the call: copy what must be kept. It runs with the client's poller
	// lock held, one call at a time, on the driver's goroutine or on a
	// goroutine inside Do; it must not call Close, RecvResponse or Do.
	OnResponse func(*Response)
	// PollInterval is the interval of a PollSelf client's driver; 0 means
	// Tick, at most MaxTick. Timer lateness is at most one wheel tick plus
	// this interval (SPEC R14). Over a Transport that implements Waiter the
	// driver also wakes as soon as a frame arrives.
	PollInterval time.Duration
	// MaxWaitingPerZone bounds the requests without a context a zone tracks
	// at once (each keeps its user buffer and a small header); beyond it Send
	// returns ErrTooManyRequests. 0 means DefaultMaxWaiting; at most the
	// constant MaxWaitingPerZone.
	MaxWaitingPerZone int
	// NoProxyHealth turns proxy health off (SPEC §7 R13 round 3): first
	// sends then take every available proxy in turn, as the seed's ordinary
	// balancing, and re-sends ignore health. With health on (the default) a
	// proxy whose latest attempt timed out or could not be sent is suspect:
	// first sends skip it while a healthy proxy is available, and one read
	// per ProbeInterval probes it with a copy (see ClientStats). First sends
	// also skip a stalled proxy: attempts in flight to it and no frame from
	// it for longer than an eighth of the read's first segment x (at least
	// twice tick + poll interval, at least 2 ms), so a proxy that goes dark
	// costs the reads of x/8, not x; it is back at its next frame.
	// Schedules never change.
	NoProxyHealth bool
	// ProbeInterval is the least time between two probes of one suspect
	// proxy; 0 means DefaultProbeInterval, at most MaxWaitTimeout. Each
	// probe is one extra attempt of a read that also went to a healthy
	// proxy (Stats.Probes).
	ProbeInterval time.Duration
	// Hedge turns on the adaptive first re-send of simple reads (SPEC R21,
	// opt-in): see Hedge. The zero value keeps the seed's schedule (R6)
	// exactly.
	Hedge Hedge
	// MaxZones bounds the zones the client serves at once (routes applied,
	// not removed with RemoveZone); beyond it ApplyRoute refuses a new zone
	// with ErrTooManyZones (SPEC R22). 0 means DefaultMaxZones; at most the
	// constant MaxZones.
	MaxZones int
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

// Client is a read-retry client serving many zones (SPEC §1). Its door for
// Go code is Do, which sends a read and blocks until its final result or
// the caller's context ends, with read retry applied inside (SPEC R20); the
// seed's asynchronous pair, Send and RecvResponse, is there for SDKs with an
// event loop of their own. Who drives the engine — runs its poll, which
// re-sends reads and hands out results — is chosen once, by Config.Poller:
// the client itself (PollSelf, the default) or the caller's RecvResponse
// loop (PollHand). Do, Send and ApplyRoute may be called from any number of
// goroutines. A Client must be made with New and ended with Close.
type Client struct {
	tr           Transport
	log          *slog.Logger
	clock        func() time.Time
	epoch        time.Time
	tick         time.Duration
	shards       int
	waitTimeout  time.Duration
	guard        *budget.Config // each zone's storm guard (SPEC R19); nil: off
	maxWaitTotal time.Duration
	maxWaiting   int
	hedge        Hedge // Config.Hedge with defaults filled; Percentile 0: off (SPEC R21)
	probeEvery   int64 // ns between probes of a suspect proxy; 0: proxy health off (SPEC §7 R13 round 3)
	stallFloor   int64 // ns: the least stall threshold (health.go), above a late poll's lag

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

	// The zones by index (lock-free for the poller), and under mu the free
	// indices, oldest first, with each index's last sequence counter
	// (publishZone, RemoveZone; SPEC R22).
	zones    zoneDir
	zoneFree []uint64
	zoneSeq  []uint64
	nzones   int
	maxZones int

	proxies atomic.Pointer[[]proxyInfo] // indexed by ProxyID; copied on write
	reg     proxyRegistry               // which endpoints have which ProxyID (proxies.go)

	// Client-wide counters (SPEC R17): frames that name no zone, frames that
	// do not parse (ClientStats).
	malformed   atomic.Uint64
	unknownZone atomic.Uint64
	// Proxy health (health.go): proxies suspect now, and times a proxy
	// became suspect.
	suspectNow   atomic.Int64
	suspectMarks atomic.Uint64
	malformedRL  rateLimit
	unknownRL    rateLimit

	pollMu sync.Mutex
	poll   poller

	// Who polls (poll.go), fixed by New, and the Do calls waiting (do.go).
	pollerKind   Poller
	onResponse   func(*Response)
	pollInterval time.Duration
	driverMu     sync.Mutex   // guards driver
	driver       *ticker.Loop // a PollSelf client's driver, once started
	driverOn     atomic.Bool  // driver is set
	waiters      waiters
}

// New returns a Client with read retry off (both budgets 0, SPEC R1) and no
// zones. It starts no goroutine: a PollSelf client starts its driver with
// the first Do or Send. Errors wrap ErrInvalidConfig: no Transport, a
// negative duration or count, a value above its documented maximum
// (MaxTick, MaxWaitTimeout, MaxWaitingPerZone), a shard count that is not a
// power of two, a RetryBudget the budget package refuses, an unknown
// Poller, OnResponse with PollHand.
func New(cfg Config) (*Client, error) {
	if cfg.Transport == nil {
		return nil, fmt.Errorf("%w: Config.Transport is nil", ErrInvalidConfig)
	}
	if cfg.Tick < 0 || cfg.WaitTimeout < 0 || cfg.MaxWaitTotal < 0 || cfg.PollInterval < 0 || cfg.MaxWaitingPerZone < 0 || cfg.Shards < 0 || cfg.ProbeInterval < 0 {
		return nil, fmt.Errorf("%w: negative Tick, WaitTimeout, MaxWaitTotal, PollInterval, MaxWaitingPerZone, Shards or ProbeInterval", ErrInvalidConfig)
	}
	if cfg.ProbeInterval > MaxWaitTimeout {
		return nil, fmt.Errorf("%w: ProbeInterval %v above %v", ErrInvalidConfig, cfg.ProbeInterval, MaxWaitTimeout)
	}
	if cfg.MaxZones < 0 || cfg.MaxZones > MaxZones {
		return nil, fmt.Errorf("%w: MaxZones %d outside [0, %d]", ErrInvalidConfig, cfg.MaxZones, MaxZones)
	}
	if cfg.WaitTimeout > MaxWaitTimeout || cfg.MaxWaitTotal > 30*MaxWaitTimeout || cfg.MaxWaitingPerZone > MaxWaitingPerZone {
		return nil, fmt.Errorf("%w: WaitTimeout above %v, MaxWaitTotal above %v or MaxWaitingPerZone above %d",
			ErrInvalidConfig, MaxWaitTimeout, 30*MaxWaitTimeout, MaxWaitingPerZone)
	}
	if cfg.Tick > MaxTick || cfg.PollInterval > MaxTick {
		return nil, fmt.Errorf("%w: Tick %v or PollInterval %v above %v", ErrInvalidConfig, cfg.Tick, cfg.PollInterval, MaxTick)
	}
	if cfg.Shards > ctxtable.MaxShards || cfg.Shards&(cfg.Shards-1) != 0 {
		return nil, fmt.Errorf("%w: Shards %d is not a power of two up to %d", ErrInvalidConfig, cfg.Shards, ctxtable.MaxShards)
	}
	if err := checkPoller(&cfg); err != nil {
		return nil, err
	}
	if err := cfg.Hedge.check(); err != nil {
		return nil, err
	}
	c := &Client{
		tr:          cfg.Transport,
		log:         cfg.Logger,
		clock:       cfg.Clock,
		tick:        cfg.Tick,
		shards:      cfg.Shards,
		waitTimeout: cfg.WaitTimeout,
		maxWaiting:  cfg.MaxWaitingPerZone,
		pollerKind:  cfg.Poller,
		onResponse:  cfg.OnResponse,
		closeMu:     xsync.NewRBMutex(),
		maxZones:    cfg.MaxZones,
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if !cfg.NoRetryBudget {
		bc := cfg.RetryBudget
		if bc.Ratio == 0 {
			bc.Ratio = DefaultRetryRatio
		}
		if _, err := budget.New(bc); err != nil {
			return nil, fmt.Errorf("%w: RetryBudget: %w", ErrInvalidConfig, err)
		}
		c.guard = &bc
	}
	if c.clock == nil {
		c.clock = time.Now
	}
	if c.hedge = cfg.Hedge; c.hedge.Percentile > 0 {
		if c.hedge.Window == 0 {
			c.hedge.Window = DefaultHedgeWindow
		}
		if c.hedge.MinSamples == 0 {
			c.hedge.MinSamples = DefaultHedgeSamples
		}
	}
	if !cfg.NoProxyHealth {
		c.probeEvery = int64(DefaultProbeInterval)
		if cfg.ProbeInterval > 0 {
			c.probeEvery = int64(cfg.ProbeInterval)
		}
	}
	if c.tick == 0 {
		c.tick = timerwheel.DefaultTick
	}
	c.pollInterval = cfg.PollInterval
	if c.pollInterval == 0 {
		c.pollInterval = c.tick
	}
	// Frames are timed by the poller: one late by a tick and a poll
	// interval must not make a busy proxy look stalled (health.go).
	c.stallFloor = max(int64(minStallFloor), 2*int64(c.tick+c.pollInterval))
	if c.waitTimeout == 0 {
		c.waitTimeout = DefaultWaitTimeout
	}
	c.maxWaitTotal = cfg.MaxWaitTotal
	if c.maxWaitTotal == 0 {
		c.maxWaitTotal = DefaultMaxWaitRounds * c.waitTimeout
	}
	c.maxWaitTotal = max(c.maxWaitTotal, c.waitTimeout)
	if c.maxWaiting == 0 {
		c.maxWaiting = DefaultMaxWaiting
	}
	c.epoch = c.clock()
	c.maxContexts.Store(DefaultMaxContexts)
	c.zoneByKey = xsync.NewMapOf[Zone, *zone]()
	if c.maxZones == 0 {
		c.maxZones = DefaultMaxZones
	}
	c.proxies.Store(&[]proxyInfo{{}}) // ProxyID 0 is never used
	c.reg.init()
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
// zone keeps (SPEC R2); n <= 0 means DefaultMaxContexts (500,000), and n is
// at most MaxContextsPerZone. The change applies at once to every zone,
// those added earlier included, raising as well as lowering: the zone's own
// count is the only limit (its context table and timing wheel grow with
// the contexts in flight). At the cap a read is still sent, without a
// context: it will not be retried. Lowering the cap never drops contexts in
// flight; new reads get contexts again once the count falls below it.
// Logs MsgSetMaxContext.
func (c *Client) SetReadRetryMaxContextCountPerZone(n int) {
	if n <= 0 {
		n = DefaultMaxContexts
	}
	n = min(n, MaxContextsPerZone)
	c.maxContexts.Store(int64(n))
	c.log.LogAttrs(context.Background(), slog.LevelInfo, MsgSetMaxContext, slog.Int("max_context_count", n))
}

// Stats returns a snapshot of a zone's counters (SPEC R17), or
// ErrUnknownZone.
func (c *Client) Stats(zone Zone) (Stats, error) {
	z := c.zoneOf(zone)
	if z == nil {
		return Stats{}, unknownZone(zone)
	}
	return z.stats.snapshot(), nil
}

// ClientStats are the Client's counters that belong to no zone (SPEC R17),
// each read with an atomic load, counted since New.
type ClientStats struct {
	// UnknownZoneFrames counts response frames whose sequence number names
	// no zone of this client (a proxy's bug, or a packet meant for another
	// client). Logged as MsgUnknownSeq, rate-limited.
	UnknownZoneFrames uint64
	// MalformedFrames counts response frames that failed to parse, in every
	// zone (each is also counted in its zone's MalformedPackets when its
	// header names one). Logged as MsgMalformedPacket, rate-limited.
	MalformedFrames uint64
	// SuspectProxies is the number of proxies suspect now (SPEC §7 R13
	// round 3): their latest attempt timed out or could not be sent and no
	// frame from them has parsed since. Always 0 with Config.NoProxyHealth.
	SuspectProxies int64
	// SuspectMarks counts the times a healthy proxy became suspect.
	SuspectMarks uint64
}

// ClientStats returns the client-wide counters (SPEC R17); Stats gives a
// zone's.
func (c *Client) ClientStats() ClientStats {
	return ClientStats{UnknownZoneFrames: c.unknownZone.Load(), MalformedFrames: c.malformed.Load(),
		SuspectProxies: c.suspectNow.Load(), SuspectMarks: c.suspectMarks.Load()}
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
		return ctxtable.Stats{}, unknownZone(zone)
	}
	return z.table.Stats(), nil
}

// Close ends the client: it waits for Sends under way to return, then Send,
// Do and ApplyRoute return ErrClosed from then on, RecvResponse returns
// nothing, a PollSelf client's driver stops, every Do under way returns
// ErrClosed at once — whatever the poller and wherever its result was: in
// flight, made but not handed out, or queued (SPEC §7 R22) — and every
// request still tracked is dropped without a final result (their buffers
// return to the zone tables' slabs). Close does not close the Transport,
// which the caller owns. It is safe to call more than once, but not from
// Config.OnResponse.
func (c *Client) Close() error {
	c.closeMu.Lock() // waits for Sends under way: none can insert after the sweep
	c.closed.Store(true)
	c.closeMu.Unlock()
	c.stopDriver()
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	c.poll.release = releaseNone
	var seqs []uint64
	for i := range c.zones.limit() {
		z := c.zones.at(i)
		if z == nil {
			continue
		}
		seqs = seqs[:0]
		z.table.Range(func(seq uint64, r ctxtable.Ref[ctxMeta]) bool {
			seqs = append(seqs, seq)
			return true
		})
		for _, seq := range seqs {
			c.poll.drop(z, seq)
		}
	}
	c.poll.finals.reset()
	c.closeWaiters()
	return nil
}
