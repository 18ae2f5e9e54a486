// Package wire is the frame format of readretry's proxy protocol (SPEC R18):
// zero-copy views for decoding, Append* builders for encoding, and the
// partial rebuilds that read retry needs (SPEC R11) done straight on the
// packed bytes.
//
// The real proxy protocol of the seed's database is not public, so this one
// is ours: compact, fixed-width little-endian fields, every length checked
// before it is trusted. Its shape follows
// google.golang.org/protobuf/encoding/protowire: functions over []byte,
// errors as values, no hidden allocation.
//
// # Request frame
//
//	offset size  field
//	0      2     magic 0x52 0x52 ("RR")
//	2      1     version (1)
//	3      1     frame type: 1 = request
//	4      4     command (uint32; see Command)
//	8      4     flags (uint32; FlagResend marks a re-sent attempt)
//	12     8     sequence number (uint64; the client's key for the in-flight context)
//	20     8     async ID (uint64; the caller's, echoed back untouched)
//	28     2     attempt number (uint16; 0 = first send, k = k-th re-send)
//	30     4     AppID (uint32)
//	34     4     ZoneID (uint32)
//	38     1     table name length t (0..255)
//	39     t     table name bytes
//	39+t   ...   body, by the command's BodyKind:
//
//	BodyKey (simple reads 7, 103, 15):
//	  4 key length k, k key bytes
//	BodyBatch (batch reads 23, 117, 153):
//	  4 key count n (1..MaxBatchKeys), then n times:
//	    4 key index (uint32, the key's index in the caller's original request)
//	    4 key length k, k key bytes
//	BodyIndex (index reads 25, 11):
//	  4 part key length k, k part key bytes
//	  8 resume position (uint64; the first record position wanted, 0 = from the start)
//	  4 limit (uint32; at most this many records, 0 = no limit)
//	BodyKeyValue (writes 1, 3, 5, 9):
//	  4 key length k, k key bytes, 4 value length v, v value bytes
//
// Nothing may follow the body: trailing bytes are an error, so a frame has
// exactly one reading.
//
// # Response frame
//
//	offset size  field
//	0      2     magic "RR"
//	2      1     version (1)
//	3      1     frame type: 2 = response
//	4      4     command (echo of the request's)
//	8      8     sequence number (echo)
//	16     8     async ID (echo)
//	24     4     result code (int32; 0 = success, negative = error)
//	28     1     flags: bit 0 = HaveMore (more packets follow for this request)
//	29     1     reserved, 0
//	30     2     attempt number (echo: which attempt this packet answers)
//	32     4     packet index (uint32; 0-based within one attempt's stream)
//	36     4     record count n (uint32)
//	40     8     cursor (uint64): index reads: the stream position just after
//	             this packet, where a resumed read would start; an empty last
//	             packet so tells where the stream ends. 0 for other reads.
//	48     ...   n records, each:
//	  8 tag (uint64): batch reads: the key index it answers; index reads: the
//	    record's position in the part key's stream; otherwise 0
//	  4 record result code (int32; e.g. not found for one key of a batch)
//	  4 key length k, k key bytes
//	  4 value length v, v value bytes
//
// # Stream framing
//
// On a byte stream (TCP) every frame is preceded by its length as a 4-byte
// little-endian uint32; a length above the reader's maximum (MaxFrameSize by
// default, 16 MiB) is an error, so a corrupt peer cannot make the reader
// allocate without bound. Reader reuses one buffer for every frame.
//
// # Views and ownership
//
// ParseRequest and ParseResponse check the whole frame once (every length,
// every count, no trailing bytes) and return small value-type views that
// point into the frame. Nothing is copied: a view, and every []byte an
// accessor or iterator returns, is valid only while the caller keeps the
// frame's bytes unchanged. Because the frame was checked at parse time,
// accessors and iterators cannot fail and cannot read out of bounds.
//
// # Partial rebuild
//
// AppendPartialBatch writes a batch request holding only the keys whose
// index is not set in a Bitset of answered keys, each keeping its original
// index so that answers map back to the caller's request; AppendResume writes
// an index read that resumes at a position. Both work on the packed original
// without decoding it into structs, keep the sequence number and async ID,
// and set the attempt number and FlagResend. Both are 0 allocs/op when dst
// has the capacity.
package wire
