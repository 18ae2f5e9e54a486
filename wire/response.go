package wire

// Response header offsets.
const (
	rspCommand = 4
	rspSeq     = 8
	rspAsyncID = 16
	rspResult  = 24
	rspFlags   = 28
	rspAttempt = 30
	rspPacket  = 32
	rspCount   = 36
	rspCursor  = 40
	// ResponseHeaderSize is the size of a response header in bytes.
	ResponseHeaderSize = 48
	// recordMin is a record's fixed part: tag, result, key length, value length.
	recordMin = 20

	flagHaveMore = 1 << 0
)

// ResponseHeader holds the header fields of a response for ResponseBuilder.
type ResponseHeader struct {
	Command  Command // echo of the request's command
	Seq      uint64  // echo of the request's sequence number
	AsyncID  uint64  // echo of the request's async ID
	Result   int32   // 0 = success; negative = error code
	HaveMore bool    // more packets follow for this request
	Attempt  uint16  // echo of the attempt this packet answers
	Packet   uint32  // 0-based packet index within the attempt's stream
	// Cursor is, for index reads, the stream position just after this
	// packet's records (the position to resume from); 0 for other reads.
	Cursor uint64
}

// ResponseBuilder appends one response frame to a caller's buffer without
// allocating (beyond growing that buffer). The zero value is ready after
// Start. A proxy uses it as
//
//	var rb wire.ResponseBuilder
//	rb.Start(buf[:0], hdr)
//	rb.AddRecord(tag, 0, key, value) // any number of times
//	frame := rb.Bytes()
type ResponseBuilder struct {
	b     []byte
	start int // offset of this frame's header in b
	n     uint32
}

// Start begins a response frame at the end of dst (which may hold earlier
// frames; they are kept).
func (rb *ResponseBuilder) Start(dst []byte, h ResponseHeader) {
	rb.start = len(dst)
	rb.n = 0
	dst = append(dst, magic0, magic1, Version, typeResponse)
	dst = le.AppendUint32(dst, uint32(h.Command))
	dst = le.AppendUint64(dst, h.Seq)
	dst = le.AppendUint64(dst, h.AsyncID)
	dst = le.AppendUint32(dst, uint32(h.Result))
	var flags byte
	if h.HaveMore {
		flags |= flagHaveMore
	}
	dst = append(dst, flags, 0)
	dst = le.AppendUint16(dst, h.Attempt)
	dst = le.AppendUint32(dst, h.Packet)
	dst = le.AppendUint32(dst, 0)
	rb.b = le.AppendUint64(dst, h.Cursor)
}

// AddRecord appends one record: tag is the answered key's index for a batch
// read, the record's stream position for an index read, 0 otherwise; result
// is the record's own code (0 = found). key and value are copied. It returns
// ErrTooLarge, adding nothing, when the frame would exceed MaxFrameSize.
func (rb *ResponseBuilder) AddRecord(tag uint64, result int32, key, value []byte) error {
	if n := len(rb.b) - rb.start + recordMin + len(key) + len(value); n > MaxFrameSize {
		return tooLarge("frame", n, MaxFrameSize)
	}
	rb.b = le.AppendUint64(rb.b, tag)
	rb.b = le.AppendUint32(rb.b, uint32(result))
	rb.b = appendBytes(rb.b, key)
	rb.b = appendBytes(rb.b, value)
	rb.n++
	le.PutUint32(rb.b[rb.start+rspCount:], rb.n)
	return nil
}

// Len returns the size in bytes of the frame being built.
func (rb *ResponseBuilder) Len() int { return len(rb.b) - rb.start }

// Records returns the number of records added since Start.
func (rb *ResponseBuilder) Records() int { return int(rb.n) }

// Bytes returns the buffer passed to Start extended by the frame. The
// builder keeps no other reference that outlives the next Start.
func (rb *ResponseBuilder) Bytes() []byte { return rb.b }

// Frame returns only the frame being built (a view into Bytes).
func (rb *ResponseBuilder) Frame() []byte { return rb.b[rb.start:] }

// AppendResponse appends a response with no records (an error answer, or
// an empty last packet) to dst.
func AppendResponse(dst []byte, h ResponseHeader) []byte {
	var rb ResponseBuilder
	rb.Start(dst, h)
	return rb.b
}

// Response is a read-only view of a checked response frame. It points into
// the frame passed to ParseResponse and is valid while those bytes are
// unchanged. The zero Response is not valid; obtain one from ParseResponse.
type Response struct {
	b []byte
}

// ParseResponse checks frame as a response (header, every record's lengths,
// no trailing bytes) and returns a view over it, copying nothing. Errors:
// ErrShortFrame, ErrBadMagic, ErrBadVersion, ErrFrameType, ErrCountRange (a
// record count the frame cannot hold), ErrTrailingBytes, ErrTooLarge.
func ParseResponse(frame []byte) (Response, error) {
	if err := checkHeader(frame, typeResponse, ResponseHeaderSize); err != nil {
		return Response{}, err
	}
	n := le.Uint32(frame[rspCount:])
	if uint64(n)*recordMin > uint64(len(frame)-ResponseHeaderSize) {
		return Response{}, ErrCountRange
	}
	off := ResponseHeaderSize
	var err error
	for i := uint32(0); i < n; i++ {
		if len(frame)-off < recordMin {
			return Response{}, ErrShortFrame
		}
		if off, err = consumeBytes(frame, off+12); err != nil {
			return Response{}, err
		}
		if off, err = consumeBytes(frame, off); err != nil {
			return Response{}, err
		}
	}
	if off != len(frame) {
		return Response{}, ErrTrailingBytes
	}
	return Response{b: frame}, nil
}

