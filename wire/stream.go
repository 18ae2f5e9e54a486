package wire

import (
	"errors"
	"io"
)

// StreamPrefixSize is the size in bytes of the length prefix that precedes
// every frame on a byte stream.
const StreamPrefixSize = 4

// AppendStreamFrame appends frame to dst preceded by its 4-byte
// little-endian length, ready to write to a stream. It returns dst
// unchanged and ErrTooLarge for a frame over MaxFrameSize.
func AppendStreamFrame(dst, frame []byte) ([]byte, error) {
	if len(frame) > MaxFrameSize {
		return dst, tooLarge("frame", len(frame), MaxFrameSize)
	}
	dst = le.AppendUint32(dst, uint32(len(frame)))
	return append(dst, frame...), nil
}

// BeginStreamFrame reserves a length prefix at the end of dst, so that a
// frame can be built in place after it (no copy); at is where the prefix
// starts. Close it with EndStreamFrame.
func BeginStreamFrame(dst []byte) (out []byte, at int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// EndStreamFrame writes into buf[at:] the length of the frame built since
// the BeginStreamFrame that returned at. It returns ErrTooLarge for a frame
// over MaxFrameSize and ErrShortFrame for an at that is not inside buf.
func EndStreamFrame(buf []byte, at int) error {
	if at < 0 || len(buf)-at < StreamPrefixSize {
		return ErrShortFrame
	}
	n := len(buf) - at - StreamPrefixSize
	if n > MaxFrameSize {
		return tooLarge("frame", n, MaxFrameSize)
	}
	le.PutUint32(buf[at:], uint32(n))
	return nil
}

// Reader reads length-prefixed frames from a byte stream into one reused
// buffer. It is not safe for concurrent use; a transport runs one per
// connection on the connection's reading goroutine.
type Reader struct {
	r          io.Reader
	max        int
	buf        []byte
	start, end int // buffered, unconsumed bytes are buf[start:end]
	err        error
}

// readerBufSize is the initial buffer size in bytes: large enough for the
// many small packets of a busy connection to arrive in few reads.
const readerBufSize = 64 << 10

// NewReader returns a Reader over r that accepts frames of at most max
// bytes; max <= 0 or above MaxFrameSize means MaxFrameSize. The buffer
// starts at 64 KiB and grows with the bytes that arrive, never with the
// length a prefix declares: it doubles (up to the frame's length) only
// when it is full of one frame's unconsumed bytes, so a peer that sends a
// 16 MiB prefix and no body costs no more memory than one that sends
// nothing (SPEC R22). A frame of n bytes that does arrive allocates less
// than 4n in all on its way up, and the buffer keeps the size of the
// largest frame seen.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 || max > MaxFrameSize {
		max = MaxFrameSize
	}
	return &Reader{r: r, max: max, buf: make([]byte, readerBufSize)}
}

// Next returns the next frame, without its length prefix. The frame is a
// view into the Reader's buffer, valid until the next call to Next. Errors:
// io.EOF at a clean end of stream (between frames), io.ErrUnexpectedEOF when
// the stream ends inside a frame, ErrTooLarge for a length above the
// maximum (the stream cannot be resynchronised after it: every later call
// returns the same error, as after io.EOF), or the underlying reader's
// error, after which Next may be called again (bytes read so far are kept).
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if err := r.fill(StreamPrefixSize); err != nil {
		return nil, err
	}
	n := int(le.Uint32(r.buf[r.start:]))
	if n > r.max {
		e := &SizeError{What: streamFrame, Size: n, Limit: r.max}
		copy(e.Prefix[:], r.buf[r.start:])
		r.err = e
		return nil, r.err
	}
	if err := r.fill(StreamPrefixSize + n); err != nil {
		return nil, err
	}
	frame := r.buf[r.start+StreamPrefixSize : r.start+StreamPrefixSize+n : r.start+StreamPrefixSize+n]
	r.start += StreamPrefixSize + n
	return frame, nil
}

// Buffered returns the number of bytes read from the stream and not yet
// returned as frames.
func (r *Reader) Buffered() int { return r.end - r.start }

// fill makes at least need bytes available at buf[start:], reading from
// the stream only into room the buffer has: see makeRoom for how it grows.
func (r *Reader) fill(need int) error {
	for r.end-r.start < need {
		if r.end == len(r.buf) {
			r.makeRoom(need)
		}
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if r.end-r.start >= need {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if r.end == r.start {
					r.err = io.EOF
				} else {
					r.err = io.ErrUnexpectedEOF
				}
				return r.err
			}
			// Other errors (a read deadline, say) are the caller's to
			// judge; what was read stays buffered for the next call.
			return err
		}
	}
	return nil
}

// makeRoom makes room after buf[end], which is at the end of buf, for a
// frame that needs need bytes from start. Consumed bytes at the front go
// first (the unconsumed ones move down); only a buffer full of unconsumed
// bytes grows, to at most twice its size, so the buffer never outgrows
// twice what has actually arrived. need > end-start here.
func (r *Reader) makeRoom(need int) {
	if r.start > 0 {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
		return
	}
	nb := make([]byte, min(need, 2*len(r.buf)))
	r.end = copy(nb, r.buf[:r.end])
	r.buf = nb
}
