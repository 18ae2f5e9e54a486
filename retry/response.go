package retry

import "github.com/readretry/readretry/wire"

// Response is one response handed to the caller by RecvResponse: a packet
// from a proxy, or a result the engine made (ResultReadRetryTimeout,
// ResultWaitRspTimeout). It is a view: it, its user buffer and its records
// point into the client's and the transport's memory and are valid only
// until the next call to RecvResponse (or Close) on that client. Copy what
// must outlive that.
type Response struct {
	zone     Zone
	seq      uint64
	asyncID  uint64
	cmd      wire.Command
	result   int32
	haveMore bool
	attempts int
	userBuf  []byte
	pkt      wire.Response
	hasPkt   bool
	keep     []bool // nil: every record of pkt; else keep[i] says whether record i is delivered
	nrec     int
	waiter   uint32 // the Do call the response is for (0: the asynchronous API)
}

// Zone returns the zone the request was sent to.
func (r *Response) Zone() Zone { return r.zone }

// Seq returns the request's sequence number, as Send returned it.
func (r *Response) Seq() uint64 { return r.seq }

// AsyncID returns the caller's async ID, as given to Send (SPEC R9, R12).
func (r *Response) AsyncID() uint64 { return r.asyncID }

// Command returns the request's command.
func (r *Response) Command() wire.Command { return r.cmd }

// Result returns the result code: ResultOK, the proxy's code, or one the
// engine made: ResultReadRetryTimeout (SPEC R9) or ResultWaitRspTimeout.
func (r *Response) Result() int32 { return r.result }

// HaveMore reports whether more responses follow for this request. Exactly
// one response per request has it unset: the final result (SPEC R12). For a
// complex read with read retry the engine sets it from what has been
// accepted (every key answered, or the stream's end reached in order), not
// from the packet, since re-sent attempts end their own streams.
func (r *Response) HaveMore() bool { return r.haveMore }

// Attempts returns how many packets the request has sent so far: 1 plus the
// re-sends (SPEC R6).
func (r *Response) Attempts() int { return r.attempts }

// UserBuffer returns the request's user buffer, byte for byte as given to
// Send (SPEC R9, R12). A view, valid until the next RecvResponse.
func (r *Response) UserBuffer() []byte { return r.userBuf }

// RecordCount returns the number of records this response delivers: for a
// complex read with read retry, only the records not delivered before
// (SPEC R11). Simple reads and requests without read retry deliver the
// packet's records as the proxy sent them (a duplicated packet is dropped
// whole; records within a packet are not checked).
func (r *Response) RecordCount() int { return r.nrec }

// Scan returns a scanner over the records this response delivers, in
// packet order: batch reads name each record's key by its index in the
// request (Tag); index reads deliver records in stream order with their
// positions. It allocates nothing. Declare it before the loop:
//
//	s := rsp.Scan()
//	for s.Next() {
//		use(s.Tag(), s.Result(), s.Key(), s.Value())
//	}
func (r *Response) Scan() RecordScanner {
	if !r.hasPkt {
		return RecordScanner{}
	}
	return RecordScanner{s: r.pkt.Scan(), keep: r.keep}
}

// RecordScanner walks the records a Response delivers, in place (see
// wire.RecordScanner); the records a complex read already delivered are
// skipped. Keys and values are views valid until the next RecvResponse.
type RecordScanner struct {
	s    wire.RecordScanner
	keep []bool // nil: every record; else keep[i] says whether record i is delivered
	i    int
}

// Next moves to the next delivered record and reports whether there is one.
func (s *RecordScanner) Next() bool {
	for s.s.Next() {
		i := s.i
		s.i++
		if s.keep == nil || i < len(s.keep) && s.keep[i] {
			return true
		}
	}
	return false
}

// Tag returns the current record's tag: the key's index in the request
// (batch reads) or the record's stream position (index reads).
func (s *RecordScanner) Tag() uint64 { return s.s.Tag() }

// Result returns the current record's own code (0 = found).
func (s *RecordScanner) Result() int32 { return s.s.Result() }

// Key returns the current record's key.
func (s *RecordScanner) Key() []byte { return s.s.Key() }

// Value returns the current record's value.
func (s *RecordScanner) Value() []byte { return s.s.Value() }

// Record returns the current record as a wire.Record value.
func (s *RecordScanner) Record() wire.Record { return s.s.Record() }

// Records returns an iterator over the records this response delivers, a
// wire.Record value at a time, in the order and with the filtering of
// Scan, which is faster. It allocates nothing.
func (r *Response) Records() RecordIter { return RecordIter{s: r.Scan()} }

// RecordIter iterates over a Response's records.
type RecordIter struct {
	s RecordScanner
}

// Next returns the next delivered record, or ok == false after the last.
// The record's Key and Value are views valid until the next RecvResponse.
func (it *RecordIter) Next() (rec wire.Record, ok bool) {
	if !it.s.Next() {
		return wire.Record{}, false
	}
	return it.s.Record(), true
}
