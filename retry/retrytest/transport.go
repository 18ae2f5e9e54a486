// Package retrytest provides an in-memory retry.Transport with
// programmable proxies, for testing code built on package retry without a
// network, and a deterministic dataset that answers every read command so
// that results can be checked.
//
// Every proxy has a Handler, called synchronously inside Send with the
// parsed request: it may answer at once (Reply), keep the request for the
// test to answer later (Transport.Sent with logging on, then Deliver), or
// do nothing (a silent proxy: the request is lost). Answers wait in one
// inbox, in order, until the client's RecvResponse reads them. The
// transport allocates nothing per frame at steady state, so that the
// engine's benchmarks measure the engine.
package retrytest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// ErrUnknownProxy is returned by Send for a proxy that was never opened.
var ErrUnknownProxy = errors.New("retrytest: unknown proxy")

// ErrMarkedDown is what Send returns, and ProxyError says, for a proxy the
// test marked unavailable (SetAvailable) or refusing (SetRefusing) without
// a cause of its own (SetDown, SetSendError). It wraps retry.ErrUnavailable.
var ErrMarkedDown = fmt.Errorf("retrytest: proxy marked down by the test: %w", retry.ErrUnavailable)

// Handler plays one proxy: it gets each request sent to it, already parsed
// (a view valid during the call), and may answer through r. A nil Handler
// is a silent proxy. Handlers run one at a time (so a handler needs no lock
// of its own) but without the transport's state lock: a handler may call
// SetAvailable, SetRefusing, SetHandler, Deliver and the like — "the proxy
// dies after taking this request" — but not Send or Replay, nor the
// client's ApplyRoute or RemoveZone (they wait for Sends under way).
type Handler func(req wire.Request, r *Replier)

// Sent is one frame the client sent, recorded when logging is on.
type Sent struct {
	ID    retry.ProxyID
	Proxy retry.Proxy
	// Frame is a copy of the request frame, the test's to keep.
	Frame []byte
}

// Request parses Frame; it panics on a frame the client packed wrong, which
// in a test is the failure to report.
func (s Sent) Request() wire.Request {
	r, err := wire.ParseRequest(s.Frame)
	if err != nil {
		panic("retrytest: the client sent a malformed frame: " + err.Error())
	}
	return r
}

type proxyState struct {
	p         retry.Proxy
	available bool
	down      error // why it is unavailable (SetDown); nil: ErrMarkedDown
	refuse    error // Send fails with it even though Available says true
	handler   Handler
	own       bool // handler set by SetHandler, not the default
	sends     int
}

type inboxEntry struct {
	from retry.ProxyID
	st   *proxyState // the proxy that sent it, nil for Deliver from an unknown one
	buf  []byte
}

// Transport is an in-memory retry.Transport. The zero value is not usable;
// call NewTransport. It is safe for concurrent use.
type Transport struct {
	hmu     sync.Mutex // serialises handler calls and guards replier
	mu      sync.Mutex // guards everything else
	proxies map[retry.ProxyID]*proxyState
	byAddr  map[retry.Proxy]retry.ProxyID
	early   map[retry.Proxy]Handler // set before the client opened the proxy, or kept from a released one
	deflt   Handler                 // for proxies without a handler of their own
	opened  int                     // Open calls that registered a proxy
	dropped int                     // answers of released proxies dropped by Recv
	inbox   []inboxEntry            // ring
	head    int
	size    int
	spare   [][]byte // buffers of delivered frames, for reuse
	last    []byte   // the frame returned by the last Recv
	log     bool
	sent    []Sent
	replier Replier
}

// NewTransport returns a transport with no proxies; the client opens them
// as routes name them. Proxies start available and silent.
func NewTransport() *Transport {
	t := &Transport{
		proxies: map[retry.ProxyID]*proxyState{},
		byAddr:  map[retry.Proxy]retry.ProxyID{},
		early:   map[retry.Proxy]Handler{},
	}
	t.replier.t = t
	return t
}

// Open registers a proxy (retry.Transport).
func (t *Transport) Open(id retry.ProxyID, p retry.Proxy) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.proxies[id]; !ok {
		h, own := t.early[p]
		if !own {
			h = t.deflt
		}
		st := &proxyState{p: p, available: true, handler: h, own: own}
		delete(t.early, p)
		t.proxies[id] = st
		t.byAddr[p] = id
		t.opened++
	}
	return nil
}

// Release forgets a proxy (retry.Transport): Send and Available treat its
// ID as unknown, and answers it queued that Recv has not returned yet are
// dropped (counted by Dropped), so that a later proxy opened under the same
// ID never receives them. A handler set with SetHandler is kept for the
// address, for a later Open of it under any ID.
func (t *Transport) Release(id retry.ProxyID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.proxies[id]
	if !ok {
		return
	}
	delete(t.proxies, id)
	if t.byAddr[st.p] == id {
		delete(t.byAddr, st.p)
	}
	if st.own {
		t.early[st.p] = st.handler
	}
}

