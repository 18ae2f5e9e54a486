package main

import (
	"context"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/wire"
)

// goroutinesCaller is the read retry a Go developer writes by hand with
// the standard library: each request's goroutine blocks in a select on its
// channel of packets (fed by the demux's reader goroutines) and on a
// time.Timer per attempt. Only the machinery differs from the engine: the
// same k·x schedule (retry.SimpleDeadlines, retry.ComplexWaits), the same
// immediate re-send on a listed error code with the last one held (SPEC
// R8), the same R13 proxy choice, the first complete answer wins (SPEC
// R7). A complex read's attempt is the whole request again, and the
// answer is the first attempt whose stream completes: no partial re-send
// (SPEC R11 is what the engine adds), but every record once, in order.
type goroutinesCaller struct {
	d        *demux
	retries  int
	xSimple  time.Duration // first segment of a simple read
	xComplex time.Duration // first wait of a complex read
	wait     time.Duration // writes: one attempt, then -16659
}

func newGoroutinesClient(e *env) (client, error) {
	d := newDemux(e.labels, e.addrs)
	d.waitUp(2 * time.Second)
	g := &goroutinesCaller{d: d, retries: e.retries, wait: e.opt.WaitTimeout,
		xSimple:  retry.SimpleDeadlines(e.opt.SimpleBudget, e.retries)[0],
		xComplex: retry.ComplexWaits(e.opt.ComplexBudget, e.retries)[0]}
	return newBlocking(g, e.sink), nil
}

func (g *goroutinesCaller) close() { g.d.close() }

func (g *goroutinesCaller) call(ctx context.Context, r *request, ans *sim.Answer) {
	d := g.d
	seq := d.seq.Add(1)
	setSeq(r.frame, seq)
	w := d.register(seq, 8)
	defer d.unregister(seq, w)

	x, segments := g.wait, 1
	if r.read {
		x, segments = g.xSimple, g.retries+1
		if r.complex {
			x = g.xComplex
		}
	}
	var tried [retry.MaxMaxRetries + 1]int
	var streams [retry.MaxMaxRetries + 1]stream
	nTried, attempts, used, answered := 0, 0, 0, 0
	var resend []byte
	// sendNext sends the next attempt to the proxy R13 picks, moving on
	// at once from a proxy whose send fails; it uses up a segment even
	// when no proxy takes it (as the engine counts a retry).
	sendNext := func() {
		used++
		for range d.conns {
			p := d.pick(tried[:nTried])
			if p < 0 {
				return
			}
			if nTried < len(tried) {
				tried[nTried] = p
				nTried++
			} else {
				copy(tried[:], tried[1:])
				tried[len(tried)-1] = p
			}
			frame := r.frame
			if attempts > 0 {
				var err error
				if resend, err = wire.AppendResend(resend[:0], r.frame, uint16(attempts)); err != nil {
					return
				}
				frame = resend
			}
			w.conn.Store(int32(p))
			if d.send(p, frame) == nil {
				attempts++
				return
			}
		}
	}
	finish := func(result int32) {
		r.answerBase(ans, max(attempts, 1))
		ans.Result = result
	}
	sendNext()
	if attempts == 0 {
		finish(retry.ResultNoProxy)
		return
	}
	timer := time.NewTimer(x)
	defer timer.Stop()
	held, haveHeld := int32(0), false
	for {
		select {
		case f := <-w.ch:
			if f == nil {
				continue // a connection broke: the timers re-send, as the engine's do
			}
			rsp, err := wire.ParseResponse(f)
			if err != nil || int(rsp.Attempt()) >= attempts {
				continue
			}
			st := &streams[rsp.Attempt()]
			if !st.add(f, rsp) {
				continue
			}
			if r.read && rsp.Result() == retry.ResultProxySwiftTimeout {
				answered++
				if used < segments { // SPEC R8: re-send now; the next segment starts now
					sendNext()
					timer.Reset(time.Duration(used) * x)
					continue
				}
				held, haveHeld = rsp.Result(), true
				if answered >= attempts {
					finish(held)
					return
				}
				continue
			}
			if !st.done {
				if r.complex {
					timer.Reset(time.Duration(used) * x) // SPEC R10: the wait restarts at each packet
				}
				continue
			}
			finish(st.result)
			st.fill(ans)
			return
		case <-timer.C:
			if used < segments {
				sendNext()
				timer.Reset(time.Duration(used) * x)
				continue
			}
			switch {
			case haveHeld:
				finish(held)
			case r.read:
				finish(retry.ResultReadRetryTimeout)
			default:
				finish(retry.ResultWaitRspTimeout)
			}
			return
		case <-ctx.Done():
			finish(retry.ResultReadRetryTimeout)
			return
		}
	}
}
