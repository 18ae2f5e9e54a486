package retry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/readretry/readretry/wire"
)

// The Go front door (SPEC R20): Do sends a request and blocks until its
// final result or until the caller's context ends, over the same poll
// engine as Send and RecvResponse.
//
// A Do call registers a waiter, sends the request with the waiter's number
// in its context, and then — on a PollSelf client — polls the engine itself
// if nobody else is doing so at that moment (a try-lock on the poller), so
// that with a fast transport the answer is often found by the caller's own
// poll; otherwise it sleeps on the waiter's channel until the poller — the
// client's driver, another Do caller's poll, or a PollHand client's
// RecvResponse loop — hands it the final result (poll.go). The poller copies
// each packet's delivered records into the waiter's own Result; at the end
// the caller swaps that Result's buffers with the one it passed in, so
// buffers circulate between calls and nothing is allocated per call at
// steady state.

// Result receives a request's answer from Client.Do: the final result code
// and the records of every packet in order (SPEC R11: for a complex read
// with read retry, each record exactly once), copied into the Result's own
// buffer. A Result is reusable: pass the same one to many Do calls (one at
// a time) and its buffers are reused. The zero Result is ready to use. It
// is not safe for concurrent use.
type Result struct {
	code     int32
	attempts int
	packets  int
	failed   int         // records whose own result is not ResultOK
	buf      []byte      // every record's key and value bytes, back to back
	recs     []recordPos // one per record, in delivery order
}

// recordPos locates one record of a Result in its buffer.
type recordPos struct {
	tag        uint64
	result     int32
	koff, klen uint32
	voff, vlen uint32
}

// Code returns the final result code: ResultOK, the proxy's code, or one the
// engine made (ResultReadRetryTimeout, ResultWaitRspTimeout).
func (r *Result) Code() int32 { return r.code }

// Attempts returns how many packets the request sent: 1 plus the re-sends.
func (r *Result) Attempts() int { return r.attempts }

// Packets returns how many response packets delivered records or the final
// result.
func (r *Result) Packets() int { return r.packets }

// Len returns the number of records.
func (r *Result) Len() int { return len(r.recs) }

// Failed returns how many of the records carry a non-zero result of their
// own (SPEC §7 R8b/R17/R20): for a batch or index read with read retry,
// records with a listed error code that no attempt answered well, which
// the engine delivers as they are (also counted in Stats.RecordsFailed),
// and any other per-record code the proxy gave (not found, say). Do
// returns nil for such a request, since its packets arrived: check Failed
// when partial failure matters. It costs nothing: add counts as it copies.
func (r *Result) Failed() int { return r.failed }

// Record returns record i (0 ≤ i < Len) in delivery order: batch reads tag
// each record with its key's index in the request, index reads with its
// stream position. Key and Value are views into the Result's buffer, valid
// until the Result is reset or passed to another Do; copy what must outlive
// that. It panics if i is out of range, like a slice index.
func (r *Result) Record(i int) wire.Record {
	p := r.recs[i]
	return wire.Record{Tag: p.tag, Result: p.result,
		Key: r.buf[p.koff : p.koff+p.klen : p.koff+p.klen], Value: r.buf[p.voff : p.voff+p.vlen : p.voff+p.vlen]}
}

// Reset empties the Result, keeping its buffers for reuse.
func (r *Result) Reset() {
	r.code, r.attempts, r.packets, r.failed = 0, 0, 0, 0
	r.buf, r.recs = r.buf[:0], r.recs[:0]
}

// add appends the records rsp delivers.
func (r *Result) add(rsp *Response) {
	r.packets++
	s := rsp.Scan()
	for s.Next() {
		key, val := s.Key(), s.Value()
		p := recordPos{tag: s.Tag(), result: s.Result(), koff: uint32(len(r.buf)), klen: uint32(len(key))}
		if p.result != ResultOK {
			r.failed++
		}
		r.buf = append(r.buf, key...)
		p.voff, p.vlen = uint32(len(r.buf)), uint32(len(val))
		r.buf = append(r.buf, val...)
		r.recs = append(r.recs, p)
	}
}

