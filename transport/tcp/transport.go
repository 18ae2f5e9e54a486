package tcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/wire"
)

// Defaults of Config.
const (
	// DefaultDialTimeout bounds one connection attempt.
	DefaultDialTimeout = time.Second
	// DefaultRecvBuffer is the size in bytes of each proxy's receive ring.
	DefaultRecvBuffer = 256 << 10
	// DefaultMaxPending is how many bytes may wait in one proxy's write
	// buffer before Send fails with ErrWriteQueueFull.
	DefaultMaxPending = 4 << 20
	// DefaultWriteTimeout bounds one write system call; a proxy that takes
	// longer to accept bytes is treated as broken and reconnected.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultStableAfter is how long a connection must stay up for the
	// reconnect backoff to start again from its first delay.
	DefaultStableAfter = time.Second
	// DefaultFrameTimeout bounds how long one frame may take to arrive
	// once its first bytes have.
	DefaultFrameTimeout = 5 * time.Second
)

// The transport's log messages (slog, through Config.Logger): stable strings
// that operators can grep, with the proxy and the error as attributes.
const (
	// MsgDialFailed is logged at debug level for each failed (re)connect;
	// attributes: proxy, error.
	MsgDialFailed = "tcp: dial failed"
	// MsgConnected is logged at debug level when a connection is up;
	// attributes: proxy, addr.
	MsgConnected = "tcp: connected"
	// MsgConnectionLost is logged at info level when a connection drops and
	// the transport starts to redial; attributes: proxy, error.
	MsgConnectionLost = "tcp: connection lost"
)

// DefaultBackoff is the reconnect backoff when Config.Backoff is nil:
// decorrelated jitter from 10 ms, capped at 1 s, so that clients that lost
// a proxy together do not redial it together.
var DefaultBackoff backoff.Strategy = backoff.Decorrelated{Base: 10 * time.Millisecond, Max: time.Second}

// Errors returned by the Transport. The ones a Send can return wrap
// retry.ErrUnavailable, so that the engine treats them all as "try another
// proxy".
var (
	// ErrClosed: the Transport was closed.
	ErrClosed = fmt.Errorf("tcp: transport closed: %w", retry.ErrUnavailable)
	// ErrUnknownProxy: Send or Available for a ProxyID that Open never saw.
	ErrUnknownProxy = fmt.Errorf("tcp: unknown proxy: %w", retry.ErrUnavailable)
	// ErrWriteQueueFull: the proxy's write buffer holds Config.MaxPending
	// bytes (the proxy or the network is not keeping up).
	ErrWriteQueueFull = fmt.Errorf("tcp: write queue full: %w", retry.ErrUnavailable)
	// ErrProxyConflict: Open was called again for a ProxyID with another
	// endpoint.
	ErrProxyConflict = errors.New("tcp: proxy id already opened for another endpoint")
	// ErrInvalidConfig wraps what is wrong with a Config.
	ErrInvalidConfig = errors.New("tcp: invalid config")
)

// Config sets up a Transport. The zero Config is usable: it dials p.String()
// for each retry.Proxy with the defaults above.
type Config struct {
	// Resolve maps a logical proxy (its Host groups proxies for SPEC R13)
	// to the address to dial, "host:port". nil means p.String(). A
	// simulator maps labels such as {Host: "host-1", Port: 7} to
	// 127.0.0.1 and an ephemeral port this way. It is called once per
	// connection attempt, so it may follow address changes.
	Resolve func(p retry.Proxy) (addr string, err error)
	// Dial opens a connection; nil means a net.Dialer with DialTimeout.
	// The context is cancelled by Close and bounded by DialTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds one connection attempt; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// Backoff gives the wait before each reconnection attempt after a
	// connection broke or a dial failed (retry number from 1); nil means
	// DefaultBackoff. The count restarts once a connection has stayed up
	// for StableAfter.
	Backoff backoff.Strategy
	// StableAfter: 0 means DefaultStableAfter.
	StableAfter time.Duration
	// RecvBuffer is each proxy's receive ring in bytes (rounded up to a
	// power of two, at least 4 KiB); 0 means DefaultRecvBuffer. Frames
	// larger than half of it take a slower path with one heap copy.
	RecvBuffer int
	// MaxPending is each proxy's write buffer limit in bytes; 0 means
	// DefaultMaxPending.
	MaxPending int
	// MaxFrameSize is the largest frame accepted from a proxy in bytes; a
	// larger length prefix breaks the connection. 0 means wire.MaxFrameSize.
	MaxFrameSize int
	// WriteTimeout bounds one write; 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// FrameTimeout bounds how long a frame from a proxy may take to arrive
	// once its first bytes have (SPEC R22): a proxy that stalls or
	// trickles mid-frame for longer is dropped, unavailable, and redialled
	// with backoff. A connection idle between frames is never dropped for
	// it. 0 means DefaultFrameTimeout.
	FrameTimeout time.Duration
	// Logger receives connection events (connected, lost, dial failed) at
	// debug and info level; nil means slog.Default().
	Logger *slog.Logger
}