// Send hands the frame to the proxy's handler (retry.Transport). It fails
// with the proxy's cause (SetDown; ErrMarkedDown by default) if the proxy
// is marked unavailable, and with the error SetSendError or SetRefusing
// gave if it is refusing.
func (t *Transport) Send(id retry.ProxyID, frame []byte) error {
	t.mu.Lock()
	st := t.proxies[id]
	if st == nil {
		t.mu.Unlock()
		return ErrUnknownProxy
	}
	if !st.available {
		err := st.downErr()
		t.mu.Unlock()
		return err
	}
	if err := st.refuse; err != nil {
		t.mu.Unlock()
		return err
	}
	st.sends++
	if t.log {
		t.sent = append(t.sent, Sent{ID: id, Proxy: st.p, Frame: append([]byte(nil), frame...)})
	}
	h := st.handler
	t.mu.Unlock()
	if h == nil {
		return nil
	}
	req, err := wire.ParseRequest(frame)
	if err != nil {
		return err
	}
	t.run(id, req, h)
	return nil
}

// run calls a handler, one at a time, with the replier set to answer from id.
func (t *Transport) run(id retry.ProxyID, req wire.Request, h Handler) {
	t.hmu.Lock()
	defer t.hmu.Unlock()
	t.replier.from = id
	h(req, &t.replier)
}

// Recv returns the next answer in the inbox (retry.Transport); the frame is
// valid until the next Recv.
func (t *Transport) Recv() ([]byte, retry.ProxyID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last != nil {
		t.spare = append(t.spare, t.last[:0])
		t.last = nil
	}
	for t.size > 0 {
		e := t.inbox[t.head]
		t.inbox[t.head] = inboxEntry{}
		t.head = (t.head + 1) % len(t.inbox)
		t.size--
		if e.st != nil && t.proxies[e.from] != e.st {
			// Sent by a proxy released since: the fence of Release.
			t.dropped++
			t.spare = append(t.spare, e.buf[:0])
			continue
		}
		t.last = e.buf
		return e.buf, e.from, true
	}
	return nil, 0, false
}

// Available reports the proxy's availability (retry.Transport).
func (t *Transport) Available(id retry.ProxyID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.proxies[id]
	return st != nil && st.available
}

// downErr is why an unavailable proxy is down; t.mu is held.
func (st *proxyState) downErr() error {
	if st.down != nil {
		return st.down
	}
	return ErrMarkedDown
}

// ProxyError says why the proxy cannot take a frame now, nil if it can
// (retry.ProxyErrorer; SPEC R13, issue 29): ErrUnknownProxy for an id not
// open; for a proxy marked unavailable, its cause (SetDown) or
// ErrMarkedDown; for one refusing, the error its Send returns, unless that
// error refuses the request rather than the proxy (retry.ErrRequestRefused).
func (t *Transport) ProxyError(id retry.ProxyID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.proxies[id]
	switch {
	case st == nil:
		return ErrUnknownProxy
	case !st.available:
		return st.downErr()
	case st.refuse != nil && !errors.Is(st.refuse, retry.ErrRequestRefused):
		return st.refuse
	}
	return nil
}

// SetAvailable marks a proxy available or not; an unavailable proxy fails
// Send with ErrMarkedDown and is skipped by the client's proxy choice.
// Marking it available forgets the cause SetDown gave.
func (t *Transport) SetAvailable(p retry.Proxy, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, found := t.byAddr[p]; found {
		t.proxies[id].available, t.proxies[id].down = ok, nil
	}
}

// SetDown marks a proxy unavailable for the reason cause, which Send
// returns and ProxyError says (nil: ErrMarkedDown), as a transport whose
// dial failed would: a test of what the client reports then.
func (t *Transport) SetDown(p retry.Proxy, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, found := t.byAddr[p]; found {
		t.proxies[id].available, t.proxies[id].down = false, cause
	}
}

// SetRefusing makes a proxy look available but fail every Send with
// ErrMarkedDown, as a connection that just broke does; false undoes it
// (and SetSendError).
func (t *Transport) SetRefusing(p retry.Proxy, refuse bool) {
	var err error
	if refuse {
		err = ErrMarkedDown
	}
	t.SetSendError(p, err)
}

// SetSendError makes a proxy look available but fail every Send with err
// (nil: Send works again). An error wrapping retry.ErrRequestRefused plays
// a transport that refuses the request itself, which the client returns to
// its caller without trying another proxy; any other plays a proxy that
// cannot take frames.
func (t *Transport) SetSendError(p retry.Proxy, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, found := t.byAddr[p]; found {
		t.proxies[id].refuse = err
	}
}

