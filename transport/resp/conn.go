package resp

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/readretry/readretry/wire"
)

var le = binary.LittleEndian

// cmdKind is the Redis command a pending entry stands for.
type cmdKind uint8

const (
	cmdGet   cmdKind = iota + 1 // GET key: a simple read
	cmdMGet                     // MGET k1 … kn: one chunk of a batch read
	cmdRange                    // LRANGE key start stop: one chunk of an index read
)

// pending is one RESP command written to a replica and not yet answered.
// A connection keeps them in the order written; Redis answers a
// connection's commands in that order, so the oldest entry is the one the
// next reply answers (sequence matching without anything on the wire).
type pending struct {
	seq, asyncID uint64
	pos          uint64 // LRANGE: first position asked
	from, to     uint64 // key bytes in the connection's byteQueue (virtual positions)
	cmd          wire.Command
	packet       uint32 // the packet index this reply becomes
	n            uint32 // MGET: keys in the chunk; LRANGE: positions asked
	limit        uint32 // LRANGE: positions left of the request's limit, this chunk included; 0 = no limit
	attempt      uint16
	kind         cmdKind
	last         bool // MGET: the request's last chunk
}

// shape is the reply a pending command may get besides an error.
func (e *pending) shape() shape {
	switch e.kind {
	case cmdMGet:
		return shape{array: true, n: int(e.n), exact: true, nilElems: true}
	case cmdRange:
		return shape{array: true, n: int(e.n)}
	}
	return shape{}
}

// conn is one replica connection as transport/tcp sees it: a net.Conn
// whose Write takes length-prefixed wire request frames and writes RESP
// commands, and whose Read decodes RESP replies and returns
// length-prefixed wire response frames. tcp's writer goroutine calls Write
// and its reader goroutine calls Read; the queue of pending commands is
// what they share.
type conn struct {
	net.Conn
	t *Transport

	// wmu is held while commands are queued and their bytes written, by
	// Write and by the reader's LRANGE follow-ups alike: the replica then
	// receives commands in queue order.
	wmu sync.Mutex
	out []byte // RESP bytes being written (under wmu)

	mu   sync.Mutex // guards q and keys: Write pushes, the reader pops
	q    fifo[pending]
	keys byteQueue

	// The reader's side, touched only by Read.
	dec        decoder
	in         []byte // received bytes; in[start:] not yet decoded
	start      int
	need       int    // len(in)-start at which decoding can progress
	staged     []byte // wire response frames with length prefixes, ready for Read
	sent       int    // bytes of staged already returned
	rb         wire.ResponseBuilder
	follow     []pending // the LRANGE chunk to ask for next (queueFollow)
	followKeys []byte    // their keys; pending.from/to index it until queued
	err        error     // sticky: the replica broke the protocol
}

// Buffer sizes of a connection: what it starts with and what it returns
// to after an outsized reply, so one large answer does not stay resident.
const (
	inBufSize     = 32 << 10
	stagedBufSize = 32 << 10
)

func newConn(t *Transport, nc net.Conn) *conn {
	return &conn{
		Conn:   nc,
		t:      t,
		dec:    decoder{max: t.cfg.MaxReply},
		in:     make([]byte, 0, inBufSize),
		staged: make([]byte, 0, stagedBufSize),
	}
}

