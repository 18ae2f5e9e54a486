package retry

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Who polls a Client (SPEC R14, R20). Polling runs the engine — reads the
// transport, fires deadlines, re-sends, makes results — and one poller at a
// time does it, under Client.pollMu. Config.Poller chooses, once, who that
// is; everything in this file follows from that choice alone, so no call's
// behaviour depends on which calls came before it.
//
//   - PollSelf: Do callers poll while their own result is not in (a
//     try-lock: whoever is free polls, so a fast answer costs no wake-up),
//     and a driver goroutine polls every PollInterval between them. The
//     responses of Send go to Config.OnResponse.
//   - PollHand: the caller's RecvResponse loop polls and gets the responses
//     of Send; Do calls wait for that loop and never poll themselves (they
//     would take the loop's responses).
//
// Either way a response made for a Do call is routed to its waiter by
// whoever polls (route), and Close ends every Do under way.

// Poller chooses who drives a Client (Config.Poller; SPEC R14, R20).
type Poller uint8

const (
	// PollSelf (the zero value): the client drives itself, and Do is all a
	// caller needs. Do callers poll while they wait and a driver goroutine,
	// started by the first Do or Send and stopped by Close, polls every
	// Config.PollInterval between them (over a Transport that implements
	// Waiter it wakes as soon as a frame arrives). RecvResponse returns
	// nothing. Send's responses go to Config.OnResponse; a client without
	// one has no reader for them, and its Send returns ErrPoller.
	PollSelf Poller = iota
	// PollHand: the caller drives the client with a RecvResponse loop, the
	// seed's poll model, which gets Send's responses. Do calls are served by
	// that loop: keep it running while Do calls wait.
	PollHand
)

// String returns the constant's name.
func (p Poller) String() string {
	switch p {
	case PollSelf:
		return "PollSelf"
	case PollHand:
		return "PollHand"
	}
	return fmt.Sprintf("Poller(%d)", uint8(p))
}

// checkPoller validates the poller fields of cfg for New.
func checkPoller(cfg *Config) error {
	switch {
	case cfg.Poller > PollHand:
		return fmt.Errorf("%w: unknown Poller %v", ErrInvalidConfig, cfg.Poller)
	case cfg.Poller == PollHand && cfg.OnResponse != nil:
		return fmt.Errorf("%w: OnResponse with PollHand: the RecvResponse loop gets Send's responses", ErrInvalidConfig)
	}
	return nil
}

// selfPolled makes sure a PollSelf client's driver runs (it starts with the
// first Do or Send, so that a client made and never used costs no
// goroutine) and reports whether the client polls itself.
func (c *Client) selfPolled() (bool, error) {
	if c.pollerKind != PollSelf {
		return false, nil
	}
	if c.driverOn.Load() {
		return true, nil
	}
	c.driverMu.Lock()
	defer c.driverMu.Unlock()
	if c.closed.Load() {
		return false, ErrClosed
	}
	if c.driver == nil {
		c.driver = c.startDriver(c.pollInterval)
		c.driverOn.Store(true)
	}
	return true, nil
}

// startDriver starts the polling goroutine of a PollSelf client.
func (c *Client) startDriver(interval time.Duration) *ticker.Loop {
	return ticker.Start(interval, func(now time.Time) {
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
	})
}

// stopDriver stops the driver, if it runs, and waits for its goroutine.
func (c *Client) stopDriver() {
	c.driverMu.Lock()
	d := c.driver
	c.driverMu.Unlock()
	if d != nil {
		d.Stop()
	}
}

// deliverAsync hands a response of Send to Config.OnResponse (PollSelf;
// the poller lock is held).
func (c *Client) deliverAsync(rsp *Response) {
	if c.onResponse != nil {
		c.onResponse(rsp)
	}
}

