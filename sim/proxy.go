package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// Proxy is one simulated proxy: a TCP server on 127.0.0.1 speaking the wire
// protocol, answering from a Dataset through a fault Profile that can be
// replaced at any time. Each connection has a reading goroutine, which
// parses requests and builds their answers at once, and a writing
// goroutine, which sends each packet when its time comes (a timer heap, not
// a goroutine per request). Make it with StartProxy; stop it with Close.
type Proxy struct {
	label   retry.Proxy
	addr    string
	data    *Dataset
	seed    uint64
	epoch   time.Time
	profile atomic.Pointer[Profile]

	mu     sync.Mutex // guards ln, conns, closed
	ln     net.Listener
	conns  map[*serverConn]struct{}
	closed bool
	wg     sync.WaitGroup
	nconn  atomic.Uint64
	stats  proxyCounters
}

type proxyCounters struct {
	conns, requests, dropped, errors, packets, cut, stalled, dups, closes, malformed atomic.Uint64
}

// ProxyStats are a proxy's counters since StartProxy.
type ProxyStats struct {
	Connections uint64 // connections accepted
	Requests    uint64 // requests parsed
	Dropped     uint64 // requests dropped silently (Profile.Drop)
	Errors      uint64 // error answers (Profile.Error)
	Packets     uint64 // response packets sent, duplicates included
	Cut         uint64 // multi-packet answers cut short (Profile.Cut)
	Stalled     uint64 // answers stalled (Profile.Stall)
	Duplicated  uint64 // packets sent twice (Profile.Dup)
	Closed      uint64 // connections closed mid-answer (Profile.Close)
	Malformed   uint64 // frames that failed to parse (the connection is closed)
}

// ErrProxyClosed is returned by SetProfile after Close.
var ErrProxyClosed = errors.New("sim: proxy closed")

// StartProxy starts a proxy for the logical endpoint label on an ephemeral
// port of 127.0.0.1, serving data through profile; seed makes its fault
// draws reproducible per connection. Errors: an invalid profile (wrapping
// ErrBadProfile) or the listener's.
func StartProxy(label retry.Proxy, data *Dataset, profile Profile, seed uint64) (*Proxy, error) {
	if err := profile.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{label: label, addr: ln.Addr().String(), data: data, seed: seed, epoch: time.Now(),
		conns: map[*serverConn]struct{}{}}
	p.profile.Store(&profile)
	if profile.Refuse {
		_ = ln.Close()
	} else {
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
	return p, nil
}

// Label returns the logical endpoint the proxy plays (its Host groups
// proxies for SPEC R13).
func (p *Proxy) Label() retry.Proxy { return p.label }

// Addr returns the real address, "127.0.0.1:port". It stays the same for
// the proxy's life, across Refuse periods.
func (p *Proxy) Addr() string { return p.addr }

// Profile returns the current fault profile.
func (p *Proxy) Profile() Profile { return *p.profile.Load() }

// SetProfile replaces the fault profile; requests that arrive from now on
// follow it (answers already scheduled keep theirs). Turning Refuse on
// closes the listener and every connection; turning it off listens again
// on the same address. Errors: an invalid profile (nothing changes),
// ErrProxyClosed, or the listener's error when the address cannot be
// taken back.
func (p *Proxy) SetProfile(np Profile) error {
	if err := np.Validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrProxyClosed
	}
	p.profile.Store(&np)
	switch {
	case np.Refuse && p.ln != nil:
		_ = p.ln.Close()
		p.ln = nil
		for c := range p.conns {
			c.shut()
		}
	case !np.Refuse && p.ln == nil:
		var ln net.Listener
		var err error
		for try := 0; try < 50; try++ {
			if ln, err = net.Listen("tcp", p.addr); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("sim: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.accept(ln)
	}
	return nil
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	s := &p.stats
	return ProxyStats{
		Connections: s.conns.Load(), Requests: s.requests.Load(), Dropped: s.dropped.Load(),
		Errors: s.errors.Load(), Packets: s.packets.Load(), Cut: s.cut.Load(), Stalled: s.stalled.Load(),
		Duplicated: s.dups.Load(), Closed: s.closes.Load(), Malformed: s.malformed.Load(),
	}
}

// Close stops the proxy: the listener, every connection and every
// goroutine, waiting for them. Answers not yet sent are dropped. It is safe
// to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.shut()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) now() int64 { return int64(time.Since(p.epoch)) }

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || p.ln != ln {
			p.mu.Unlock()
			_ = nc.Close()
			continue
		}
		n := p.nconn.Add(1)
		c := &serverConn{p: p, nc: nc, kick: make(chan struct{}, 1), done: make(chan struct{}),
			rng: rand.New(rand.NewPCG(p.seed, n))}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		p.stats.conns.Add(1)
		go c.readLoop()
		go c.writeLoop()
	}
}