// Stats are a Transport's counters since New, each read atomically.
type Stats struct {
	FramesSent, BytesSent uint64 // queued by Send (bytes include the 4-byte prefixes)
	// Writes counts the writer goroutines' write system calls;
	// FramesSent/Writes is the frames per write call, 1 unbatched
	// (SPEC N6).
	Writes                uint64
	FramesRecv, BytesRecv uint64 // frames handed to the receive rings, and their bytes
	// Reads counts Read calls the readers made on their connections: one
	// read system call each when bytes are waiting, two when the reader
	// parked in the poller first (Go retries the read once woken).
	// FramesRecv/Reads is the frames per read call, 1 unbatched (SPEC N6).
	Reads           uint64
	Connects        uint64 // connections established
	Disconnects     uint64 // connections lost or closed
	DialFailures    uint64 // connection attempts that failed
	SendUnavailable uint64 // Send calls refused: proxy down, unknown, or transport closed
	SendQueueFull   uint64 // Send calls refused with ErrWriteQueueFull
	FramesLost      uint64 // frames queued but unwritten when their connection broke
	RingWaits       uint64 // times a reader waited for room in its receive ring
	Released        uint64 // proxies released (Release)
	FramesDropped   uint64 // frames of released proxies dropped before Recv returned them
	Proxies         int    // proxies open now: opened and not released
	Conns           int    // connections up now
}

type counters struct {
	framesSent, bytesSent, writes      atomic.Uint64
	framesRecv, bytesRecv, reads       atomic.Uint64
	connects, disconnects, dialFails   atomic.Uint64
	sendUnavail, sendFull, framesLost  atomic.Uint64
	released, framesDropped, ringWaits atomic.Uint64 // ringWaits: of released proxies
}

// Transport is a retry.Transport over TCP. Make it with New and end it with
// Close. Open, Send and Available may be called from any goroutine; Recv and
// Wait from one goroutine at a time (the engine's poller).
type Transport struct {
	cfg     Config
	log     *slog.Logger
	ctx     context.Context // cancelled by Close: ends dials
	cancel  context.CancelFunc
	stop    chan struct{} // closed by Close
	wg      sync.WaitGroup
	closed  atomic.Bool
	mu      sync.Mutex                   // guards Open and Close
	conns   atomic.Pointer[[]*proxyConn] // indexed by ProxyID; nil entries for unknown ids
	pending atomic.Int64                 // frames published in the rings and not yet taken by Recv
	stats   counters

	// Proxies whose ring went from empty to holding a frame since Recv last
	// looked: readers append under readyMu, Recv takes the whole list.
	readyMu   sync.Mutex
	readyList []*proxyConn
	readyN    atomic.Int32 // len(readyList), for Recv to skip the lock

	// The consumer's state, touched only inside Recv and Wait.
	active   []*proxyConn // proxies with frames (or just drained), served round robin
	pos      int          // next index of active to serve
	spare    []*proxyConn // the list readers append to next
	held     *ring        // the ring whose frame the last Recv returned
	heldSize uint64       // and the bytes of its entry
	sleeping atomic.Bool
	wake     chan struct{}
	timer    *time.Timer
}