// SetHandler sets a proxy's handler (nil: silent). It may be called before
// the client opens the proxy.
func (t *Transport) SetHandler(p retry.Proxy, h Handler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, found := t.byAddr[p]; found {
		t.proxies[id].handler, t.proxies[id].own = h, true
		return
	}
	t.early[p] = h
}

// SetDefaultHandler sets the handler of every proxy opened from now on
// that has none of its own (SetHandler): a test whose routes keep moving
// to new addresses serves them all this way.
func (t *Transport) SetDefaultHandler(h Handler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deflt = h
}

// Proxies returns how many proxies are open now (opened and not released).
func (t *Transport) Proxies() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.proxies)
}

// Opened returns how many times a proxy was opened since NewTransport.
func (t *Transport) Opened() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.opened
}

// Dropped returns how many queued answers of released proxies Recv dropped.
func (t *Transport) Dropped() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

// Sends returns how many frames were sent to a proxy.
func (t *Transport) Sends(p retry.Proxy) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, found := t.byAddr[p]; found {
		return t.proxies[id].sends
	}
	return 0
}

// SetLog turns the record of sent frames on or off (off by default, so
// that benchmarks do not grow it).
func (t *Transport) SetLog(on bool) {
	t.mu.Lock()
	t.log = on
	t.mu.Unlock()
}

// Sent returns and clears the record of sent frames, oldest first.
func (t *Transport) Sent() []Sent {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sent
	t.sent = nil
	return s
}

// Deliver puts a response frame into the inbox as if the proxy had sent it.
// The frame is copied. Use it to answer a request recorded by Sent, late,
// twice, or from the wrong proxy. A proxy the client never opened is
// delivered as ProxyID 0, which no request was sent to.
func (t *Transport) Deliver(from retry.Proxy, frame []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.enqueue(t.byAddr[from], frame)
}

// DeliverFrom is Deliver naming the sender by its ID, as the transport
// would for a frame that proxy sent: a proxy released since (Release) never
// has it returned by Recv.
func (t *Transport) DeliverFrom(id retry.ProxyID, frame []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.enqueue(id, frame)
}

// Replay runs h on a recorded request as if the proxy it was sent to had
// that handler: a test answers late, or with another model, this way.
func (t *Transport) Replay(s Sent, h Handler) {
	req, err := wire.ParseRequest(s.Frame)
	if err != nil {
		return
	}
	t.run(s.ID, req, h)
}

// Pending returns the number of answers waiting in the inbox.
func (t *Transport) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// enqueue copies frame into a reused buffer at the inbox's tail; t.mu is held.
func (t *Transport) enqueue(from retry.ProxyID, frame []byte) {
	if t.size == len(t.inbox) {
		nb := make([]inboxEntry, max(64, 2*len(t.inbox)))
		for i := 0; i < t.size; i++ {
			nb[i] = t.inbox[(t.head+i)%len(t.inbox)]
		}
		t.inbox, t.head = nb, 0
	}
	var buf []byte
	if n := len(t.spare); n > 0 {
		buf = t.spare[n-1]
		t.spare = t.spare[:n-1]
	}
	t.inbox[(t.head+t.size)%len(t.inbox)] = inboxEntry{from: from, st: t.proxies[from], buf: append(buf[:0], frame...)}
	t.size++
}

// Replier lets a Handler answer the request it was given. Its methods may
// be called any number of times during the Handler call (several packets);
// the frames go to the inbox in order.
type Replier struct {
	t    *Transport
	from retry.ProxyID
	rb   wire.ResponseBuilder
	buf  []byte
}

// Start begins a response packet for req with the given result and flags;
// add records with Record, then Send it.
func (r *Replier) Start(req wire.Request, result int32, haveMore bool, packet uint32, cursor uint64) {
	r.rb.Start(r.buf[:0], wire.ResponseHeader{
		Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), Result: result,
		HaveMore: haveMore, Attempt: req.Attempt(), Packet: packet, Cursor: cursor,
	})
}

// Record adds a record to the packet begun by Start. A record that would
// take the packet past wire.MaxFrameSize is left out (a test's proxy has no
// business sending one).
func (r *Replier) Record(tag uint64, result int32, key, value []byte) {
	_ = r.rb.AddRecord(tag, result, key, value)
}

// Send puts the packet begun by Start into the inbox.
func (r *Replier) Send() {
	r.buf = r.rb.Bytes()
	r.t.mu.Lock()
	r.t.enqueue(r.from, r.buf)
	r.t.mu.Unlock()
}
