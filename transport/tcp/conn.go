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
	"github.com/readretry/readretry/wire"
)

// proxyConn is one proxy's connection state. The reader goroutine
// (readLoop) owns dialing and the receive ring's producer side; the writer
// goroutine (writeLoop) owns the spare write buffer; everything under wmu is
// shared with Send.
type proxyConn struct {
	t     *Transport
	id    retry.ProxyID
	proxy retry.Proxy
	ring  *ring

	up    atomic.Bool // a connection is attached
	full  atomic.Bool // the write buffer reached MaxPending
	ready atomic.Bool // on Recv's list of proxies with frames (see Transport.Recv)
	gone  atomic.Bool // released: Recv drops its frames (Transport.Release)
	// cause is why the proxy is down: the last failed dial or the error that
	// broke its connection (ProxyError). Stored before up goes false, so a
	// sender that finds the proxy down finds the cause too; nil until the
	// first dial ends.
	cause atomic.Pointer[downCause]

	ctx    context.Context // cancelled by shut: ends a dial under way
	cancel context.CancelFunc
	stop   chan struct{} // closed by shut: the reader and the writer return

	wmu     sync.Mutex
	nc      net.Conn // the current connection; nil while down or after shut
	wbuf    []byte   // frames queued by Send, each with its length prefix
	wframes int      // frames in wbuf
	shutOff bool     // Close or Release was called

	kick   chan struct{} // capacity 1: the writer has work
	dialed chan struct{} // closed when the first connection attempt has ended (or the reader has)
}

// dial makes one connection attempt, bounded by DialTimeout and by Close.
func (c *proxyConn) dial() (net.Conn, error) {
	addr, err := c.t.cfg.Resolve(c.proxy)
	if err != nil {
		c.t.stats.dialFails.Add(1)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.t.cfg.DialTimeout)
	defer cancel()
	nc, err := c.t.cfg.Dial(ctx, "tcp", addr)
	if err != nil {
		c.t.stats.dialFails.Add(1)
		return nil, err
	}
	return nc, nil
}

// downCause boxes an error for proxyConn.cause.
type downCause struct{ err error }

// setCause records why the proxy is or is about to be down.
func (c *proxyConn) setCause(err error) { c.cause.Store(&downCause{err: err}) }

// attach makes nc the proxy's connection; false if the transport is closing
// (nc is then closed).
func (c *proxyConn) attach(nc net.Conn) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.shutOff {
		_ = nc.Close()
		return false
	}
	c.nc = nc
	c.full.Store(false)
	c.up.Store(true)
	c.t.stats.connects.Add(1)
	return true
}

// detach drops nc if it is still the proxy's connection: unwritten frames
// are lost (the engine re-sends what it covers) and the proxy becomes
// unavailable.
func (c *proxyConn) detach(nc net.Conn) {
	c.wmu.Lock()
	if c.nc == nc {
		c.nc = nil
		c.up.Store(false)
		c.t.stats.framesLost.Add(uint64(c.wframes))
		c.wbuf, c.wframes = c.wbuf[:0], 0
		c.full.Store(false)
		c.t.stats.disconnects.Add(1)
	}
	c.wmu.Unlock()
	_ = nc.Close()
}

// shut closes the connection for Close or Release, ends a dial under way,
// and tells the reader and the writer to return (c.stop). Once is enough.
func (c *proxyConn) shut() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.shutOff {
		return
	}
	c.shutOff = true
	c.cancel()
	close(c.stop)
	if c.nc != nil {
		_ = c.nc.Close()
	}
}

// stopped reports whether shut was called.
func (c *proxyConn) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// readLoop is the proxy's reader goroutine: it makes the proxy's first
// connection attempt (Open never waits on a dial, SPEC R22), reads frames
// from the current connection into the ring, and on any error reconnects
// with backoff, until Close. The proxy is unavailable until a connection
// is attached.
func (c *proxyConn) readLoop() {
	t := c.t
	defer t.wg.Done()
	first := true
	defer func() {
		if first { // Close before the first attempt ended
			close(c.dialed)
		}
	}()
	retries := 0 // failed attempts and lost connections since the last stable one
	var prev time.Duration
	for {
		if retries > 0 {
			prev = t.cfg.Backoff.Delay(retries, prev)
			if !c.sleep(prev) {
				return
			}
		}
		nc, err := c.dial()
		if err != nil {
			c.setCause(err) // before dialed: WaitDialed's caller finds it
		}
		attached := err == nil && c.attach(nc)
		if first {
			first = false
			close(c.dialed)
		}
		if err != nil {
			if c.stopped() {
				return
			}
			if !t.closed.Load() {
				t.log.LogAttrs(context.Background(), slog.LevelDebug, MsgDialFailed,
					slog.String("proxy", c.proxy.String()), slog.String("error", err.Error()))
			}
			retries++
			continue
		}
		if !attached {
			return // closed meanwhile; attach closed nc
		}
		t.log.LogAttrs(context.Background(), slog.LevelDebug, MsgConnected,
			slog.String("proxy", c.proxy.String()), slog.String("addr", nc.RemoteAddr().String()))
		since := time.Now()
		err = c.readFrames(nc)
		// A bare io.EOF would not say what ended.
		c.setCause(fmt.Errorf("tcp: connection to %s lost: %w", nc.RemoteAddr(), err))
		c.detach(nc)
		if c.stopped() {
			return
		}
		if time.Since(since) >= t.cfg.StableAfter {
			retries, prev = 0, 0
		}
		retries++
		t.log.LogAttrs(context.Background(), slog.LevelInfo, MsgConnectionLost,
			slog.String("proxy", c.proxy.String()), slog.String("error", err.Error()))
	}
}

