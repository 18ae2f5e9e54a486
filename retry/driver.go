package retry

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Who polls a Client (Client.pollMode; SPEC R14, R20). A client has one
// poller, so that every response reaches exactly one reader: the caller's
// own RecvResponse loop, or a Driver. Do calls never get their responses
// through either: the poller hands them to the waiting Do call.
const (
	pollNone   uint32 = iota // nobody has polled yet
	pollHand                 // the caller's RecvResponse loop (fixed by its first call)
	pollDo                   // the Driver Do started: it has no callback for Send's responses
	pollDriver               // a Driver from StartDriver
)

// Driver polls a Client on a goroutine of its own, for callers who would
// rather be called back than poll (SPEC R14 allows it; the poll model stays
// the engine's). Each interval it runs the engine until nothing is ready,
// handing every response of the asynchronous API to its callback; between
// ticks, over a Transport that implements Waiter (transport/tcp does), it
// sleeps in Wait and polls again as soon as a frame arrives, so an answer
// does not wait for the next tick.
type Driver struct {
	c    *Client
	loop *ticker.Loop
}

// StartDriver starts a Driver that polls c every interval (at least 100 µs)
// and calls deliver with each response of the asynchronous API (Send). The
// Response is valid only during the call: deliver must copy what it keeps.
// deliver runs with the client's poller lock held, one call at a time, on
// the Driver's goroutine or on a goroutine inside Do (Do callers poll too).
// Timer lateness is then at most one wheel tick plus interval.
//
// The Driver becomes the client's only poller: RecvResponse returns
// nothing while it runs. If Do started its own Driver, this one takes over.
// Errors: ErrInvalidConfig for a non-positive interval or a nil deliver;
// ErrPoller if the client is polled by hand (RecvResponse was called) or a
// Driver from StartDriver runs; ErrClosed.
func (c *Client) StartDriver(interval time.Duration, deliver func(*Response)) (*Driver, error) {
	if interval <= 0 || deliver == nil {
		return nil, fmt.Errorf("%w: driver needs a positive interval and a callback", ErrInvalidConfig)
	}
	c.driverMu.Lock()
	defer c.driverMu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	switch c.pollMode.Load() {
	case pollHand, pollDriver:
		return nil, ErrPoller
	case pollDo:
		c.doDriver.loop.Stop()
		c.doDriver = nil
	}
	c.deliver.Store(&deliver)
	c.pollMode.Store(pollDriver)
	c.userDriver = c.startDriver(max(interval, 100*time.Microsecond))
	return c.userDriver, nil
}

// startDriver starts the polling goroutine.
func (c *Client) startDriver(interval time.Duration) *Driver {
	return &Driver{c: c, loop: ticker.Start(interval, func(now time.Time) {
		end := now.Add(interval)
		for {
			c.pollMu.Lock()
			for {
				rsp, ok := c.poll.next()
				if !ok {
					break
				}
				c.deliverAsync(rsp)
			}
			c.pollMu.Unlock()
			w, ok := c.tr.(Waiter)
			if !ok {
				return
			}
			left := time.Until(end)
			if left <= 0 || !w.Wait(left) {
				return
			}
		}
	})}
}

// deliverAsync hands a response of the asynchronous API to the Driver's
// callback; with none (the Driver Do started) it is counted and dropped.
// The poller lock is held.
func (c *Client) deliverAsync(rsp *Response) {
	if d := c.deliver.Load(); d != nil {
		(*d)(rsp)
		return
	}
	c.unreceived.Add(1)
}

// Stop stops the Driver and waits for its goroutine to return; a deliver
// call under way finishes first. It is safe to call more than once. The
// client is then unpolled: if Do calls are in flight (or come later), Do
// starts its own Driver for them.
func (d *Driver) Stop() {
	d.loop.Stop()
	c := d.c
	c.driverMu.Lock()
	defer c.driverMu.Unlock()
	if c.pollMode.Load() == pollDriver && c.userDriverStopped(d) {
		c.deliver.Store(nil)
		c.pollMode.Store(pollNone)
		if c.waiters.active() > 0 && !c.closed.Load() {
			c.doDriver = c.startDriver(c.pollInterval)
			c.pollMode.Store(pollDo)
		}
	}
}

// userDriverStopped reports whether d is the Driver StartDriver last
// started (a Driver replaced or stopped before changes nothing); c.driverMu
// is held.
func (c *Client) userDriverStopped(d *Driver) bool {
	if c.userDriver != d {
		return false
	}
	c.userDriver = nil
	return true
}

// handPolled reports whether the caller's RecvResponse may poll: the client
// is polled by hand, or nobody polled it yet (then it is from now on).
func (c *Client) handPolled() bool {
	for {
		switch m := c.pollMode.Load(); m {
		case pollHand:
			return true
		case pollNone:
			if c.pollMode.CompareAndSwap(pollNone, pollHand) {
				return true
			}
		default:
			return false
		}
	}
}

// ensurePoller makes sure someone polls the client for a Do call, starting
// the Driver of Do if nobody does, and reports whether the Do caller may
// poll too (not when the client is polled by hand: the caller's loop must
// get every response of the asynchronous API). A client that has used Send
// has a poller of the caller's — a RecvResponse loop, or a Driver it
// starts — whose responses a Driver of Do's would take: Do waits for that
// poller instead.
func (c *Client) ensurePoller() (selfPoll bool, err error) {
	switch c.pollMode.Load() {
	case pollHand:
		return false, nil
	case pollDo, pollDriver:
		return true, nil
	}
	if c.asyncUsed.Load() {
		return false, nil
	}
	c.driverMu.Lock()
	defer c.driverMu.Unlock()
	if c.closed.Load() {
		return false, ErrClosed
	}
	if c.pollMode.CompareAndSwap(pollNone, pollDo) {
		c.doDriver = c.startDriver(c.pollInterval)
	}
	return c.pollMode.Load() != pollHand, nil
}