// trim drops buffers grown past maxRetainedBuf by an outsized answer, so
// that pooled waiters keep no such buffer (SPEC R15).
func (r *Result) trim() {
	if cap(r.buf) > maxRetainedBuf {
		r.buf = nil
	}
	if cap(r.recs)*int(unsafe.Sizeof(recordPos{})) > maxRetainedBuf {
		r.recs = nil
	}
}

// Waiter states. A waiter is pending until the poller finishes it (done)
// or its caller leaves on its context (abandoned); exactly one of the two
// transitions wins, with a compare-and-swap.
const (
	waitPending uint32 = iota
	waitDone
	waitAbandoned
	waitFree // in the registry, unused
)

// waiter is one Do call's rendezvous with the poller.
type waiter struct {
	state atomic.Uint32
	ch    chan struct{} // receives one value when the poller finishes the waiter
	res   Result        // written by the poller until done
	err   error         // set instead of res when Close dropped the request
	id    uint32
}

// waiters holds the waiters of Do calls, numbered so that a context (which
// holds no pointers) names its waiter by a uint32; 0 means "no waiter". A
// freed waiter stays in its slot with its channel and its Result's buffers
// for the next Do call (no allocation per call), until every waiter is free
// and the registry is large: then it is dropped whole (SPEC R15).
type waiters struct {
	mu    sync.Mutex
	slots []*waiter // slots[id-1]; a free slot keeps its emptied waiter
	free  []uint32  // free ids, most recently freed last
}

// take returns a free waiter, pending, with its number.
func (ws *waiters) take() *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var w *waiter
	if n := len(ws.free); n > 0 {
		w = ws.slots[ws.free[n-1]-1]
		ws.free = ws.free[:n-1]
	} else {
		w = &waiter{ch: make(chan struct{}, 1), id: uint32(len(ws.slots) + 1)}
		ws.slots = append(ws.slots, w)
	}
	w.state.Store(waitPending)
	return w
}

// all returns every waiter of the registry, free ones included (Close).
func (ws *waiters) all() []*waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]*waiter(nil), ws.slots...)
}

func (ws *waiters) get(id uint32) *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.slots[id-1]
}

// put frees a waiter (emptied by the caller); when every waiter is free
// and there are many, the registry starts over empty (SPEC R15: memory
// follows load).
func (ws *waiters) put(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.state.Store(waitFree)
	ws.free = append(ws.free, w.id)
	if len(ws.free) == len(ws.slots) && len(ws.slots) > 1024 {
		ws.slots, ws.free = nil, nil
	}
}

