package sim

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// MaxBatchKeys is the most keys a generated batch read has (at most 64, so
// that the checker tracks a request's answered keys in one word).
const MaxBatchKeys = 16

// Weight is one command's share of a workload mix.
type Weight struct {
	Command wire.Command // a read or write command the codec carries
	Weight  int          // its share, relative to the mix's sum; 0 leaves it out
}

// DefaultMix is the workload's command mix: every one of the eight read
// commands (SPEC R4), 90% in all, and the four writes, 10%.
var DefaultMix = []Weight{
	{wire.CmdGet, 20}, {wire.CmdPBFieldGet, 10}, {wire.CmdListGet, 10},
	{wire.CmdBatchGet, 10}, {wire.CmdPBBatchFieldGet, 5}, {wire.CmdListGetBatch, 5},
	{wire.CmdGetByPartKey, 15}, {wire.CmdListGetAll, 15},
	{wire.CmdInsert, 3}, {wire.CmdReplace, 3}, {wire.CmdUpdate, 2}, {wire.CmdDelete, 2},
}

// Op is one generated request, as numbers: everything needed to build it
// and to check its answers.
type Op struct {
	ID      uint64       // the request's async ID, from 1
	Command wire.Command // drawn from the mix
	// Key is the key number of a simple read or a write, or the part
	// number of an index read.
	Key uint64
	// Keys[:NKeys] are a batch read's key numbers (repeats allowed).
	Keys  [MaxBatchKeys]uint64
	NKeys int // number of keys used in Keys
	// Position and Limit of an index read.
	Position uint64 // first stream position asked for
	Limit    uint32 // most records wanted, 0 = all
}

// Workload generates requests deterministically: request ID's content is a
// function of (Seed, ID) alone, so the checker rebuilds what it expects
// from the async ID a response carries, with no per-request state shared
// with the sender beyond the send time.
type Workload struct {
	Data *Dataset // the data the requests ask for
	Seed uint64   // with an ID, decides the request
	mix  []Weight
	tot  int
}

// ErrBadMix: a mix with no positive weight or a command the codec does not
// carry.
var ErrBadMix = errors.New("sim: bad workload mix")

// NewWorkload returns a workload over data with the given mix (nil means
// DefaultMix).
func NewWorkload(data *Dataset, seed uint64, mix []Weight) (*Workload, error) {
	if mix == nil {
		mix = DefaultMix
	}
	w := &Workload{Data: data, Seed: seed}
	for _, m := range mix {
		if m.Command.Body() == wire.BodyUnknown || m.Weight < 0 {
			return nil, fmt.Errorf("%w: %v weight %d", ErrBadMix, m.Command, m.Weight)
		}
		if m.Weight > 0 {
			w.mix = append(w.mix, m)
			w.tot += m.Weight
		}
	}
	if w.tot == 0 {
		return nil, fmt.Errorf("%w: no positive weight", ErrBadMix)
	}
	return w, nil
}

// draws is a counter-based random stream for one request.
type draws struct{ s uint64 }

func (d *draws) next() uint64 { d.s += 0x9e3779b97f4a7c15; return splitmix(d.s) }
func (d *draws) n(k uint64) uint64 {
	if k == 0 {
		return 0
	}
	return d.next() % k
}

// Op fills op with request id's content.
func (w *Workload) Op(id uint64, op *Op) {
	r := draws{s: splitmix(w.Seed ^ id*0xd1b54a32d192ed03)}
	op.ID = id
	pick := int(r.n(uint64(w.tot)))
	for _, m := range w.mix {
		if pick < m.Weight {
			op.Command = m.Command
			break
		}
		pick -= m.Weight
	}
	d := w.Data
	keySpace := d.Keys + d.Keys/50 + 1 // about 2% absent keys
	op.Key, op.NKeys, op.Position, op.Limit = 0, 0, 0, 0
	switch op.Command.Body() {
	case wire.BodyKey, wire.BodyKeyValue:
		op.Key = r.n(keySpace)
	case wire.BodyBatch:
		op.NKeys = 1 + int(r.n(MaxBatchKeys))
		for i := 0; i < op.NKeys; i++ {
			op.Keys[i] = r.n(keySpace)
		}
	case wire.BodyIndex:
		op.Key = r.n(max(d.Parts, 1))
		if r.n(4) == 0 {
			op.Position = r.n(d.MaxStream + 5)
		}
		if r.n(4) == 0 {
			op.Limit = uint32(1 + r.n(20))
		}
	}
}