// RecvResponse drives the engine and returns at most one response (SPEC
// R14) on a client made with Config.Poller = PollHand; on a PollSelf
// client, which drives itself, it returns nil, false. It handles the
// packets the transport has already received, then advances every zone's
// timing wheel to now — re-sending reads whose segment ended, ending those
// out of retries — then handles packets again, until one yields a response
// for the caller. Responses made for Do calls go to those calls on the
// way. It never blocks on the network; ok is false when nothing is ready.
// Call it periodically (the poll interval adds to timer lateness).
//
// Packets come before timers so that an answer that arrived in time is
// not beaten by its deadline just because the poller was late (a stall, a
// GC pause): SPEC R9 gives up only when no good answer came. So that
// timers still fire when the inbox never empties, the wheels are advanced
// at least once every 16,384 packets.
//
// Call it from one goroutine: the returned Response is the client's single
// response value, valid until the next call to RecvResponse or Close — a
// call from another goroutine overwrites it and releases its context.
// Calls are serialised internally, so two pollers do not corrupt the
// engine, but each would race on the other's Response.
func (c *Client) RecvResponse() (rsp *Response, ok bool) {
	if c.pollerKind != PollHand {
		return nil, false
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	return c.poll.next()
}

// helpPoll polls the engine from a PollSelf client's Do caller while no one
// else does, until the caller's waiter is done or nothing is ready, and
// reports whether this poll finished the waiter (then nothing was sent on
// its channel).
func (c *Client) helpPoll(w *waiter) bool {
	if !c.pollMu.TryLock() {
		return false
	}
	defer c.pollMu.Unlock()
	p := &c.poll
	p.self, p.selfDone = w, false
	for w.state.Load() == waitPending {
		rsp, ok := p.next()
		if !ok {
			break
		}
		c.deliverAsync(rsp)
	}
	// A waiter another poller finished before this one took the lock has
	// its wake-up in the channel: the caller must take it (selfDone false).
	done := p.selfDone
	p.self, p.selfDone = nil, false
	return done
}

// route hands a response made for a Do call to its waiter (poller side) and
// releases the request's context once the final result is copied. A waiter
// whose caller has left gets nothing: the response is dropped and counted,
// and the waiter is freed at the end. The count is exact: a caller may
// leave between the copy and the hand-over of the final result, and then
// finishWaiter reports that the result it copied reached no one.
func (p *poller) route() {
	rsp := &p.rsp
	w := p.c.waiters.get(rsp.waiter)
	final := !rsp.haveMore
	copied := w.state.Load() == waitPending
	if copied {
		w.res.add(rsp)
		if final {
			w.res.code, w.res.attempts = rsp.result, rsp.attempts
		}
	} else {
		p.countAbandoned(rsp.seq)
	}
	if !final {
		return
	}
	if p.release == rsp.seq {
		p.drop(p.releaseZone, p.release)
		p.release, p.releaseZone = releaseNone, nil
	}
	if !p.finishWaiter(w) && copied {
		p.countAbandoned(rsp.seq) // the caller left during the copy
	}
}

// countAbandoned counts a response of an abandoned Do call, dropped.
func (p *poller) countAbandoned(seq uint64) {
	if z := p.c.zoneOfSeq(seq); z != nil && z.key == p.rsp.zone { // not a zone that took a removed one's index
		z.stats.abandonedResponses.Add(1)
	}
}

// finishWaiter completes a waiter with its result and reports true, or
// frees it if its caller has left and reports false.
func (p *poller) finishWaiter(w *waiter) bool {
	if w == p.self {
		// Its own caller is polling: it sees the state, no wake-up needed.
		w.state.Store(waitDone)
		p.selfDone = true
		return true
	}
	if w.state.CompareAndSwap(waitPending, waitDone) {
		w.ch <- struct{}{}
		return true
	}
	p.c.releaseWaiter(w)
	return false
}

// closeWaiters ends every Do under way with ErrClosed and frees the waiters
// of abandoned calls, whatever the poller and wherever their requests were
// (in flight, answered but not yet handed out, queued): Close has dropped
// every request, so no poller will finish them (SPEC §7 R22). The poller
// lock is held.
func (c *Client) closeWaiters() {
	for _, w := range c.waiters.all() {
		switch {
		case w.state.CompareAndSwap(waitPending, waitDone):
			w.err = ErrClosed // read by the caller after the wake-up
			w.ch <- struct{}{}
		case w.state.CompareAndSwap(waitAbandoned, waitFree):
			c.releaseWaiter(w)
		}
	}
}
