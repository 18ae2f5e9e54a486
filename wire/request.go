package wire

import (
	"encoding/binary"
	"errors"
)

// Errors returned by the parsers and builders. Each is a sentinel for
// errors.Is; the codec never panics on any input (SPEC R18, §6).
var (
	// ErrShortFrame: the frame ends before a field or a length it announces.
	ErrShortFrame = errors.New("wire: short frame")
	// ErrBadMagic: the frame does not start with "RR".
	ErrBadMagic = errors.New("wire: bad magic")
	// ErrBadVersion: the frame's version is not Version.
	ErrBadVersion = errors.New("wire: unsupported version")
	// ErrFrameType: a response where a request was expected, or the reverse.
	ErrFrameType = errors.New("wire: wrong frame type")
	// ErrUnknownCommand: the command has no body kind this codec knows.
	ErrUnknownCommand = errors.New("wire: unknown command")
	// ErrWrongBody: a builder or rebuild was asked for a body its command does not have.
	ErrWrongBody = errors.New("wire: command does not have this body kind")
	// ErrCountRange: a key or record count is zero where one is needed, above
	// MaxBatchKeys, or larger than the frame could hold.
	ErrCountRange = errors.New("wire: count out of range")
	// ErrTrailingBytes: bytes follow the last field of the body.
	ErrTrailingBytes = errors.New("wire: trailing bytes after body")
	// ErrTooLarge: a frame, field or table name exceeds its maximum size.
	// The error returned is a *SizeError that matches it with errors.Is and
	// says what, how large and the limit.
	ErrTooLarge = errors.New("wire: too large")
	// ErrPosition: a resume position lies before the original request's start,
	// or at or past its limit (nothing is left to ask for).
	ErrPosition = errors.New("wire: resume position out of range")
	// ErrNothingMissing: a partial rebuild found every key answered.
	ErrNothingMissing = errors.New("wire: no key is missing")
)

const (
	// Version is the protocol version this package reads and writes.
	Version = 1
	// MaxFrameSize is the default maximum frame size in bytes (16 MiB): the
	// stream Reader's limit and the builders' limit.
	MaxFrameSize = 16 << 20
	// MaxBatchKeys is the maximum number of keys in one batch request.
	MaxBatchKeys = 1 << 16
	// MaxTableName is the maximum table name length in bytes.
	MaxTableName = 255

	magic0, magic1 = 'R', 'R'
	typeRequest    = 1
	typeResponse   = 2

	// Request header offsets.
	reqCommand  = 4
	reqFlags    = 8
	reqSeq      = 12
	reqAsyncID  = 20
	reqAttempt  = 28
	reqAppID    = 30
	reqZoneID   = 34
	reqTableLen = 38
	// RequestHeaderSize is the fixed part of a request header in bytes; the
	// table name follows it.
	RequestHeaderSize = 39

	batchEntryMin = 8 // index + key length
)

// Request flags.
const (
	// FlagResend marks an attempt that re-sends an earlier one (read retry):
	// proxies and their logs can tell a hedged re-send from a first send.
	FlagResend uint32 = 1 << 0
)

var le = binary.LittleEndian

// RequestHeader holds the header fields of a request for the Append*
// builders. Table is appended as is (at most MaxTableName bytes).
type RequestHeader struct {
	Command Command // decides the body the builder must be the one for
	Flags   uint32  // FlagResend and future flags
	Seq     uint64  // sequence number: the client's key for the request's context
	AsyncID uint64  // the caller's async ID, echoed back in every response
	Attempt uint16  // 0 for the first send
	AppID   uint32  // the zone's application
	ZoneID  uint32  // the zone
	Table   string  // table name, at most MaxTableName bytes
}

