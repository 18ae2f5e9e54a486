package retry

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/ctxtable"
	"github.com/readretry/readretry/timerwheel"
	"github.com/readretry/readretry/wire"
)

// Context kinds.
const (
	kindPlain  uint8 = iota // no read retry: waits Config.WaitTimeout, never re-sent
	kindSimple              // simple read with read retry (SPEC R6)
	kindBatch               // batch read with read retry (SPEC R10, R11: missing keys)
	kindIndex               // index read with read retry (SPEC R10, R11: resume)
)

// maxAttempts is the most packets one request can send: the first and
// MaxMaxRetries re-sends.
const maxAttempts = 1 + MaxMaxRetries

// ctxMeta is the fixed part of one in-flight request's context. It holds no
// Go pointer, so the context table's slabs stay invisible to the garbage
// collector (SPEC R15). Everything whose size depends on the request lives
// in the context's payload next to the packed frame and the user buffer:
// the scratch bytes (see ctxScratch) hold the proxies tried, the error-code
// list the request was sent with and the kind's progress. The caller's
// async ID is read from the packed frame the context keeps (or, for a
// plain request, which keeps no frame, from its scratch), not stored
// twice: 40 bytes of meta in all.
//
// Ownership: Send fills the context (meta and scratch) before its first
// frame is out; from then on only the poller (RecvResponse) touches it,
// except the timer field, which the sender publishes once with a CAS and
// both sides access atomically.
type ctxMeta struct {
	timer    uint64 // timerwheel.Handle of the pending timer, 0 if none known; atomic
	deadline int64  // end of the current segment (or wait), ns since the client's epoch
	firstMs  uint32 // first send, ms since the epoch (mod 2^32): the exhaustion log's cost, a plain request's overall cap
	budgetUs uint32 // the class budget the request was sent with (SPEC R1), µs (MaxBudget fits)
	gen      uint16 // timer generation: a timer whose id carries another is stale
	answered uint16 // bit k: attempt k has answered (simple) or ended its stream (complex) (SPEC R8)
	cmd      uint8  // wire.Command: every command the codec carries is below 256
	kind     uint8
	ntried   uint8  // attempts sent: proxies recorded in the scratch
	retries  uint8  // re-sends used (SPEC R10: only grows)
	max      uint8  // MaxRetries of the zone's configuration at send time (SPEC R5)
	ncodes   uint8  // error codes of the configuration at send time, in the scratch (SPEC R5)
	flags    uint8  // flagDone, flagHeld, flagNoResend
	waiter   uint32 // the Do call waiting for the request (do.go), 0 for the asynchronous API
}

// ctxMeta.flags.
const (
	flagDone     uint8 = 1 << iota // the final result is queued or delivered
	flagHeld                       // the poller holds an answer for it (SPEC R8, R8b; hold.go)
	flagNoResend                   // the storm guard refused a re-send: no more are tried (SPEC R19)
	flagFailed                     // records with a listed code were delivered as they are (SPEC R8b, R17 round 3)
	flagHedged                     // a simple read whose first re-send was moved earlier (SPEC R21, hedge.go)
	flagPacket                     // a complex read has had a good packet: its first-packet latency is recorded (SPEC R21)
)

func (m *ctxMeta) done() bool { return m.flags&flagDone != 0 }

// budget returns the request's class budget.
func (m *ctxMeta) budget() time.Duration { return time.Duration(m.budgetUs) * time.Microsecond }

// timerID is a timer's id in the zone's wheel: the sequence counter and the
// context's timer generation.
func timerID(seq uint64, gen uint16) uint64 { return seq&counterMask | uint64(gen)<<counterBits }

// ctxScratch is a view of a context's scratch bytes (ctxtable.Ref.Scratch),
// laid out as
//
//	2 × (1 + max)  the proxy of each attempt in send order (ProxyID, little endian)
//	4 × ncodes     the zone's error codes when the request was sent (int32, SPEC R5)
//	then by kind:
//	  kindBatch    4 keys answered, 4 keys in the request, the bitset of answered keys
//	  kindIndex    8 the next stream position wanted (SPEC R11)
//	  kindPlain    4 the next packet index expected (duplicate detection),
//	               8 the async ID (a plain request keeps no frame to read it from)
//	  kindSimple   8 the end of the read's budget: first send + T, ns since
//	               the epoch (SPEC §7 R9/R8/R19: a read without a good
//	               answer ends there, whatever its error-code re-sends did)
//
// Each quantity has its own bytes, so a field means one thing whatever the
// kind, and the fixed ctxMeta stays small.
type ctxScratch []byte

// scratchSize returns the scratch bytes a request of kind needs.
func scratchSize(kind, max uint8, ncodes, nkeys int) int {
	n := 2*(1+int(max)) + 4*ncodes
	switch kind {
	case kindBatch:
		n += 8 + wire.BitsetLen(nkeys)
	case kindIndex, kindSimple:
		n += 8
	case kindPlain:
		n += 12
	}
	return n
}

func (s ctxScratch) tried(i int) ProxyID { return ProxyID(binary.LittleEndian.Uint16(s[2*i:])) }
func (s ctxScratch) setTried(i int, id ProxyID) {
	binary.LittleEndian.PutUint16(s[2*i:], uint16(id))
}

// flight is one request in flight as the engine's code handles it: a small
// handle on the stack naming the zone, the sequence number, the context in
// the zone's table, the meta being edited, and the time of the step. Its
// methods are the lifecycle steps (send.go, answer.go, resend.go,
// finish.go); the sender makes one in Send, the poller one per packet or
// timer.
type flight struct {
	c   *Client
	z   *zone
	seq uint64
	ref ctxtable.Ref[ctxMeta]
	m   *ctxMeta
	now int64 // ns since the client's epoch
}

