package wire

// Bitset is a set of key indexes over caller-owned bytes: index i is bit
// i%8 (least significant first) of byte i/8. Read retry keeps one per batch
// read, ceil(keys/8) bytes, to remember which keys were answered (SPEC R11).
// Indexes beyond the bytes read as absent, so a short set never hides a key.
type Bitset []byte

// BitsetLen returns the number of bytes a Bitset needs for n indexes.
func BitsetLen(n int) int { return (n + 7) / 8 }

// Has reports whether index i is in the set.
func (s Bitset) Has(i uint32) bool {
	w := i >> 3
	return uint64(w) < uint64(len(s)) && s[w]&(1<<(i&7)) != 0
}

// Set adds index i and reports whether it was absent before (false means a
// duplicate). An index beyond the bytes is not stored and reports false.
func (s Bitset) Set(i uint32) bool {
	w := i >> 3
	if uint64(w) >= uint64(len(s)) {
		return false
	}
	m := byte(1) << (i & 7)
	if s[w]&m != 0 {
		return false
	}
	s[w] |= m
	return true
}

// appendResendHeader copies orig's header (through the table name) to dst
// with FlagResend set and the attempt number replaced.
func appendResendHeader(dst, orig []byte, body int, attempt uint16) []byte {
	h := len(dst)
	dst = append(dst, orig[:body]...)
	le.PutUint32(dst[h+reqFlags:], le.Uint32(orig[reqFlags:])|FlagResend)
	le.PutUint16(dst[h+reqAttempt:], attempt)
	return dst
}

// AppendResend appends a copy of the packed request orig to dst with
// FlagResend set and the attempt number set to attempt; sequence number,
// async ID and body are kept. Read retry uses it for simple reads (SPEC R6,
// R8). orig is checked as ParseRequest does, with its errors; dst is returned
// unchanged on error.
func AppendResend(dst, orig []byte, attempt uint16) ([]byte, error) {
	r, err := ParseRequest(orig)
	if err != nil {
		return dst, err
	}
	dst = appendResendHeader(dst, orig, r.body, attempt)
	return append(dst, orig[r.body:]...), nil
}

// AppendPartialBatch appends to dst a batch request made from the packed
// batch request orig holding only the keys whose original index is not in
// answered, each keeping its index, so that answers map back to the
// caller's request (SPEC R11). Header fields are kept but for FlagResend and
// the attempt number, set to attempt. It returns the extended slice and the
// number of keys written. Errors (dst unchanged): ErrNothingMissing when
// every key is answered, ErrWrongBody for a request that is not a batch
// read, and the errors of ParseRequest for a malformed orig.
func AppendPartialBatch(dst, orig []byte, answered Bitset, attempt uint16) ([]byte, int, error) {
	body, err := checkRequestHeader(orig)
	if err != nil {
		return dst, 0, err
	}
	switch Command(le.Uint32(orig[reqCommand:])).Body() {
	case BodyBatch:
	case BodyUnknown:
		return dst, 0, ErrUnknownCommand
	default:
		return dst, 0, ErrWrongBody
	}
	if len(orig)-body < 4 {
		return dst, 0, ErrShortFrame
	}
	n := le.Uint32(orig[body:])
	if n == 0 || n > MaxBatchKeys || uint64(n)*batchEntryMin > uint64(len(orig)-body-4) {
		return dst, 0, ErrCountRange
	}
	keep := len(dst)
	out := appendResendHeader(dst, orig, body, attempt)
	countAt := len(out)
	out = le.AppendUint32(out, 0)
	written := uint32(0)
	off := body + 4
	for i := uint32(0); i < n; i++ {
		if len(orig)-off < batchEntryMin {
			return dst[:keep], 0, ErrShortFrame
		}
		end, err := consumeBytes(orig, off+4)
		if err != nil {
			return dst[:keep], 0, err
		}
		if !answered.Has(le.Uint32(orig[off:])) {
			out = append(out, orig[off:end]...)
			written++
		}
		off = end
	}
	if off != len(orig) {
		return dst[:keep], 0, ErrTrailingBytes
	}
	if written == 0 {
		return dst[:keep], 0, ErrNothingMissing
	}
	le.PutUint32(out[countAt:], written)
	return out, int(written), nil
}

// AppendResume appends to dst an index read made from the packed index read
// orig that resumes at stream position pos: the position after the last
// record accepted in order (SPEC R11). If orig has a limit, the new limit is
// what is left of it. Header fields are kept but for FlagResend and the
// attempt number. Errors (dst unchanged): ErrPosition when pos is before
// orig's own position or the limit is used up, ErrWrongBody for a request
// that is not an index read, and the errors of ParseRequest for a malformed
// orig.
func AppendResume(dst, orig []byte, pos uint64, attempt uint16) ([]byte, error) {
	r, err := ParseRequest(orig)
	if err != nil {
		return dst, err
	}
	if r.Body() != BodyIndex {
		return dst, ErrWrongBody
	}
	start, limit := r.Position(), r.Limit()
	if pos < start {
		return dst, ErrPosition
	}
	if limit != 0 {
		used := pos - start
		if used >= uint64(limit) {
			return dst, ErrPosition
		}
		limit -= uint32(used)
	}
	_, tail := r.bytesAt(r.body) // end of the part key
	dst = appendResendHeader(dst, orig, r.body, attempt)
	dst = append(dst, orig[r.body:tail]...)
	dst = le.AppendUint64(dst, pos)
	return le.AppendUint32(dst, limit), nil
}