// PeekResponseSeq returns the sequence number of a response frame that
// ParseResponse rejected, when its header gets that far (magic, version and
// type right, at least 16 bytes), so that a client can count the bad packet
// against its request's zone. ok is false otherwise.
func PeekResponseSeq(frame []byte) (seq uint64, ok bool) {
	if len(frame) < rspSeq+8 || frame[0] != magic0 || frame[1] != magic1 || frame[2] != Version || frame[3] != typeResponse {
		return 0, false
	}
	return le.Uint64(frame[rspSeq:]), true
}

// Frame returns the whole frame the view was parsed from.
func (r Response) Frame() []byte { return r.b }

// Command returns the echoed command.
func (r Response) Command() Command { return Command(le.Uint32(r.b[rspCommand:])) }

// Seq returns the echoed sequence number.
func (r Response) Seq() uint64 { return le.Uint64(r.b[rspSeq:]) }

// AsyncID returns the echoed async ID.
func (r Response) AsyncID() uint64 { return le.Uint64(r.b[rspAsyncID:]) }

// Result returns the result code: 0 for success, negative for an error.
func (r Response) Result() int32 { return int32(le.Uint32(r.b[rspResult:])) }

// HaveMore reports whether more packets follow for this request.
func (r Response) HaveMore() bool { return r.b[rspFlags]&flagHaveMore != 0 }

// Attempt returns the attempt number this packet answers.
func (r Response) Attempt() uint16 { return le.Uint16(r.b[rspAttempt:]) }

// Packet returns the packet's index within its attempt's stream.
func (r Response) Packet() uint32 { return le.Uint32(r.b[rspPacket:]) }

// Cursor returns, for index reads, the stream position just after this
// packet's records: with HaveMore unset it is the stream's end. 0 for other
// reads.
func (r Response) Cursor() uint64 { return le.Uint64(r.b[rspCursor:]) }

// RecordCount returns the number of records in the packet.
func (r Response) RecordCount() int { return int(le.Uint32(r.b[rspCount:])) }

// Scan returns a scanner over the packet's records, the fast way to read
// them: Next moves to the next record, and the accessors read it in
// place. It allocates nothing.
func (r Response) Scan() RecordScanner {
	return RecordScanner{b: r.b, next: ResponseHeaderSize, left: le.Uint32(r.b[rspCount:])}
}

// Records returns an iterator over the packet's records that hands out
// each as a Record value. It allocates nothing; Scan is faster
// (BenchmarkIterateRecords).
func (r Response) Records() RecordIter { return RecordIter{s: r.Scan()} }

// Record is one record of a response: views into the frame.
type Record struct {
	// Tag is the answered key's index (batch reads), the record's stream
	// position (index reads), or 0.
	Tag uint64
	// Result is the record's own code (0 = found).
	Result int32
	// Key and Value are views into the frame.
	Key, Value []byte
}

// RecordScanner walks the records of a checked response in place:
//
//	s := rsp.Scan()
//	for s.Next() {
//		use(s.Tag(), s.Result(), s.Key(), s.Value())
//	}
//
// Next and the accessors are small enough for the compiler to inline, and
// a record's fields are read only when asked for, which measured several
// times faster than returning a Record per step. Declare the scanner
// before the loop as above: declared in the for statement
// (for s := rsp.Scan(); s.Next();), it is a new variable each iteration
// since Go 1.22, and copying it costs more than the scan
// (BenchmarkIterateRecords). The slices returned are views into the frame,
// valid while its bytes are unchanged. The zero RecordScanner has no
// records.
type RecordScanner struct {
	b      []byte
	off    int // the current record's offset
	kn, vn int // its key and value lengths
	next   int // the next record's offset
	left   uint32
}

// Next moves to the next record and reports whether there is one. The
// frame was checked by ParseResponse, so the lengths it reads are in
// bounds.
func (s *RecordScanner) Next() bool {
	if s.left == 0 {
		return false
	}
	s.left--
	s.off = s.next
	b := s.b[s.off:]
	s.kn = int(le.Uint32(b[12:16]))
	s.vn = int(le.Uint32(b[16+s.kn:]))
	s.next = s.off + recordMin + s.kn + s.vn
	return true
}

// Tag returns the current record's tag: the answered key's index (batch
// reads), the record's stream position (index reads), or 0.
func (s *RecordScanner) Tag() uint64 { return le.Uint64(s.b[s.off:]) }

// Result returns the current record's own code (0 = found).
func (s *RecordScanner) Result() int32 { return int32(le.Uint32(s.b[s.off+8:])) }

// Key returns the current record's key, a view into the frame.
func (s *RecordScanner) Key() []byte {
	k := s.off + 16
	return s.b[k : k+s.kn : k+s.kn]
}

// Value returns the current record's value, a view into the frame.
func (s *RecordScanner) Value() []byte {
	v := s.off + recordMin + s.kn
	return s.b[v : v+s.vn : v+s.vn]
}

// Record returns the current record as a Record value.
func (s *RecordScanner) Record() Record {
	return Record{Tag: s.Tag(), Result: s.Result(), Key: s.Key(), Value: s.Value()}
}

// Len returns the number of records Next has yet to move to.
func (s *RecordScanner) Len() int { return int(s.left) }

// RecordIter iterates over the records of a checked response, a Record
// value at a time; see RecordScanner for the faster form.
type RecordIter struct {
	s RecordScanner
}

// Next returns the next record, or ok == false after the last one.
func (it *RecordIter) Next() (rec Record, ok bool) {
	if !it.s.Next() {
		return Record{}, false
	}
	return it.s.Record(), true
}

// Len returns the number of records Next has yet to return.
func (it *RecordIter) Len() int { return it.s.Len() }
