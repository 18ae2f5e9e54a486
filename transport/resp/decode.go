package resp

import (
	"bytes"
	"errors"
)

// Errors of the RESP stream decoder. A connection whose replica sends any of
// them is dropped and counted (Stats.ProtocolErrors); nothing from the
// offending reply reaches the engine. Each is a sentinel for errors.Is.
var (
	// ErrProtocol: bytes that are not RESP2 (an unknown type byte, a line
	// without CRLF, a malformed length, a bulk not followed by CRLF).
	ErrProtocol = errors.New("resp: malformed reply")
	// ErrReplyTooLarge: a bulk length, an array, or a whole reply larger
	// than Config.MaxReply. Rejected when the length is read, before any
	// byte of the body is waited for.
	ErrReplyTooLarge = errors.New("resp: reply too large")
	// ErrMismatch: a well-formed reply that does not fit the command it
	// answers (an array for GET, an MGET answer with another count, an
	// LRANGE answer longer than asked, a status or integer reply, a reply
	// with no command pending).
	ErrMismatch = errors.New("resp: reply does not fit the command")
)

// errIncomplete means the buffer ends inside the reply: read more.
var errIncomplete = errors.New("resp: incomplete reply")

// maxLine bounds a header or error line (type byte to CRLF). Redis's
// longest error texts are a few hundred bytes.
const maxLine = 4 << 10

// shape is what a command's reply may be besides an error reply.
type shape struct {
	array    bool // an array of bulks (MGET, LRANGE); else one bulk (GET)
	n        int  // array: the element count expected (exact) or allowed (at most)
	exact    bool // array: exactly n elements (MGET); else 0..n (LRANGE)
	nilElems bool // array: nil bulks allowed as elements (MGET's missing keys)
}

// replyKind is the kind of a decoded top-level reply.
type replyKind uint8

const (
	kindBulk  replyKind = iota + 1 // one bulk: reply.val (val.nil for a nil bulk)
	kindArray                      // an array of bulks: decoder.elems
	kindError                      // an error reply: reply.val is its text
)

// span is a slice of the input buffer: b[off:end]; nil marks a nil bulk.
type span struct {
	off, end int
	nil      bool
}

// reply is one decoded reply: its kind, its size in bytes, and for a bulk
// or an error its bytes. An array's elements are in decoder.elems.
type reply struct {
	kind replyKind
	size int
	val  span
}

// decoder decodes RESP2 replies of an expected shape from a byte buffer in
// place: spans point into the buffer, nothing is copied, and elems is
// reused reply after reply (no allocation once grown). It checks every
// length against max before trusting it, so a replica cannot make the
// client allocate or wait for more than max bytes per reply.
type decoder struct {
	max   int
	elems []span
}

// decode decodes the reply at the start of b. It returns errIncomplete with
// need, the buffered size at which trying again can make progress, when b
// ends inside the reply; ErrProtocol, ErrReplyTooLarge or ErrMismatch for
// a reply that must drop the connection.
func (d *decoder) decode(b []byte, sh shape) (r reply, need int, err error) {
	if len(b) == 0 {
		return reply{}, 1, errIncomplete
	}
	switch b[0] {
	case '-':
		end, next, err := d.line(b, 0)
		if err != nil {
			return reply{}, next, err
		}
		return reply{kind: kindError, size: next, val: span{off: 1, end: end}}, 0, nil
	case '$':
		if sh.array {
			return reply{}, 0, ErrMismatch
		}
		v, next, err := d.bulk(b, 0)
		if err != nil {
			return reply{}, next, err
		}
		return reply{kind: kindBulk, size: next, val: v}, 0, nil
	case '*':
		if !sh.array {
			return reply{}, 0, ErrMismatch
		}
		return d.array(b, sh)
	case '+', ':':
		return reply{}, 0, ErrMismatch
	}
	return reply{}, 0, ErrProtocol
}

// array decodes an array of bulks at the start of b into d.elems.
func (d *decoder) array(b []byte, sh shape) (reply, int, error) {
	end, off, err := d.line(b, 0)
	if err != nil {
		return reply{}, off, err
	}
	n, ok := parseLen(b[1:end])
	switch {
	case !ok:
		return reply{}, 0, ErrProtocol
	case n < 0: // a nil array answers none of our commands
		return reply{}, 0, ErrMismatch
	case n > sh.n || sh.exact && n != sh.n:
		return reply{}, 0, ErrMismatch
	case n*5 > d.max: // each element takes at least 5 bytes ("$-1\r\n")
		return reply{}, 0, ErrReplyTooLarge
	}
	d.elems = d.elems[:0]
	for range n {
		if off >= len(b) {
			return reply{}, off + 1, errIncomplete
		}
		if b[off] != '$' {
			switch b[off] {
			case '-', '+', ':', '*':
				return reply{}, 0, ErrMismatch
			}
			return reply{}, 0, ErrProtocol
		}
		v, next, err := d.bulk(b, off)
		if err != nil {
			return reply{}, next, err
		}
		if v.nil && !sh.nilElems {
			return reply{}, 0, ErrMismatch
		}
		d.elems = append(d.elems, v)
		off = next
	}
	return reply{kind: kindArray, size: off}, 0, nil
}

// bulk decodes a bulk string starting at b[off] == '$' and returns its
// span and the offset after it.
func (d *decoder) bulk(b []byte, off int) (span, int, error) {
	end, next, err := d.line(b, off)
	if err != nil {
		return span{}, next, err
	}
	n, ok := parseLen(b[off+1 : end])
	switch {
	case !ok:
		return span{}, 0, ErrProtocol
	case n == -1:
		return span{nil: true}, next, nil
	case n < -1:
		return span{}, 0, ErrProtocol
	case n > d.max || next+n+2 > d.max:
		return span{}, 0, ErrReplyTooLarge
	}
	stop := next + n
	if len(b) < stop+2 {
		return span{}, stop + 2, errIncomplete
	}
	if b[stop] != '\r' || b[stop+1] != '\n' {
		return span{}, 0, ErrProtocol
	}
	return span{off: next, end: stop}, stop + 2, nil
}

// line finds the CRLF ending the line that starts at b[off] (its type
// byte) and returns the index of the CR and the offset after the LF. A
// line longer than maxLine, or one that runs past the reply limit, is an
// error; a bare LF is malformed.
func (d *decoder) line(b []byte, off int) (cr, next int, err error) {
	limit := min(len(b), off+maxLine)
	i := bytes.IndexByte(b[off:limit], '\n')
	if i < 0 {
		if limit-off >= maxLine {
			return 0, 0, ErrProtocol
		}
		if len(b) >= d.max {
			return 0, 0, ErrReplyTooLarge
		}
		return 0, len(b) + 1, errIncomplete
	}
	lf := off + i
	if lf < off+2 || b[lf-1] != '\r' {
		return 0, 0, ErrProtocol
	}
	if lf+1 > d.max {
		return 0, 0, ErrReplyTooLarge
	}
	return lf - 1, lf + 1, nil
}

// parseLen parses a RESP length: an optional '-' and 1 to 10 decimal
// digits (RESP lengths are below 2^32; longer numbers are malformed, which
// also keeps the arithmetic from overflowing).
func parseLen(b []byte) (int, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n, true
	}
	return n, true
}