// serverConn is one accepted connection.
type serverConn struct {
	p    *Proxy
	nc   net.Conn
	rng  *rand.Rand // fault and latency draws; reader goroutine only
	rb   wire.ResponseBuilder
	kick chan struct{}
	done chan struct{}
	once sync.Once

	pkts [][]byte // buildComplex's packet list, reused; reader goroutine only

	mu    sync.Mutex // guards due, free, order
	due   itemHeap
	free  [][]byte
	order uint64
}

// item is one scheduled write: a packet (with its stream prefix) or the
// closing of the connection.
type item struct {
	at    int64 // ns since the proxy's epoch
	order uint64
	buf   []byte
	close bool
}

// itemHeap is a min-heap of items by (at, order), typed so that pushing
// and popping box nothing (container/heap would allocate per item).
type itemHeap []item

func (h itemHeap) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].order < h[j].order)
}

func (h *itemHeap) push(it item) {
	*h = append(*h, it)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *itemHeap) pop() item {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = item{}
	q = q[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(q) && q.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(q) && q.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}

// shut closes the connection; both goroutines then end.
func (c *serverConn) shut() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *serverConn) readLoop() {
	p := c.p
	defer p.wg.Done()
	defer func() {
		c.shut()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	r := wire.NewReader(c.nc, 0)
	for {
		f, err := r.Next()
		if err != nil {
			return
		}
		req, err := wire.ParseRequest(f)
		if err != nil {
			p.stats.malformed.Add(1)
			return
		}
		p.stats.requests.Add(1)
		c.answer(req)
	}
}

func (c *serverConn) writeLoop() {
	p := c.p
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var out []byte
	for {
		c.mu.Lock()
		now := p.now()
		out = out[:0]
		closing, packets := false, 0
		for len(c.due) > 0 && c.due[0].at <= now {
			it := c.due.pop()
			if it.close {
				closing = true
				break
			}
			out = append(out, it.buf...)
			c.free = append(c.free, it.buf[:0])
			packets++
		}
		wait := time.Duration(-1)
		if len(c.due) > 0 {
			wait = time.Duration(c.due[0].at - now)
		}
		c.mu.Unlock()
		if len(out) > 0 {
			if _, err := c.nc.Write(out); err != nil {
				c.shut()
				return
			}
			p.stats.packets.Add(uint64(packets))
		}
		if closing {
			p.stats.closes.Add(1)
			c.shut()
			return
		}
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-c.kick:
		case <-timer.C:
		case <-c.done:
			return
		}
		timer.Stop()
	}
}

// schedule queues a packet (or, with buf nil, the closing of the
// connection) for time at. c.mu is held.
func (c *serverConn) schedule(at int64, buf []byte) {
	c.order++
	c.due.push(item{at: at, order: c.order, buf: buf, close: buf == nil})
}

func (c *serverConn) getBuf() []byte {
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		return b
	}
	return make([]byte, 0, 512)
}

// answer builds the answer to req under the current profile and schedules
// its packets. Reader goroutine only.
func (c *serverConn) answer(req wire.Request) {
	p := c.p
	pr := p.profile.Load()
	rng := c.rng
	if pr.Drop > 0 && rng.Float64() < pr.Drop {
		p.stats.dropped.Add(1)
		return
	}
	at := p.now() + int64(pr.Latency.Sample(rng))
	hdr := wire.ResponseHeader{Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), Attempt: req.Attempt()}

	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}()
	if pr.Error > 0 && rng.Float64() < pr.Error {
		p.stats.errors.Add(1)
		hdr.Result = pr.errorCode()
		c.schedule(at, c.single(hdr))
		return
	}
	stall := pr.Stall > 0 && rng.Float64() < pr.Stall
	closeMid := pr.Close > 0 && rng.Float64() < pr.Close
	dup := pr.Dup

	switch req.Body() {
	case wire.BodyBatch, wire.BodyIndex:
		packets := c.buildComplex(req, hdr, pr.packetRecords())
		if len(packets) > 1 && pr.Cut > 0 && rng.Float64() < pr.Cut && len(packets) > pr.cutAfter() {
			p.stats.cut.Add(1)
			for _, b := range packets[pr.cutAfter():] {
				c.free = append(c.free, b[:0])
			}
			packets = packets[:pr.cutAfter()]
		}
		if stall && len(packets) > 1 {
			p.stats.stalled.Add(1)
		}
		for i, b := range packets {
			when := at
			if i > 0 && stall {
				when += int64(pr.StallFor)
			}
			if closeMid && (i > 0 || len(packets) == 1) {
				// The connection dies after the first packet (before a
				// single-packet answer): the rest is never sent.
				for _, rest := range packets[i:] {
					c.free = append(c.free, rest[:0])
				}
				c.schedule(when, nil)
				return
			}
			c.schedule(when, b)
			if dup > 0 && rng.Float64() < dup {
				p.stats.dups.Add(1)
				c.schedule(when, append(c.getBuf(), b...))
			}
		}
	default:
		if stall {
			p.stats.stalled.Add(1)
			at += int64(pr.StallFor)
		}
		if closeMid {
			c.schedule(at, nil)
			return
		}
		var b []byte
		switch req.Body() {
		case wire.BodyKey:
			b = c.simple(req, hdr)
		default: // writes are acknowledged, not applied: the data stays checkable
			b = c.single(hdr)
		}
		c.schedule(at, b)
		if dup > 0 && rng.Float64() < dup {
			p.stats.dups.Add(1)
			c.schedule(at, append(c.getBuf(), b...))
		}
	}
}

