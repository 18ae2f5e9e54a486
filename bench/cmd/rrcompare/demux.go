package main

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/wire"
)

// demux is the TCP client a Go developer writes for a request/response
// protocol with many requests in flight per connection: one connection per
// proxy, a mutex-guarded conn.Write per frame, one reader goroutine per
// connection that demultiplexes answers by sequence number through a
// mutex-guarded map of waiting requests, each with a channel. The
// goroutines and failsafe-go clients run over it, and so do the gRPC
// fronts (in the child process) towards their sim proxies.
type demux struct {
	labels []retry.Proxy
	conns  []*dconn
	seq    atomic.Uint64
	rr     atomic.Uint64

	// Calls counted for the syscall columns: Write calls (one per frame),
	// the readers' Read calls and the frames they decoded.
	writes, reads, framesRecv atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]*waiter

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// dconn is one proxy's connection.
type dconn struct {
	addr string
	up   atomic.Bool
	mu   sync.Mutex // guards nc, wbuf
	nc   net.Conn
	wbuf []byte
}

// waiter is one request (or one attempt) waiting for its packets. A nil
// frame on ch says the connection its attempt went to was lost.
type waiter struct {
	ch   chan []byte
	done chan struct{}
	conn atomic.Int32 // the connection of its latest attempt
}

var (
	errUnavailable = errors.New("rrcompare: no proxy available")
	errConnLost    = errors.New("rrcompare: connection lost")
)

// newDemux connects to every address (host-major, as labels) in the
// background; a proxy is available once its connection is up.
func newDemux(labels []retry.Proxy, addrs []string) *demux {
	ctx, cancel := context.WithCancel(context.Background())
	d := &demux{labels: labels, pending: map[uint64]*waiter{}, ctx: ctx, cancel: cancel}
	for i, a := range addrs {
		c := &dconn{addr: a}
		d.conns = append(d.conns, c)
		d.wg.Add(1)
		go d.readLoop(i, c)
	}
	return d
}