// scratch returns the context's scratch view.
func (f *flight) scratch() ctxScratch { return ctxScratch(f.ref.Scratch()) }

// hasTried reports whether an attempt of the request went to id.
func (f *flight) hasTried(id ProxyID) bool {
	s := f.scratch()
	for i := range int(f.m.ntried) {
		if s.tried(i) == id {
			return true
		}
	}
	return false
}

// addTried records the proxy of an attempt just sent and counts the
// attempt in flight to it (untry gives it back; SPEC R22, proxies.go).
func (f *flight) addTried(id ProxyID) {
	if int(f.m.ntried) < 1+int(f.m.max) {
		f.scratch().setTried(int(f.m.ntried), id)
		f.m.ntried++
		l := f.c.loadOf(id)
		if l.attempts.Load() == 0 {
			// SPEC §7 R13 round 3: the proxy's silence is timed from its
			// first attempt outstanding (health.go, stalled), stored
			// before the count shows it so no sender sees an old time.
			l.health.since.Store(f.now)
		}
		l.attempts.Add(1)
	}
}

// Batch, index and plain progress, in the kind's scratch bytes.
func (f *flight) batchAnswered() uint32 { return binary.LittleEndian.Uint32(f.state()) }
func (f *flight) batchKeys() uint32     { return binary.LittleEndian.Uint32(f.state()[4:]) }
func (f *flight) batchBits() wire.Bitset {
	return wire.Bitset(f.state()[8:])
}
func (f *flight) setBatchAnswered(n uint32) { binary.LittleEndian.PutUint32(f.state(), n) }
func (f *flight) indexNext() uint64         { return binary.LittleEndian.Uint64(f.state()) }
func (f *flight) setIndexNext(pos uint64)   { binary.LittleEndian.PutUint64(f.state(), pos) }
func (f *flight) simpleEnd() int64          { return int64(binary.LittleEndian.Uint64(f.state())) }
func (f *flight) setSimpleEnd(ns int64)     { binary.LittleEndian.PutUint64(f.state(), uint64(ns)) }
func (f *flight) plainNext() uint32         { return binary.LittleEndian.Uint32(f.state()) }
func (f *flight) setPlainNext(n uint32)     { binary.LittleEndian.PutUint32(f.state(), n) }

// asyncID returns the caller's async ID: from the packed frame the context
// keeps, or from a plain request's scratch.
func (f *flight) asyncID() uint64 {
	if f.m.kind == kindPlain {
		return binary.LittleEndian.Uint64(f.state()[4:])
	}
	id, _ := wire.PeekRequestAsyncID(f.ref.Frame())
	return id
}

// codes returns the error-code snapshot's bytes.
func (f *flight) codes() []byte {
	off := 2 * (1 + int(f.m.max))
	return f.ref.Scratch()[off : off+4*int(f.m.ncodes)]
}

// state returns the kind's bytes, after the tried proxies and the codes.
func (f *flight) state() []byte {
	return f.ref.Scratch()[2*(1+int(f.m.max))+4*int(f.m.ncodes):]
}

// isRetryCode reports whether result is in the error-code list the request
// was sent with (SPEC R5, R8): at most MaxErrorCodes entries, so the scan
// is bounded.
func (f *flight) isRetryCode(result int32) bool {
	if result == ResultOK {
		return false
	}
	c := f.codes()
	for i := 0; i+4 <= len(c); i += 4 {
		if int32(binary.LittleEndian.Uint32(c[i:])) == result {
			return true
		}
	}
	return false
}

// markAnswered notes that attempt (as echoed by a packet) has answered, or
// for a complex read that its stream has ended. Numbers the request never
// sent are ignored, so a confused proxy cannot make it look settled.
func (f *flight) markAnswered(attempt uint16) {
	if attempt <= uint16(f.m.retries) {
		f.m.answered |= 1 << attempt
	}
}

// allAnswered reports whether every attempt sent has answered (SPEC R8: a
// held answer is delivered when nothing else can answer).
func (f *flight) allAnswered() bool { return bits.OnesCount16(f.m.answered) >= int(f.m.ntried) }

// mayResend reports whether the request may send another attempt: retries
// left and no refusal by the storm guard (SPEC R8, R19).
func (f *flight) mayResend() bool {
	return f.m.retries < f.m.max && f.m.flags&flagNoResend == 0
}

// arm schedules the context's timer at m.deadline under a new generation.
// The caller has cleared or cancelled the previous timer. The zone's bounds
// keep the wheel from refusing (MaxContextsPerZone); if it ever did, the
// request would end at once with its timeout result rather than wait for
// ever.
func (f *flight) arm() {
	f.m.gen++
	h, err := f.z.wheel.ScheduleOffset(time.Duration(f.m.deadline), timerID(f.seq, f.m.gen))
	if err != nil {
		if f.m.kind == kindPlain {
			f.finish(ResultWaitRspTimeout)
		} else {
			f.giveUp()
		}
		return
	}
	atomic.StoreUint64(&f.m.timer, uint64(h))
}

// cancelTimer cancels the context's pending timer, if its handle is known
// (a send token, see sendToken, is not a handle: that timer's sender
// cancels it when it finds its token gone).
func (f *flight) cancelTimer() {
	if h := atomic.SwapUint64(&f.m.timer, 0); h&handleBit != 0 {
		f.z.wheel.Cancel(timerwheel.Handle(h))
	}
}

// handleBit is set in every timerwheel.Handle and in no send token.
const handleBit = 1 << 63