// single returns a packet without records.
func (c *serverConn) single(h wire.ResponseHeader) []byte {
	buf, at := wire.BeginStreamFrame(c.getBuf())
	buf = wire.AppendResponse(buf, h)
	_ = wire.EndStreamFrame(buf, at)
	return buf
}

// simple answers a simple read: the key's record, or ResultNotFound.
func (c *serverConn) simple(req wire.Request, h wire.ResponseHeader) []byte {
	d := c.p.data
	key := req.Key()
	if !d.Has(key) {
		h.Result = ResultNotFound
		return c.single(h)
	}
	buf, at := wire.BeginStreamFrame(c.getBuf())
	c.rb.Start(buf, h)
	scratch := c.getBuf()
	scratch = d.AppendValue(scratch, key)
	_ = c.rb.AddRecord(0, 0, key, scratch)
	c.free = append(c.free, scratch[:0])
	buf = c.rb.Bytes()
	_ = wire.EndStreamFrame(buf, at)
	return buf
}

// buildComplex builds every packet of a batch or index read's answer, per
// records to a packet: batch records carry the key's index in the request;
// index records their stream position, each packet the cursor after it,
// the last one the end of what was asked for (SPEC R11's resume needs it).
func (c *serverConn) buildComplex(req wire.Request, h wire.ResponseHeader, per int) [][]byte {
	d := c.p.data
	// The packet list is reused answer after answer (the caller is done
	// with it before the next one): no allocation per complex answer.
	packets := c.pkts[:0]
	defer func() { c.pkts = packets[:0] }()
	var buf []byte
	var at int
	inPacket := 0
	begin := func(more bool, cursor uint64) {
		buf, at = wire.BeginStreamFrame(c.getBuf())
		h.HaveMore, h.Packet, h.Cursor = more, uint32(len(packets)), cursor
		c.rb.Start(buf, h)
	}
	end := func() {
		buf = c.rb.Bytes()
		_ = wire.EndStreamFrame(buf, at)
		packets = append(packets, buf)
		inPacket = 0
	}
	kb, vb := c.getBuf(), c.getBuf()
	defer func() { c.free = append(c.free, kb[:0], vb[:0]) }()
	if req.Body() == wire.BodyBatch {
		n := req.KeyCount()
		it := req.Keys()
		for i := 0; i < n; i++ {
			idx, key, _ := it.Next()
			if inPacket == 0 {
				begin(i+per < n, 0)
			}
			if d.Has(key) {
				vb = d.AppendValue(vb[:0], key)
				_ = c.rb.AddRecord(uint64(idx), 0, key, vb)
			} else {
				_ = c.rb.AddRecord(uint64(idx), ResultNotFound, key, nil)
			}
			inPacket++
			if inPacket == per || i == n-1 {
				end()
			}
		}
		return packets
	}
	part := req.Key()
	pos := req.Position()
	last := d.StreamLen(part)
	if l := req.Limit(); l != 0 && pos+uint64(l) < last {
		last = pos + uint64(l)
	}
	last = max(last, pos)
	for {
		stop := min(pos+uint64(per), last)
		begin(stop < last, stop)
		for ; pos < stop; pos++ {
			kb = d.AppendRecordKey(kb[:0], part, pos)
			vb = d.AppendRecordValue(vb[:0], part, pos)
			_ = c.rb.AddRecord(pos, 0, kb, vb)
		}
		end()
		if pos >= last {
			return packets
		}
	}
}