// sleep waits d or until Close or Release; false means one of them.
func (c *proxyConn) sleep(d time.Duration) bool {
	if d <= 0 {
		return !c.stopped()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-c.stop:
		return false
	}
}

var errStopped = errors.New("tcp: transport closed")

// readFrames copies frames from nc into the ring until an error, a frame
// that takes longer than FrameTimeout to arrive once it has begun included.
func (c *proxyConn) readFrames(nc net.Conn) error {
	t := c.t
	fr := &frameDeadline{nc: nc, timeout: t.cfg.FrameTimeout, reads: &t.stats.reads}
	r := wire.NewReader(fr, t.cfg.MaxFrameSize)
	fr.r = r
	for {
		f, err := r.Next()
		if err != nil {
			return err
		}
		fr.fresh = true
		if !c.deliver(f) {
			return errStopped
		}
	}
}

// frameDeadline is the connection as the wire.Reader reads it: it bounds
// how long a frame may take once its first bytes have arrived. The Reader
// reads from the stream only when it holds less than the frame it is
// decoding, so a Read while the Reader buffers bytes is a Read in the
// middle of a frame: the first such Read of each frame sets a deadline
// FrameTimeout ahead (the frame's first bytes came with the Read before),
// and the first Read between frames clears it. A proxy that trickles a
// frame (one byte per 100 ms keeps a per-Read timeout happy) or stops
// halfway is cut off at the deadline; a connection merely idle between
// frames never is, nor one whose Reads keep ending mid-frame under a
// steady stream, since each frame has a deadline of its own. Frames that
// arrive whole in one Read touch no deadline at all; any other costs one
// SetReadDeadline.
type frameDeadline struct {
	nc      net.Conn
	r       *wire.Reader
	timeout time.Duration
	armed   bool // a deadline is set
	fresh   bool // a frame was delivered since it was set: the next one needs its own
	reads   *atomic.Uint64
}

func (f *frameDeadline) Read(p []byte) (int, error) {
	switch mid := f.r.Buffered() > 0; {
	case mid && (!f.armed || f.fresh):
		if err := f.nc.SetReadDeadline(time.Now().Add(f.timeout)); err != nil {
			return 0, err
		}
		f.armed, f.fresh = true, false
	case !mid && f.armed:
		if err := f.nc.SetReadDeadline(time.Time{}); err != nil {
			return 0, err
		}
		f.armed = false
	}
	f.reads.Add(1)
	return f.nc.Read(p)
}

// deliver copies a received frame into the ring for Recv; false if the
// transport closed or the proxy was released while the ring was full.
// Reader only.
func (c *proxyConn) deliver(f []byte) bool {
	t := c.t
	if !c.ring.push(f, c.stop) {
		return false
	}
	t.ready(c)
	t.stats.framesRecv.Add(1)
	t.stats.bytesRecv.Add(uint64(len(f)))
	t.published()
	return true
}

// send queues frame for the writer.
func (c *proxyConn) send(frame []byte) error {
	t := c.t
	if !c.up.Load() {
		t.stats.sendUnavail.Add(1)
		if t.closed.Load() {
			return ErrClosed
		}
		return retry.ErrUnavailable
	}
	if len(frame) > wire.MaxFrameSize {
		return &wire.SizeError{What: "frame", Size: len(frame), Limit: wire.MaxFrameSize}
	}
	c.wmu.Lock()
	if c.nc == nil {
		c.wmu.Unlock()
		t.stats.sendUnavail.Add(1)
		if t.closed.Load() {
			return ErrClosed
		}
		return retry.ErrUnavailable
	}
	if len(c.wbuf)+wire.StreamPrefixSize+len(frame) > t.cfg.MaxPending && len(c.wbuf) > 0 {
		c.full.Store(true)
		c.wmu.Unlock()
		t.stats.sendFull.Add(1)
		return ErrWriteQueueFull
	}
	wasEmpty := len(c.wbuf) == 0
	c.wbuf, _ = wire.AppendStreamFrame(c.wbuf, frame) // size checked above
	c.wframes++
	c.wmu.Unlock()
	t.stats.framesSent.Add(1)
	t.stats.bytesSent.Add(uint64(wire.StreamPrefixSize + len(frame)))
	if wasEmpty {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// writeLoop is the proxy's writer goroutine: each time Send queues frames
// into an empty buffer it takes the whole buffer, leaving its spare in its
// place, and writes it with one system call.
func (c *proxyConn) writeLoop() {
	t := c.t
	defer t.wg.Done()
	var spare []byte
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		for {
			c.wmu.Lock()
			nc := c.nc
			if len(c.wbuf) == 0 || nc == nil {
				c.wmu.Unlock()
				break
			}
			out, frames := c.wbuf, c.wframes
			c.wbuf, c.wframes = spare[:0], 0
			c.wmu.Unlock()

			_ = nc.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
			_, err := nc.Write(out)
			t.stats.writes.Add(1)
			spare = out[:0]
			if err == nil {
				// The proxy accepts bytes again: let the engine choose it.
				c.full.Store(false)
			} else {
				// The reader sees the closed connection and reconnects;
				// anything queued meanwhile is dropped by detach.
				t.stats.framesLost.Add(uint64(frames))
				c.setCause(err)
				c.detach(nc)
				break
			}
		}
	}
}