// Table returns the table a command's requests name.
func tableOf(cmd wire.Command) string {
	switch cmd {
	case wire.CmdListGet, wire.CmdListGetBatch, wire.CmdListGetAll:
		return "lists"
	}
	return "players"
}

// RequestBuffers holds the bytes a built retry.Request points into; reuse
// one per sending goroutine so that building allocates nothing at steady
// state.
type RequestBuffers struct {
	key, value, user []byte
	keys             [MaxBatchKeys][]byte
	keySlice         [][]byte
}

// Request fills req for op, pointing into bufs (valid until bufs is used
// again). The user buffer is UserBuffer(op.ID).
func (w *Workload) Request(op *Op, req *retry.Request, bufs *RequestBuffers) {
	d := w.Data
	*req = retry.Request{Command: op.Command, Table: tableOf(op.Command), AsyncID: op.ID}
	bufs.user = AppendUserBuffer(bufs.user[:0], op.ID)
	req.UserBuffer = bufs.user
	switch op.Command.Body() {
	case wire.BodyKey:
		bufs.key = d.AppendKey(bufs.key[:0], op.Key)
		req.Key = bufs.key
	case wire.BodyKeyValue:
		bufs.key = d.AppendKey(bufs.key[:0], op.Key)
		req.Key = bufs.key
		if op.Command != wire.CmdDelete {
			bufs.value = d.AppendValue(bufs.value[:0], bufs.key)
			req.Value = bufs.value
		}
	case wire.BodyBatch:
		bufs.keySlice = bufs.keySlice[:0]
		for i := 0; i < op.NKeys; i++ {
			bufs.keys[i] = d.AppendKey(bufs.keys[i][:0], op.Keys[i])
			bufs.keySlice = append(bufs.keySlice, bufs.keys[i])
		}
		req.Keys = bufs.keySlice
	case wire.BodyIndex:
		bufs.key = d.AppendPartKey(bufs.key[:0], op.Key)
		req.Key = bufs.key
		req.Position, req.Limit = op.Position, op.Limit
	}
}

// AppendUserBuffer appends request id's user buffer to dst: the id, a hash
// of it, and 0 to 31 bytes more drawn from the hash, so that a buffer
// swapped between requests, cut or changed is caught (SPEC R12).
func AppendUserBuffer(dst []byte, id uint64) []byte {
	h := splitmix(id ^ 0x7573657262756666)
	dst = binary.LittleEndian.AppendUint64(dst, id)
	dst = binary.LittleEndian.AppendUint64(dst, h)
	for i := uint64(0); i < h%32; i++ {
		dst = append(dst, byte(h>>(i%8*8))^byte(i))
	}
	return dst
}

// ExpectedResult returns the final result code a correct answer to op has:
// ResultNotFound for a simple read of an absent key, 0 otherwise (a batch
// read's absent keys get the code per record).
func (w *Workload) ExpectedResult(op *Op) int32 {
	if op.Command.Body() == wire.BodyKey && op.Key >= w.Data.Keys {
		return ResultNotFound
	}
	return retry.ResultOK
}

// StreamEnd returns the position just after the last record an index read
// asks for: the stream's end or Position+Limit, and never before Position.
func (w *Workload) StreamEnd(op *Op) uint64 {
	var pk [24]byte
	end := w.Data.StreamLen(w.Data.AppendPartKey(pk[:0], op.Key))
	if op.Limit != 0 && op.Position+uint64(op.Limit) < end {
		end = op.Position + uint64(op.Limit)
	}
	return max(end, op.Position)
}

// Records returns how many records a complete answer to op has.
func (w *Workload) Records(op *Op) uint64 {
	switch op.Command.Body() {
	case wire.BodyKey:
		if op.Key < w.Data.Keys {
			return 1
		}
	case wire.BodyBatch:
		return uint64(op.NKeys)
	case wire.BodyIndex:
		return w.StreamEnd(op) - op.Position
	}
	return 0
}