// New returns a Transport with no proxies; the engine opens them as routes
// name them. Errors wrap ErrInvalidConfig for negative sizes or durations.
func New(cfg Config) (*Transport, error) {
	if cfg.DialTimeout < 0 || cfg.RecvBuffer < 0 || cfg.MaxPending < 0 || cfg.MaxFrameSize < 0 ||
		cfg.WriteTimeout < 0 || cfg.StableAfter < 0 || cfg.FrameTimeout < 0 {
		return nil, fmt.Errorf("%w: negative duration or size", ErrInvalidConfig)
	}
	if cfg.RecvBuffer > 1<<30 {
		return nil, fmt.Errorf("%w: RecvBuffer above 1 GiB", ErrInvalidConfig)
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(p retry.Proxy) (string, error) { return p.String(), nil }
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Dial == nil {
		d := &net.Dialer{}
		cfg.Dial = d.DialContext
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.StableAfter == 0 {
		cfg.StableAfter = DefaultStableAfter
	}
	if cfg.RecvBuffer == 0 {
		cfg.RecvBuffer = DefaultRecvBuffer
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxFrameSize == 0 || cfg.MaxFrameSize > wire.MaxFrameSize {
		cfg.MaxFrameSize = wire.MaxFrameSize
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.FrameTimeout == 0 {
		cfg.FrameTimeout = DefaultFrameTimeout
	}
	t := &Transport{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	if t.log == nil {
		t.log = slog.Default()
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.timer = time.NewTimer(time.Hour)
	t.timer.Stop()
	t.conns.Store(&[]*proxyConn{})
	return t, nil
}

func (t *Transport) conn(id retry.ProxyID) *proxyConn {
	cs := *t.conns.Load()
	if int(id) < len(cs) {
		return cs[id]
	}
	return nil
}

// Open registers a proxy (retry.Transport) and returns without waiting on
// the network (SPEC R22: a route update never waits on a dial): the
// proxy's own reader goroutine makes the first connection attempt at once
// and retries failed ones with backoff, logging each failure
// (MsgDialFailed). The proxy is unavailable until a connection succeeds;
// WaitDialed waits for the first attempts when a caller wants that.
// Opening an id again with the same endpoint does nothing; with another
// endpoint it returns ErrProxyConflict. After Close it returns ErrClosed.
func (t *Transport) Open(id retry.ProxyID, p retry.Proxy) error {
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return ErrClosed
	}
	if c := t.conn(id); c != nil {
		t.mu.Unlock()
		if c.proxy != p {
			return ErrProxyConflict
		}
		return nil
	}
	c := t.newConn(id, p)
	old := *t.conns.Load()
	cs := make([]*proxyConn, max(len(old), int(id)+1))
	copy(cs, old)
	cs[id] = c
	t.conns.Store(&cs)
	t.wg.Add(2) // under t.mu: a Close from now on shuts c and waits for its loops
	go c.readLoop()
	go c.writeLoop()
	t.mu.Unlock()
	return nil
}

// newConn makes a proxy's state; its goroutines are not started.
func (t *Transport) newConn(id retry.ProxyID, p retry.Proxy) *proxyConn {
	c := &proxyConn{t: t, id: id, proxy: p, ring: newRing(t.cfg.RecvBuffer), kick: make(chan struct{}, 1),
		dialed: make(chan struct{}), stop: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(t.ctx)
	return c
}

// Release forgets a proxy (retry.Transport; SPEC R22): its connection is
// closed, a dial under way is cancelled, its reader and writer goroutines
// return (without Release waiting for them; Close does), and its receive
// ring and write buffer go with them. Frames it received that Recv has not
// returned are dropped (Stats.FramesDropped), so a proxy opened later under
// the same id never passes for this one. Send and Available then treat id
// as unknown until it is opened again. Releasing an unknown id does nothing.
func (t *Transport) Release(id retry.ProxyID) {
	t.mu.Lock()
	c := t.conn(id)
	if c == nil {
		t.mu.Unlock()
		return
	}
	old := *t.conns.Load()
	cs := make([]*proxyConn, len(old))
	copy(cs, old)
	cs[id] = nil
	t.conns.Store(&cs)
	t.mu.Unlock()
	c.gone.Store(true)
	c.shut()
	t.stats.released.Add(1)
	t.stats.ringWaits.Add(c.ring.waits.Load())
	// Frames it left in its ring are drained by Recv (the ring's consumer):
	// list the proxy so that Recv visits it even if its ring was idle.
	if !c.ring.empty() {
		t.ready(c)
	}
}

// WaitDialed blocks until the first connection attempt of every proxy
// opened so far has ended, connected or failed, or the Transport is
// closed; it returns ctx.Err() if ctx ends first. It is for a caller that
// wants a route it just applied to find its proxies connected (a
// simulator, a test, an SDK at start-up); the engine never calls it. A
// proxy whose first attempt failed is still unavailable when it returns.
func (t *Transport) WaitDialed(ctx context.Context) error {
	for _, c := range *t.conns.Load() {
		if c == nil {
			continue
		}
		select {
		case <-c.dialed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Send queues one frame for the proxy (retry.Transport) and returns without
// waiting for the network; frame is copied. Errors, all wrapping
// retry.ErrUnavailable but the last: ErrUnknownProxy, ErrClosed, a down
// connection (retry.ErrUnavailable itself), ErrWriteQueueFull; and
// wire.ErrTooLarge for a frame over wire.MaxFrameSize.
func (t *Transport) Send(id retry.ProxyID, frame []byte) error {
	c := t.conn(id)
	if c == nil {
		t.stats.sendUnavail.Add(1)
		return ErrUnknownProxy
	}
	return c.send(frame)
}

// Available reports whether the proxy has a connection with room in its
// write buffer (retry.Transport): what Send needs to succeed.
func (t *Transport) Available(id retry.ProxyID) bool {
	c := t.conn(id)
	return c != nil && c.up.Load() && !c.full.Load()
}

// ErrConnecting is ProxyError's answer for a proxy whose first connection
// attempt has not ended yet (Open never waits on a dial, SPEC R22): a
// request sent right after the route that names it finds it down. It wraps
// retry.ErrUnavailable. WaitDialed waits for those first attempts.
var ErrConnecting = fmt.Errorf("tcp: first connection attempt under way: %w", retry.ErrUnavailable)

// ProxyError says why the proxy cannot take a frame now (retry.ProxyErrorer;
// SPEC R13, issue 29), nil if it can: ErrUnknownProxy, ErrClosed,
// ErrWriteQueueFull, ErrConnecting before its first connection attempt
// ended, and otherwise the error of its last failed connection attempt or
// the one that broke its connection, as Config.Resolve, Config.Dial or the
// connection returned it (a refused dial is a *net.OpError whose text
// names the address: "dial tcp 127.0.0.1:1: connect: connection
// refused"). The engine calls it only when no proxy of a zone took a
// request, to say why in the error Send returns; any goroutine may call
// it, and it does not block.
func (t *Transport) ProxyError(id retry.ProxyID) error {
	if t.closed.Load() {
		return ErrClosed
	}
	c := t.conn(id)
	switch {
	case c == nil:
		return ErrUnknownProxy
	case c.up.Load():
		if c.full.Load() {
			return ErrWriteQueueFull
		}
		return nil
	}
	if dc := c.cause.Load(); dc != nil && dc.err != nil {
		return dc.err
	}
	return ErrConnecting
}

// Recv returns the oldest frame of the next proxy with one waiting, in
// round-robin order over proxies, or ok == false at once if none is waiting
// (retry.Transport). The frame is a view into that proxy's receive ring,
// valid and unchanged until the next Recv, which frees its space. One
// goroutine at a time.
//
// Its cost does not depend on the number of proxies (BenchmarkRecv): Recv
// serves a list of the proxies that have frames, which each reader joins
// when its ring goes from empty to holding a frame and which Recv leaves
// when it finds a proxy's ring empty, instead of scanning every ring.
func (t *Transport) Recv() (frame []byte, from retry.ProxyID, ok bool) {
	if t.held != nil {
		t.held.release(t.heldSize)
		t.held = nil
	}
	if t.pending.Load() == 0 || t.closed.Load() {
		return nil, 0, false
	}
	for {
		if t.pos >= len(t.active) {
			t.pos = 0
			if t.readyN.Load() > 0 {
				t.takeReady()
			}
			if len(t.active) == 0 {
				return nil, 0, false // only pad entries were waiting
			}
		}
		c := t.active[t.pos]
		var f []byte
		var size uint64
		ok := false
		if c.gone.Load() {
			t.drain(c) // released: none of its frames is returned (the fence)
		} else {
			f, size, ok = c.ring.next()
		}
		if ok {
			t.pending.Add(-1)
			t.held, t.heldSize = c.ring, size
			t.pos++
			return f, c.id, true
		}
		// The ring is empty: the proxy leaves the list, and its reader
		// puts it back with its next frame. A frame pushed before the flag
		// went down did not list it, so look again after lowering it.
		c.ready.Store(false)
		if !c.ring.empty() && c.ready.CompareAndSwap(false, true) {
			t.pos++
			continue
		}
		last := len(t.active) - 1
		t.active[t.pos] = t.active[last]
		t.active[last] = nil
		t.active = t.active[:last]
	}
}

// drain drops every frame waiting in a released proxy's ring. Consumer
// only; the reader may still push a last frame, which lists the proxy again.
func (t *Transport) drain(c *proxyConn) {
	for {
		_, size, ok := c.ring.next()
		if !ok {
			return
		}
		c.ring.release(size)
		t.pending.Add(-1)
		t.stats.framesDropped.Add(1)
	}
}

// takeReady moves the proxies readers listed since the last call to the
// end of the active list.
func (t *Transport) takeReady() {
	t.readyMu.Lock()
	list := t.readyList
	t.readyList = t.spare[:0]
	t.readyN.Store(0)
	t.readyMu.Unlock()
	t.active = append(t.active, list...)
	clear(list)
	t.spare = list[:0]
}

// ready lists c for Recv if its ring just got its first frame since Recv
// last found it empty. Reader only, after the push.
func (t *Transport) ready(c *proxyConn) {
	if c.ready.Load() || !c.ready.CompareAndSwap(false, true) {
		return
	}
	t.readyMu.Lock()
	t.readyList = append(t.readyList, c)
	t.readyN.Store(int32(len(t.readyList)))
	t.readyMu.Unlock()
}

// Wait blocks until a frame is waiting for Recv, timeout has passed, or the
// Transport is closed, and reports whether a frame is waiting. A poller
// uses it between RecvResponse calls, with the time to the engine's next
// deadline as timeout, so that it neither spins nor adds a poll interval to
// every answer's latency. Call it from the goroutine that calls Recv.
func (t *Transport) Wait(timeout time.Duration) bool {
	if t.pending.Load() > 0 {
		return true
	}
	if timeout <= 0 || t.closed.Load() {
		return false
	}
	select { // a wake-up left by a reader after an earlier Wait timed out
	case <-t.wake:
	default:
	}
	t.sleeping.Store(true)
	if t.pending.Load() > 0 {
		t.sleeping.Store(false)
		return true
	}
	t.timer.Reset(timeout)
	select {
	case <-t.wake:
	case <-t.timer.C:
	case <-t.stop:
	}
	t.timer.Stop()
	t.sleeping.Store(false)
	return t.pending.Load() > 0
}

// published is called by a reader after it pushed a frame.
func (t *Transport) published() {
	t.pending.Add(1)
	if t.sleeping.Load() && t.sleeping.CompareAndSwap(true, false) {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	out := Stats{
		FramesSent: s.framesSent.Load(), BytesSent: s.bytesSent.Load(), Writes: s.writes.Load(),
		FramesRecv: s.framesRecv.Load(), BytesRecv: s.bytesRecv.Load(), Reads: s.reads.Load(),
		Connects: s.connects.Load(), Disconnects: s.disconnects.Load(), DialFailures: s.dialFails.Load(),
		SendUnavailable: s.sendUnavail.Load(), SendQueueFull: s.sendFull.Load(),
		FramesLost: s.framesLost.Load(), Released: s.released.Load(), FramesDropped: s.framesDropped.Load(),
	}
	out.RingWaits = s.ringWaits.Load()
	for _, c := range *t.conns.Load() {
		if c != nil {
			out.RingWaits += c.ring.waits.Load()
			out.Proxies++
			if c.up.Load() {
				out.Conns++
			}
		}
	}
	return out
}

// Close closes every connection and stops every goroutine the Transport
// started, waiting for them to return. Frames still queued are dropped.
// Send and Open return ErrClosed afterwards, Recv returns nothing. It is
// safe to call more than once.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed.Swap(true) {
		t.mu.Unlock()
		return nil
	}
	close(t.stop)
	t.cancel()
	for _, c := range *t.conns.Load() {
		if c != nil {
			c.shut()
		}
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}