func appendRequestHeader(dst []byte, h *RequestHeader, want BodyKind) ([]byte, error) {
	if k := h.Command.Body(); k != want {
		if k == BodyUnknown {
			return dst, ErrUnknownCommand
		}
		return dst, ErrWrongBody
	}
	if len(h.Table) > MaxTableName {
		return dst, tooLarge("table name", len(h.Table), MaxTableName)
	}
	dst = append(dst, magic0, magic1, Version, typeRequest)
	dst = le.AppendUint32(dst, uint32(h.Command))
	dst = le.AppendUint32(dst, h.Flags)
	dst = le.AppendUint64(dst, h.Seq)
	dst = le.AppendUint64(dst, h.AsyncID)
	dst = le.AppendUint16(dst, h.Attempt)
	dst = le.AppendUint32(dst, h.AppID)
	dst = le.AppendUint32(dst, h.ZoneID)
	dst = append(dst, byte(len(h.Table)))
	dst = append(dst, h.Table...)
	return dst, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = le.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// checkSize reports ErrTooLarge when a frame of n bytes would exceed MaxFrameSize.
func checkSize(n int) error {
	if n > MaxFrameSize {
		return tooLarge("frame", n, MaxFrameSize)
	}
	return nil
}

// AppendKeyRequest appends a simple-read request (BodyKey: commands 7, 103,
// 15) for key to dst and returns the extended slice. On error dst is
// returned unchanged: ErrUnknownCommand or ErrWrongBody for another command,
// ErrTooLarge for a table name over MaxTableName or a frame over MaxFrameSize.
func AppendKeyRequest(dst []byte, h RequestHeader, key []byte) ([]byte, error) {
	if err := checkSize(RequestHeaderSize + len(h.Table) + 4 + len(key)); err != nil {
		return dst, err
	}
	out, err := appendRequestHeader(dst, &h, BodyKey)
	if err != nil {
		return dst, err
	}
	return appendBytes(out, key), nil
}

// AppendWriteRequest appends a write request (BodyKeyValue: commands 1, 3,
// 5, 9) to dst. Errors as AppendKeyRequest; dst is unchanged on error.
func AppendWriteRequest(dst []byte, h RequestHeader, key, value []byte) ([]byte, error) {
	if err := checkSize(RequestHeaderSize + len(h.Table) + 8 + len(key) + len(value)); err != nil {
		return dst, err
	}
	out, err := appendRequestHeader(dst, &h, BodyKeyValue)
	if err != nil {
		return dst, err
	}
	out = appendBytes(out, key)
	return appendBytes(out, value), nil
}

// AppendIndexRequest appends an index read (BodyIndex: commands 25, 11) of
// partKey to dst, asking for records from position pos on, at most limit of
// them (0 = no limit). Errors as AppendKeyRequest; dst is unchanged on error.
func AppendIndexRequest(dst []byte, h RequestHeader, partKey []byte, pos uint64, limit uint32) ([]byte, error) {
	if err := checkSize(RequestHeaderSize + len(h.Table) + 16 + len(partKey)); err != nil {
		return dst, err
	}
	out, err := appendRequestHeader(dst, &h, BodyIndex)
	if err != nil {
		return dst, err
	}
	out = appendBytes(out, partKey)
	out = le.AppendUint64(out, pos)
	return le.AppendUint32(out, limit), nil
}

// AppendBatchRequest appends a batch read (BodyBatch: commands 23, 117, 153)
// of keys to dst; key i gets index i. keys is only read. Errors:
// ErrCountRange for no keys or more than MaxBatchKeys, and those of
// AppendKeyRequest; dst is unchanged on error.
func AppendBatchRequest(dst []byte, h RequestHeader, keys [][]byte) ([]byte, error) {
	if len(keys) == 0 || len(keys) > MaxBatchKeys {
		return dst, ErrCountRange
	}
	size := RequestHeaderSize + len(h.Table) + 4
	for _, k := range keys {
		size += batchEntryMin + len(k)
	}
	if err := checkSize(size); err != nil {
		return dst, err
	}
	out, err := appendRequestHeader(dst, &h, BodyBatch)
	if err != nil {
		return dst, err
	}
	out = le.AppendUint32(out, uint32(len(keys)))
	for i, k := range keys {
		out = le.AppendUint32(out, uint32(i))
		out = appendBytes(out, k)
	}
	return out, nil
}

// Request is a read-only view of a checked request frame. It points into the
// frame passed to ParseRequest and is valid while those bytes are unchanged.
// The zero Request is not valid; obtain one from ParseRequest.
type Request struct {
	b    []byte
	body int // offset of the body
}

// ParseRequest checks frame as a request (header, body by command, no
// trailing bytes) and returns a view over it, copying nothing. Errors:
// ErrShortFrame, ErrBadMagic, ErrBadVersion, ErrFrameType, ErrUnknownCommand,
// ErrCountRange, ErrTrailingBytes, ErrTooLarge (frame over MaxFrameSize).
func ParseRequest(frame []byte) (Request, error) {
	body, err := checkRequestHeader(frame)
	if err != nil {
		return Request{}, err
	}
	end, err := walkRequestBody(frame, body, Command(le.Uint32(frame[reqCommand:])).Body())
	if err != nil {
		return Request{}, err
	}
	if end != len(frame) {
		return Request{}, ErrTrailingBytes
	}
	return Request{b: frame, body: body}, nil
}

func checkHeader(frame []byte, typ byte, size int) error {
	if len(frame) > MaxFrameSize {
		return tooLarge("frame", len(frame), MaxFrameSize)
	}
	if len(frame) < 4 {
		return ErrShortFrame
	}
	if frame[0] != magic0 || frame[1] != magic1 {
		return ErrBadMagic
	}
	if frame[2] != Version {
		return ErrBadVersion
	}
	if frame[3] != typ {
		return ErrFrameType
	}
	if len(frame) < size {
		return ErrShortFrame
	}
	return nil
}

// checkRequestHeader checks the fixed header and the table name and returns
// the body offset.
func checkRequestHeader(frame []byte) (int, error) {
	if err := checkHeader(frame, typeRequest, RequestHeaderSize); err != nil {
		return 0, err
	}
	body := RequestHeaderSize + int(frame[reqTableLen])
	if len(frame) < body {
		return 0, ErrShortFrame
	}
	return body, nil
}

// consumeBytes reads a uint32 length and that many bytes at off, returning
// the offset after them.
func consumeBytes(b []byte, off int) (int, error) {
	if len(b)-off < 4 {
		return 0, ErrShortFrame
	}
	n := le.Uint32(b[off:])
	off += 4
	if uint64(n) > uint64(len(b)-off) {
		return 0, ErrShortFrame
	}
	return off + int(n), nil
}

// walkRequestBody checks the body at off and returns where it ends.
func walkRequestBody(b []byte, off int, kind BodyKind) (int, error) {
	var err error
	switch kind {
	case BodyKey:
		return consumeBytes(b, off)
	case BodyKeyValue:
		if off, err = consumeBytes(b, off); err != nil {
			return 0, err
		}
		return consumeBytes(b, off)
	case BodyIndex:
		if off, err = consumeBytes(b, off); err != nil {
			return 0, err
		}
		if len(b)-off < 12 {
			return 0, ErrShortFrame
		}
		return off + 12, nil
	case BodyBatch:
		if len(b)-off < 4 {
			return 0, ErrShortFrame
		}
		n := le.Uint32(b[off:])
		off += 4
		if n == 0 || n > MaxBatchKeys || uint64(n)*batchEntryMin > uint64(len(b)-off) {
			return 0, ErrCountRange
		}
		for i := uint32(0); i < n; i++ {
			if len(b)-off < 4 {
				return 0, ErrShortFrame
			}
			if off, err = consumeBytes(b, off+4); err != nil {
				return 0, err
			}
		}
		return off, nil
	}
	return 0, ErrUnknownCommand
}

// Frame returns the whole frame the view was parsed from.
func (r Request) Frame() []byte { return r.b }

// Command returns the request's command.
func (r Request) Command() Command { return Command(le.Uint32(r.b[reqCommand:])) }

// Flags returns the request flags (FlagResend, ...).
func (r Request) Flags() uint32 { return le.Uint32(r.b[reqFlags:]) }

// Seq returns the sequence number.
func (r Request) Seq() uint64 { return le.Uint64(r.b[reqSeq:]) }

// AsyncID returns the caller's async ID.
func (r Request) AsyncID() uint64 { return le.Uint64(r.b[reqAsyncID:]) }

// Attempt returns the attempt number: 0 for the first send.
func (r Request) Attempt() uint16 { return le.Uint16(r.b[reqAttempt:]) }

// AppID returns the zone's AppID.
func (r Request) AppID() uint32 { return le.Uint32(r.b[reqAppID:]) }

// ZoneID returns the zone's ZoneID.
func (r Request) ZoneID() uint32 { return le.Uint32(r.b[reqZoneID:]) }

// Table returns the table name bytes, a view into the frame.
func (r Request) Table() []byte { return r.b[RequestHeaderSize:r.body] }

// Body returns the body kind (from the command).
func (r Request) Body() BodyKind { return r.Command().Body() }

func (r Request) bytesAt(off int) ([]byte, int) {
	n := int(le.Uint32(r.b[off:]))
	return r.b[off+4 : off+4+n], off + 4 + n
}

// Key returns the key of a simple read or a write, or the part key of an
// index read; nil for a batch read. A view into the frame.
func (r Request) Key() []byte {
	switch r.Body() {
	case BodyKey, BodyKeyValue, BodyIndex:
		k, _ := r.bytesAt(r.body)
		return k
	}
	return nil
}

// Value returns the value of a write; nil for any other body kind. A view
// into the frame.
func (r Request) Value() []byte {
	if r.Body() != BodyKeyValue {
		return nil
	}
	_, off := r.bytesAt(r.body)
	v, _ := r.bytesAt(off)
	return v
}

// Position returns an index read's resume position (the first record
// position asked for); 0 for other body kinds.
func (r Request) Position() uint64 {
	if r.Body() != BodyIndex {
		return 0
	}
	_, off := r.bytesAt(r.body)
	return le.Uint64(r.b[off:])
}

// Limit returns an index read's record limit (0 = no limit); 0 for other
// body kinds.
func (r Request) Limit() uint32 {
	if r.Body() != BodyIndex {
		return 0
	}
	_, off := r.bytesAt(r.body)
	return le.Uint32(r.b[off+8:])
}

// KeyCount returns the number of keys in a batch read; 0 for other body
// kinds.
func (r Request) KeyCount() int {
	if r.Body() != BodyBatch {
		return 0
	}
	return int(le.Uint32(r.b[r.body:]))
}

// Keys returns an iterator over a batch read's keys (empty for other body
// kinds). It allocates nothing.
func (r Request) Keys() KeyIter {
	if r.Body() != BodyBatch {
		return KeyIter{}
	}
	return KeyIter{b: r.b, off: r.body + 4, left: le.Uint32(r.b[r.body:])}
}

// KeyIter iterates over the keys of a checked batch request. Use it as
//
//	for it := req.Keys(); ; {
//		index, key, ok := it.Next()
//		if !ok { break }
//		...
//	}
type KeyIter struct {
	b    []byte
	off  int
	left uint32
}

// Next returns the next key and its original index (the position of the key
// in the caller's first request), or ok == false after the last one. key is
// a view into the frame.
func (it *KeyIter) Next() (index uint32, key []byte, ok bool) {
	if it.left == 0 {
		return 0, nil, false
	}
	it.left--
	index = le.Uint32(it.b[it.off:])
	n := int(le.Uint32(it.b[it.off+4:]))
	key = it.b[it.off+8 : it.off+8+n]
	it.off += 8 + n
	return index, key, true
}

// Len returns the number of keys Next has yet to return.
func (it *KeyIter) Len() int { return int(it.left) }

// PeekRequestAsyncID returns the async ID of a request frame that was
// packed or checked before (the engine reads it from the copy it keeps
// rather than store it twice), and ok false when the frame is too short or
// is not a request.
func PeekRequestAsyncID(frame []byte) (asyncID uint64, ok bool) {
	if len(frame) < reqAsyncID+8 || frame[0] != magic0 || frame[1] != magic1 || frame[3] != typeRequest {
		return 0, false
	}
	return le.Uint64(frame[reqAsyncID:]), true
}