// waitUp waits up to d for every connection to be up.
func (d *demux) waitUp(limit time.Duration) {
	by := time.Now().Add(limit)
	for time.Now().Before(by) {
		all := true
		for _, c := range d.conns {
			all = all && c.up.Load()
		}
		if all {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readLoop dials, reads frames and hands each to its waiter, and redials
// after a backoff when the connection breaks, until close.
func (d *demux) readLoop(i int, c *dconn) {
	defer d.wg.Done()
	delay := 5 * time.Millisecond
	dialer := net.Dialer{Timeout: 500 * time.Millisecond}
	for d.ctx.Err() == nil {
		nc, err := dialer.DialContext(d.ctx, "tcp", c.addr)
		if err != nil {
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 100*time.Millisecond)
			continue
		}
		delay = 5 * time.Millisecond
		c.mu.Lock()
		c.nc = nc
		c.mu.Unlock()
		c.up.Store(true)
		r := wire.NewReader(countingReader{nc, &d.reads}, 0)
		for {
			f, err := r.Next()
			if err != nil {
				break
			}
			d.framesRecv.Add(1)
			d.dispatch(f)
		}
		c.up.Store(false)
		c.mu.Lock()
		c.nc = nil
		c.mu.Unlock()
		_ = nc.Close()
		d.lost(i)
	}
}

// countingReader counts the Read calls on a connection.
type countingReader struct {
	nc net.Conn
	n  *atomic.Uint64
}

func (r countingReader) Read(p []byte) (int, error) {
	r.n.Add(1)
	return r.nc.Read(p)
}

// dispatch copies a frame to the waiter of its sequence number; a frame
// nobody waits for (late, duplicate, garbled) is dropped.
func (d *demux) dispatch(f []byte) {
	seq, ok := wire.PeekResponseSeq(f)
	if !ok {
		return
	}
	d.mu.Lock()
	w := d.pending[seq]
	d.mu.Unlock()
	if w == nil {
		return
	}
	cp := append([]byte(nil), f...)
	select {
	case w.ch <- cp:
	case <-w.done:
	case <-d.ctx.Done():
	}
}

// lost tells every waiter whose latest attempt went to connection i.
func (d *demux) lost(i int) {
	d.mu.Lock()
	var ws []*waiter
	for _, w := range d.pending {
		if int(w.conn.Load()) == i {
			ws = append(ws, w)
		}
	}
	d.mu.Unlock()
	for _, w := range ws {
		select {
		case w.ch <- nil:
		default: // it has packets to read first; its timers cover it
		}
	}
}

// register makes a waiter for seq.
func (d *demux) register(seq uint64, buffer int) *waiter {
	w := &waiter{ch: make(chan []byte, buffer), done: make(chan struct{})}
	w.conn.Store(-1)
	d.mu.Lock()
	d.pending[seq] = w
	d.mu.Unlock()
	return w
}

// unregister removes seq's waiter and releases a reader blocked on it.
func (d *demux) unregister(seq uint64, w *waiter) {
	d.mu.Lock()
	delete(d.pending, seq)
	d.mu.Unlock()
	close(w.done)
}

// send writes one frame to proxy i: length prefix and frame in one Write
// under the connection's mutex.
func (d *demux) send(i int, frame []byte) error {
	c := d.conns[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc == nil {
		return errUnavailable
	}
	c.wbuf = binary.LittleEndian.AppendUint32(c.wbuf[:0], uint32(len(frame)))
	c.wbuf = append(c.wbuf, frame...)
	d.writes.Add(1)
	if _, err := c.nc.Write(c.wbuf); err != nil {
		_ = c.nc.Close() // the reader sees it and redials
		return errUnavailable
	}
	return nil
}

// pick chooses the proxy for a request's next attempt as SPEC R13 does:
// an available proxy on a host the request has not tried, then an untried
// port of a tried host, then the least recently tried; round robin among
// equals. tried lists the proxies tried, oldest first. -1: none available.
func (d *demux) pick(tried []int) int {
	n := len(d.conns)
	base := int(d.rr.Add(1) % uint64(n))
	best, bestRank := -1, 1<<30
	for k := 0; k < n; k++ {
		i := (base + k) % n
		if !d.conns[i].up.Load() {
			continue
		}
		rank := 0
		for pos, t := range tried {
			if t == i {
				rank = 2<<16 + pos // tried: the oldest first
				break
			}
			if d.labels[t].Host == d.labels[i].Host {
				rank = 1
			}
		}
		if rank < bestRank {
			best, bestRank = i, rank
		}
	}
	return best
}

// close ends every connection and reader goroutine.
func (d *demux) close() {
	d.cancel()
	for _, c := range d.conns {
		c.mu.Lock()
		if c.nc != nil {
			_ = c.nc.Close()
		}
		c.mu.Unlock()
	}
	d.wg.Wait()
}

// setSeq writes seq into a request frame (bytes 12..19, package wire's
// request header).
func setSeq(frame []byte, seq uint64) { binary.LittleEndian.PutUint64(frame[12:20], seq) }

// stream collects one attempt's packets: in packet order, duplicates
// dropped, complete with the packet whose HaveMore is unset.
type stream struct {
	frames [][]byte
	result int32
	done   bool
}

// add takes one packet of the attempt; it reports whether the packet
// was new.
func (s *stream) add(f []byte, rsp wire.Response) bool {
	if int(rsp.Packet()) != len(s.frames) || s.done {
		return false // a duplicate, or a packet after a gap (the stream is broken; wait for a re-send)
	}
	s.frames = append(s.frames, f)
	s.result = rsp.Result()
	s.done = !rsp.HaveMore()
	return true
}

// fill makes ans the final answer from a complete stream's records.
func (s *stream) fill(ans *sim.Answer) {
	ans.Result = s.result
	ans.Records = ans.Records[:0]
	for _, f := range s.frames {
		rsp, err := wire.ParseResponse(f)
		if err != nil {
			continue
		}
		for it := rsp.Records(); ; {
			rec, ok := it.Next()
			if !ok {
				break
			}
			ans.Records = append(ans.Records, rec)
		}
	}
	ans.RecordCount = len(ans.Records)
}

// roundTrip sends frame (a copy gets its own sequence number) to proxy i
// and waits for the complete answer, the context's end, or the loss of
// the connection: one blocking attempt, as failsafe-go and the gRPC
// fronts use it.
func (d *demux) roundTrip(ctx context.Context, i int, frame []byte) (*stream, error) {
	seq := d.seq.Add(1)
	f := append([]byte(nil), frame...)
	setSeq(f, seq)
	w := d.register(seq, 8)
	defer d.unregister(seq, w)
	w.conn.Store(int32(i))
	if err := d.send(i, f); err != nil {
		return nil, err
	}
	s := &stream{}
	for {
		select {
		case f := <-w.ch:
			if f == nil {
				return nil, errConnLost
			}
			rsp, err := wire.ParseResponse(f)
			if err != nil {
				continue
			}
			if s.add(f, rsp) && s.done {
				return s, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