// Write translates the length-prefixed request frames in p (tcp's writer
// hands over everything queued since its last write) into RESP commands,
// queues one pending entry per command, and writes the commands with one
// system call. It returns len(p), or 0 and an error after which tcp drops
// the connection.
func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out := c.out[:0]
	c.mu.Lock()
	for off := 0; off < len(p); {
		if len(p)-off < wire.StreamPrefixSize {
			c.mu.Unlock()
			return 0, wire.ErrShortFrame
		}
		n := int(le.Uint32(p[off:]))
		off += wire.StreamPrefixSize
		if n > len(p)-off {
			c.mu.Unlock()
			return 0, wire.ErrShortFrame
		}
		req, err := wire.ParseRequest(p[off : off+n])
		off += n
		if err != nil {
			c.mu.Unlock()
			return 0, err
		}
		if out, err = c.translate(out, req); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	c.out = out
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// translate appends the RESP commands of one request to out and queues
// their pending entries (under c.mu). Transport.Send lets only the mapped
// commands through; anything else here is refused.
func (c *conn) translate(out []byte, req wire.Request) ([]byte, error) {
	cfg := &c.t.cfg
	e := pending{seq: req.Seq(), asyncID: req.AsyncID(), cmd: req.Command(), attempt: req.Attempt()}
	switch req.Command() {
	case wire.CmdGet:
		key := req.Key()
		e.kind = cmdGet
		e.from, e.to = c.pushKey(key)
		c.q.push(e)
		c.t.stats.commands.Add(1)
		out = appendArray(out, 2)
		out = append(out, "$3\r\nGET\r\n"...)
		return appendBulk(out, key), nil
	case wire.CmdBatchGet:
		e.kind = cmdMGet
		it := req.Keys()
		for left := req.KeyCount(); left > 0; {
			k := min(cfg.BatchChunk, left)
			left -= k
			size := 0
			for scan, i := it, 0; i < k; i++ { // a copy of the iterator: measure first
				_, key, _ := scan.Next()
				size += 8 + len(key)
			}
			e.from = c.keys.reserve(size)
			out = appendArray(out, k+1)
			out = append(out, "$4\r\nMGET\r\n"...)
			for range k {
				idx, key, _ := it.Next()
				c.keys.buf = le.AppendUint32(c.keys.buf, idx)
				c.keys.buf = le.AppendUint32(c.keys.buf, uint32(len(key)))
				c.keys.buf = append(c.keys.buf, key...)
				out = appendBulk(out, key)
			}
			e.to = c.keys.base + uint64(len(c.keys.buf))
			e.n, e.last = uint32(k), left == 0
			c.q.push(e)
			c.t.stats.commands.Add(1)
			e.packet++
		}
		return out, nil
	case wire.CmdListGetAll:
		key := req.Key()
		e.kind, e.pos, e.limit = cmdRange, req.Position(), req.Limit()
		e.n = uint32(cfg.RangeChunk)
		if e.limit != 0 {
			e.n = min(e.n, e.limit)
		}
		e.from, e.to = c.pushKey(key)
		c.q.push(e)
		c.t.stats.commands.Add(1)
		return appendRange(out, key, e.pos, e.n), nil
	}
	return out, fmt.Errorf("%w: %v", ErrUnsupported, req.Command())
}

// pushKey appends key to the key queue and returns its virtual span.
func (c *conn) pushKey(key []byte) (from, to uint64) {
	from = c.keys.reserve(len(key))
	c.keys.buf = append(c.keys.buf, key...)
	return from, from + uint64(len(key))
}

func appendArray(out []byte, n int) []byte {
	out = append(out, '*')
	out = strconv.AppendInt(out, int64(n), 10)
	return append(out, '\r', '\n')
}

func appendBulk(out, b []byte) []byte {
	out = append(out, '$')
	out = strconv.AppendInt(out, int64(len(b)), 10)
	out = append(out, '\r', '\n')
	out = append(out, b...)
	return append(out, '\r', '\n')
}

func appendBulkUint(out []byte, v uint64) []byte {
	var d [20]byte
	return appendBulk(out, strconv.AppendUint(d[:0], v, 10))
}

// appendRange appends LRANGE key pos pos+n-1.
func appendRange(out, key []byte, pos uint64, n uint32) []byte {
	out = appendArray(out, 4)
	out = append(out, "$6\r\nLRANGE\r\n"...)
	out = appendBulk(out, key)
	out = appendBulkUint(out, pos)
	return appendBulkUint(out, pos+uint64(n)-1)
}

// Read returns length-prefixed wire response frames made from the
// replica's replies, decoding as many complete replies as are buffered
// before it reads the socket again. A reply that breaks the protocol ends
// the connection with its error once the frames decoded before it are
// read (they answer earlier commands correctly); tcp then reconnects.
func (c *conn) Read(p []byte) (int, error) {
	for {
		if c.sent < len(c.staged) {
			n := copy(p, c.staged[c.sent:])
			c.sent += n
			if c.sent == len(c.staged) {
				c.staged, c.sent = shrink(c.staged, stagedBufSize), 0
			}
			return n, nil
		}
		if c.err != nil {
			return 0, c.err
		}
		if err := c.decodeAll(); err != nil {
			c.t.stats.protocolErrors.Add(1)
			c.fail(err)
			continue
		}
		if len(c.staged) > 0 || c.err != nil {
			continue
		}
		if err := c.fill(); err != nil {
			c.fail(err)
		}
	}
}

// fail ends the connection with err once the frames staged so far are
// read and, with Config.AnswerLost, answers every request that still has a
// command pending on it with Config.RetryCode: the replica can no longer
// answer it, and a listed
// code makes the engine re-send at once to another replica (partial batch,
// resume) instead of waiting for the request's timer (SPEC R8, R11). One
// packet per request attempt, however many of its chunks were pending; it
// carries no record, so nothing wrong can be delivered.
func (c *conn) fail(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if !c.t.cfg.AnswerLost {
		return // the engine's timers re-send what was pending
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var last *pending
	for c.q.len() > 0 {
		e := c.q.front()
		if last == nil || e.seq != last.seq || e.attempt != last.attempt {
			h := wire.ResponseHeader{Command: e.cmd, Seq: e.seq, AsyncID: e.asyncID, Attempt: e.attempt,
				Packet: e.packet, Result: c.t.cfg.RetryCode}
			if e.kind == cmdRange {
				h.Cursor = e.pos
			}
			buf, at := wire.BeginStreamFrame(c.staged)
			c.staged = wire.AppendResponse(buf, h)
			_ = wire.EndStreamFrame(c.staged, at) // a header-only frame
			c.t.stats.lost.Add(1)
		}
		f := *e
		last = &f
		c.keys.release(e.to)
		c.q.pop()
	}
}

// shrink empties b, and replaces it with a buffer of the usual size when an
// outsized reply grew it.
func shrink(b []byte, size int) []byte {
	if cap(b) > 4*size {
		return make([]byte, 0, size)
	}
	return b[:0]
}

// fill reads from the socket at least once, making room for what the
// decoder needs: a reply is never larger than Config.MaxReply, which
// bounds the buffer.
func (c *conn) fill() error {
	if c.start == len(c.in) {
		c.in, c.start = shrink(c.in, inBufSize), 0
	}
	n := len(c.in) - c.start      // bytes not decoded yet
	need := max(c.need, n+1)      // bytes of the reply to hold after this read
	if c.start+need > cap(c.in) { // move the reply to the front, growing if it must
		buf := c.in[:0]
		if need > cap(c.in) {
			buf = make([]byte, 0, max(need, min(2*cap(c.in), c.t.cfg.MaxReply)))
		}
		copy(buf[:n], c.in[c.start:])
		c.in, c.start = buf[:n], 0
	}
	m, err := c.Conn.Read(c.in[len(c.in):cap(c.in)])
	c.in = c.in[:len(c.in)+m]
	if m > 0 {
		return nil
	}
	return err
}

// decodeAll turns every complete buffered reply into a wire frame in
// c.staged, asking for the next LRANGE chunk as soon as a full one is in.
func (c *conn) decodeAll() error {
	for len(c.in)-c.start >= c.need && c.start < len(c.in) && c.err == nil {
		c.mu.Lock()
		if c.q.len() == 0 {
			c.mu.Unlock()
			return fmt.Errorf("%w: a reply with no command pending", ErrMismatch)
		}
		e := *c.q.front() // by value: Write may move the queue's items
		c.mu.Unlock()
		b := c.in[c.start:]
		r, need, err := c.dec.decode(b, e.shape())
		if err == errIncomplete {
			c.need = need
			break
		}
		if err != nil {
			return err
		}
		c.need = 0
		c.mu.Lock()
		err = c.emit(&e, r, b)
		c.keys.release(e.to)
		c.q.pop()
		c.mu.Unlock()
		if err != nil {
			return err
		}
		c.start += r.size
		if len(c.follow) > 0 {
			// Asked for before the next reply is decoded: a replica
			// answers it only after this point of the stream.
			c.queueFollow()
		}
	}
	return nil
}

// emit appends the wire response frame for reply r (decoded from b) to
// pending command e to c.staged. Called under c.mu: it reads e's key bytes.
func (c *conn) emit(e *pending, r reply, b []byte) error {
	t := c.t
	h := wire.ResponseHeader{Command: e.cmd, Seq: e.seq, AsyncID: e.asyncID, Attempt: e.attempt, Packet: e.packet}
	keys := c.keys.bytes(e.from, e.to)
	buf, at := wire.BeginStreamFrame(c.staged)
	var err error
	switch {
	case r.kind == kindError:
		h.Result = t.errorCode(b[r.val.off:r.val.end])
		// An MGET chunk's error leaves the later chunks coming; an
		// LRANGE chunk's ends the stream where it stood.
		h.HaveMore = e.kind == cmdMGet && !e.last
		if e.kind == cmdRange {
			h.Cursor = e.pos
		}
		c.rb.Start(buf, h)
	case e.kind == cmdGet:
		if r.val.nil {
			h.Result = ResultNotFound
			c.rb.Start(buf, h)
			break
		}
		c.rb.Start(buf, h)
		err = c.rb.AddRecord(0, 0, keys, b[r.val.off:r.val.end])
	case e.kind == cmdMGet:
		h.HaveMore = !e.last
		c.rb.Start(buf, h)
		for _, v := range c.dec.elems {
			idx := le.Uint32(keys)
			n := le.Uint32(keys[4:])
			key := keys[8 : 8+n]
			keys = keys[8+n:]
			if v.nil {
				err = c.rb.AddRecord(uint64(idx), ResultNotFound, key, nil)
			} else {
				err = c.rb.AddRecord(uint64(idx), 0, key, b[v.off:v.end])
			}
			if err != nil {
				break
			}
		}
	default: // cmdRange
		m := uint32(len(c.dec.elems))
		more := m == e.n && (e.limit == 0 || e.limit > e.n)
		h.HaveMore, h.Cursor = more, e.pos+uint64(m)
		c.rb.Start(buf, h)
		for i, v := range c.dec.elems {
			if err = c.rb.AddRecord(e.pos+uint64(i), 0, keys, b[v.off:v.end]); err != nil {
				break
			}
		}
		if more && err == nil {
			c.addFollow(e, keys)
		}
	}
	if err != nil {
		c.staged = buf[:at]
		return fmt.Errorf("%w: %w", ErrReplyTooLarge, err)
	}
	c.staged = c.rb.Bytes()
	return wire.EndStreamFrame(c.staged, at)
}

// addFollow notes the LRANGE chunk after e, for queueFollow.
func (c *conn) addFollow(e *pending, key []byte) {
	f := *e
	f.packet++
	f.pos += uint64(e.n)
	if f.limit != 0 {
		f.limit -= e.n
	}
	f.n = uint32(c.t.cfg.RangeChunk)
	if f.limit != 0 {
		f.n = min(f.n, f.limit)
	}
	f.from = uint64(len(c.followKeys))
	c.followKeys = append(c.followKeys, key...)
	f.to = uint64(len(c.followKeys))
	c.follow = append(c.follow, f)
}

// queueFollow writes the LRANGE follow-ups decodeAll found, in order,
// under wmu like Write, so that they join the queue where their bytes
// join the stream. A failed write ends the connection (fail) once the
// frames already decoded are read.
func (c *conn) queueFollow() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out := c.out[:0]
	c.mu.Lock()
	for i := range c.follow {
		f := &c.follow[i]
		key := c.followKeys[f.from:f.to]
		f.from, f.to = c.pushKey(key)
		c.q.push(*f)
		out = appendRange(out, key, f.pos, f.n)
	}
	c.mu.Unlock()
	c.t.stats.commands.Add(uint64(len(c.follow)))
	c.follow, c.followKeys, c.out = c.follow[:0], c.followKeys[:0], out
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.t.cfg.WriteTimeout))
	if _, err := c.Conn.Write(out); err != nil {
		c.fail(err) // not the replica's protocol fault: not counted as one
	}
}