// Do sends req to a proxy of the zone and blocks until the request's final
// result (SPEC R20), filling res with the result code and the records of
// every packet in order (res may be nil when only the error matters). The
// engine applies read retry exactly as for Send; the response is never
// returned by RecvResponse or Config.OnResponse.
//
// The error is nil for ResultOK. Any other final code is an *Error carrying
// it, so errors.Is matches ErrReadRetryTimeout (-19219), ErrWaitTimeout
// (-16659) and ErrNoProxy, and errors.As gives the proxy's own code.
// A batch or index read can end with ResultOK and still carry failed
// records: keys or positions that every attempt answered with a listed
// error code (SPEC R8b). Do returns nil for it — its packets arrived — and
// res.Failed() says how many of its records carry a non-zero result; the
// give-up also counts in Stats.Exhausted and Stats.RecordsFailed and is
// logged as MsgExhausted (SPEC §7 R8b/R17/R20). Send's errors (ErrClosed,
// ErrUnknownZone, ErrBadRequest, a *NoProxyError naming each proxy's cause,
// a transport's refusal of the request wrapping ErrRequestRefused,
// ErrTooManyRequests) come back unchanged, with nothing sent (SPEC R13,
// issue 29).
//
// A context deadline that falls before the read's first send + T (its class
// budget, SPEC R1) becomes the read's budget: its re-sends are cut from the
// time left (SPEC R6, R10), so it hedges within the caller's patience, and
// the engine ends it, with ResultReadRetryTimeout (ErrReadRetryTimeout)
// when no attempt answered, and forgets it at that deadline (SPEC §7 R20).
// The deadline is read on Config.Clock's time line; the budget it gives is
// at least 5 ms per unit x (30 ms for MaxRetries 2).
//
// ctx bounds the wait: a context already done sends nothing; one that ends
// while the request is in flight makes Do return at once with an error
// wrapping ctx.Err(), and res untouched. The engine keeps the request until
// its own end (so that a retry under way completes its accounting), drops
// its later answers and counts them (Stats.DoAbandoned,
// Stats.AbandonedResponses). Close ends every Do under way with ErrClosed.
//
// Any number of goroutines may call Do at once. Who polls is fixed by
// Config.Poller: on a PollSelf client (the default) Do needs nothing else —
// its callers poll while they wait and the client's driver between them;
// on a PollHand client the caller's RecvResponse loop serves Do calls and
// must keep running while they wait.
//
// Ownership: res is written only by Do, and its records are views into its
// own buffer, valid until it is reset or passed to another Do.
func (c *Client) Do(ctx context.Context, zone Zone, req *Request, res *Result) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("retry: Do before sending: %w", err)
	}
	selfPoll, err := c.selfPolled()
	if err != nil {
		return err
	}
	var end int64
	if dl, ok := ctx.Deadline(); ok {
		// SPEC §7 R20: the caller's deadline, on the client's clock, is the
		// request's budget when it comes before first send + T.
		end = max(int64(dl.Sub(c.epoch)), 1)
	}
	w := c.waiters.take()
	if _, err := c.send(zone, req, w.id, end); err != nil {
		if !w.state.CompareAndSwap(waitPending, waitDone) {
			<-w.ch // Close ended the waiter meanwhile: take its wake-up
		}
		c.releaseWaiter(w)
		return err
	}
	if !selfPoll || !c.helpPoll(w) {
		if err := c.wait(ctx, zone, w); err != nil {
			return err // abandoned: the poller owns the waiter and frees it at the request's end
		}
	}
	err = w.err
	if err == nil {
		if res != nil {
			*res, w.res = w.res, *res
		}
		err = codeError(resultCode(res, &w.res))
	}
	c.releaseWaiter(w)
	return err
}

// wait blocks until the poller finishes the waiter or ctx ends. On ctx's
// end the waiter is abandoned to the poller, which frees it at the
// request's end, and the error wraps ctx.Err().
func (c *Client) wait(ctx context.Context, zone Zone, w *waiter) error {
	select {
	case <-w.ch:
	case <-ctx.Done():
		if w.state.CompareAndSwap(waitPending, waitAbandoned) {
			// The poller owns the waiter now and frees it at the request's end.
			if z := c.zoneOf(zone); z != nil {
				z.stats.doAbandoned.Add(1)
			}
			return errAbandoned{ctx.Err()}
		}
		<-w.ch // finished meanwhile: the result is there
	}
	return nil
}

// errAbandoned is Do's error when its context ended first: it wraps the
// context's error.
type errAbandoned struct{ err error }

func (e errAbandoned) Error() string {
	return "retry: Do: request still in flight, its answer will be dropped: " + e.err.Error()
}
func (e errAbandoned) Unwrap() error { return e.err }

// resultCode returns the final code from whichever Result holds it after
// the swap (res may be nil).
func resultCode(res, w *Result) int32 {
	if res != nil {
		return res.code
	}
	return w.code
}

// releaseWaiter empties a waiter and frees it for the next Do call.
func (c *Client) releaseWaiter(w *waiter) {
	w.res.Reset()
	w.res.trim()
	w.err = nil
	c.waiters.put(w)
}

// codeError returns nil for ResultOK and an *Error carrying code otherwise:
// the package's sentinel for the codes the engine makes, so that errors.Is
// matches them.
func codeError(code int32) error {
	switch code {
	case ResultOK:
		return nil
	case ResultReadRetryTimeout:
		return ErrReadRetryTimeout
	case ResultWaitRspTimeout:
		return ErrWaitTimeout
	case ResultNoProxy:
		return ErrNoProxy
	}
	return &Error{Code: code, msg: fmt.Sprintf("retry: result code %d", code)}
}
