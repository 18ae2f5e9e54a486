package idem

import (
	"encoding/binary"
	"errors"
	"net/http"
)

// Response is the first answer to a keyed HTTP request, as [Middleware]
// stores it and replays it to repeats.
type Response struct {
	// Status is the HTTP status code (100 to 999).
	Status int
	// Fingerprint identifies the request that produced the answer: the
	// SHA-256 (32 bytes) of what the middleware's Fingerprint returned; a
	// repeat with another fingerprint gets 422.
	Fingerprint []byte
	// Header holds the response headers the handler set, hop-by-hop
	// headers and Date excluded.
	Header http.Header
	// Body is the response body, or nil with BodyOmitted when it was longer
	// than the middleware's MaxBody.
	Body []byte
	// BodyOmitted reports that the body was not kept: a repeat gets the
	// status and headers with an empty body.
	BodyOmitted bool
}

// ErrRecord is returned by DecodeResponse for bytes that are not an encoded
// Response.
var ErrRecord = errors.New("idem: malformed response record")

const (
	recordVersion = 1
	flagOmitted   = 1 << 0

	// maxRecordHeaders bounds the header lines a record may claim, so
	// that a corrupted record cannot make the decoder allocate without
	// bound.
	maxRecordHeaders = 1024
)

// AppendResponse appends the encoding of r to dst and returns the extended
// slice. The format is: version (1 byte, 1), flags (1 byte: bit 0 body
// omitted), status (2 bytes big endian), fingerprint (uvarint length and
// bytes), header line count (uvarint), each line as name and value (uvarint
// length and bytes each, one line per value), then the body to the end.
func AppendResponse(dst []byte, r *Response) []byte {
	flags := byte(0)
	if r.BodyOmitted {
		flags |= flagOmitted
	}
	dst = append(dst, recordVersion, flags)
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.Status))
	dst = appendBytes(dst, r.Fingerprint)
	lines := 0
	for _, vs := range r.Header {
		lines += len(vs)
	}
	dst = binary.AppendUvarint(dst, uint64(lines))
	for name, vs := range r.Header {
		for _, v := range vs {
			dst = appendBytes(dst, []byte(name))
			dst = appendBytes(dst, []byte(v))
		}
	}
	return append(dst, r.Body...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// DecodeResponse decodes a record made by AppendResponse. Fingerprint and
// Body alias b (the caller owns b and must keep it unchanged while it uses
// them); Header is newly allocated. It returns ErrRecord for anything
// malformed and never panics.
func DecodeResponse(b []byte) (*Response, error) {
	if len(b) < 4 || b[0] != recordVersion || b[1]&^flagOmitted != 0 {
		return nil, ErrRecord
	}
	r := &Response{
		BodyOmitted: b[1]&flagOmitted != 0,
		Status:      int(binary.BigEndian.Uint16(b[2:4])),
	}
	if r.Status < 100 || r.Status > 999 {
		return nil, ErrRecord
	}
	b = b[4:]
	var ok bool
	if r.Fingerprint, b, ok = consumeBytes(b); !ok {
		return nil, ErrRecord
	}
	lines, n := binary.Uvarint(b)
	if n <= 0 || lines > maxRecordHeaders || lines > uint64(len(b)) {
		return nil, ErrRecord
	}
	b = b[n:]
	r.Header = make(http.Header, lines)
	for range lines {
		var name, value []byte
		if name, b, ok = consumeBytes(b); !ok || len(name) == 0 {
			return nil, ErrRecord
		}
		if value, b, ok = consumeBytes(b); !ok {
			return nil, ErrRecord
		}
		// Names were canonical when stored; keep them as they are so
		// that a replay sends what the handler sent.
		key := string(name)
		r.Header[key] = append(r.Header[key], string(value))
	}
	if len(b) > 0 {
		if r.BodyOmitted {
			return nil, ErrRecord
		}
		r.Body = b
	}
	return r, nil
}

func consumeBytes(b []byte) (field, rest []byte, ok bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, b, false
	}
	end := n + int(l)
	return b[n:end:end], b[end:], true
}
