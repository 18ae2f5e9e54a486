package retrytest

import (
	"strconv"

	"github.com/readretry/readretry/wire"
)

// Data is a deterministic dataset: every key has a value, every part key a
// stream of StreamLen records, so a test can check each answer exactly.
type Data struct {
	// StreamLen is the number of records of every index-read stream.
	StreamLen int
}

// AppendValue appends key's value ("value-of-" + key) to dst.
func (Data) AppendValue(dst, key []byte) []byte {
	return append(append(dst, "value-of-"...), key...)
}

// AppendStreamKey appends the key of record pos of partKey's stream
// (partKey + "/" + pos) to dst.
func (Data) AppendStreamKey(dst, partKey []byte, pos uint64) []byte {
	return strconv.AppendUint(append(append(dst, partKey...), '/'), pos, 10)
}

// AppendStreamValue appends the value of record pos of partKey's stream
// ("rec-" + pos) to dst.
func (Data) AppendStreamValue(dst, partKey []byte, pos uint64) []byte {
	return strconv.AppendUint(append(dst, "rec-"...), pos, 10)
}

// Serve returns a Handler that answers every request from d at once: a
// simple read with one record; a batch read with every key, perRecords
// records per packet (0 = all in one); an index read with the rest of the
// stream from the requested position (within its limit), perRecords per
// packet; a write with an empty success. It allocates nothing per request
// at steady state.
func Serve(d Data, perPacket int) Handler {
	var kb, vb []byte
	return func(req wire.Request, r *Replier) {
		switch req.Body() {
		case wire.BodyKey:
			r.Start(req, 0, false, 0, 0)
			vb = d.AppendValue(vb[:0], req.Key())
			r.Record(0, 0, req.Key(), vb)
			r.Send()
		case wire.BodyBatch:
			n := req.KeyCount()
			per := perPacket
			if per <= 0 {
				per = n
			}
			packet, inPacket := uint32(0), 0
			it := req.Keys()
			for i := 0; i < n; i++ {
				idx, key, _ := it.Next()
				if inPacket == 0 {
					r.Start(req, 0, i+per < n, packet, 0)
				}
				vb = d.AppendValue(vb[:0], key)
				r.Record(uint64(idx), 0, key, vb)
				inPacket++
				if inPacket == per || i == n-1 {
					r.Send()
					packet++
					inPacket = 0
				}
			}
		case wire.BodyIndex:
			end := uint64(d.StreamLen)
			pos := req.Position()
			if l := req.Limit(); l != 0 && pos+uint64(l) < end {
				end = pos + uint64(l)
			}
			per := uint64(perPacket)
			if per == 0 {
				per = max(end-min(pos, end), 1)
			}
			packet := uint32(0)
			for {
				stop := min(pos+per, end)
				r.Start(req, 0, stop < end, packet, max(stop, pos))
				for ; pos < stop; pos++ {
					kb = d.AppendStreamKey(kb[:0], req.Key(), pos)
					vb = d.AppendStreamValue(vb[:0], req.Key(), pos)
					r.Record(pos, 0, kb, vb)
				}
				r.Send()
				packet++
				if pos >= end {
					return
				}
			}
		default:
			r.Start(req, 0, false, 0, 0)
			r.Send()
		}
	}
}

// Fail returns a Handler that answers every request with result code
// (e.g. -7953, PROXY_ERR_SWIFT_TIMEOUT) and no records.
func Fail(code int32) Handler {
	return func(req wire.Request, r *Replier) {
		r.Start(req, code, false, 0, 0)
		r.Send()
	}
}
