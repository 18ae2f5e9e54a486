package sim

import (
	"bytes"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// reqState is one request's record. The sender writes the atomics before
// and after Send; everything else belongs to the polling goroutine.
type reqState struct {
	sentAt atomic.Int64  // ns since the run's start; set before Send
	seq    atomic.Uint64 // Send's sequence number; set after Send
	failed atomic.Bool   // Send returned an error: no response may come

	gotSeq  uint64
	next    uint64 // index reads: next stream position expected
	seen    uint64 // batch reads: key indexes delivered
	resps   uint32
	finals  uint8
	started bool
}

// Answer is one response as a client hands it to its caller, in the terms
// the Checker compares with the request that was sent. A client other than
// retry.Client (a peer design under comparison) fills one per answer; for
// the engine, SetResponse fills it from a retry.Response.
type Answer struct {
	AsyncID  uint64       // the caller's async ID, as given to the client
	Seq      uint64       // the request's sequence number, as the client reported it when sending
	Command  wire.Command // the request's command
	Result   int32        // result code: retry.ResultOK, the proxy's code, or one the client made
	HaveMore bool         // more answers follow; unset on exactly one answer per request, its final result
	// Attempts is how many packets the client sent for the request (1 plus
	// re-sends and hedges); read from the final answer.
	Attempts   int
	UserBuffer []byte // the caller's user buffer, byte for byte as sent
	// Records are the records this answer delivers: views valid only during
	// Check. RecordCount is the count the client claims for them; Check
	// reports a mismatch.
	Records     []wire.Record
	RecordCount int
}

// SetResponse fills a from rsp, reusing a.Records' storage (no allocation
// once it has grown). The records stay views into rsp: valid until the next
// RecvResponse.
func (a *Answer) SetResponse(rsp *retry.Response) {
	a.AsyncID, a.Seq, a.Command, a.Result = rsp.AsyncID(), rsp.Seq(), rsp.Command(), rsp.Result()
	a.HaveMore, a.Attempts, a.UserBuffer, a.RecordCount = rsp.HaveMore(), rsp.Attempts(), rsp.UserBuffer(), rsp.RecordCount()
	a.Records = a.Records[:0]
	for it := rsp.Records(); ; {
		rec, ok := it.Next()
		if !ok {
			break
		}
		a.Records = append(a.Records, rec)
	}
}

// Checker verifies every answer of one client against the Workload (SPEC
// R9, R11, R12) and keeps a Report's counts: the right value for every key,
// every record exactly once, index records in stream order, the async ID,
// sequence number and user buffer as sent, one final result per request,
// attempts within MaxRetries+1. A broken check is a Violation in the
// Report, never a panic.
//
// Concurrency: the sending side (Begin, Sent, Refused) is one goroutine;
// Check is one goroutine at a time (callers with many answering goroutines
// serialise it with a mutex); Issued, Finals and Settled are safe from any
// goroutine. Finish comes after both sides are done.
type Checker struct {
	w          *Workload
	maxRetries int
	states     []reqState
	issued     atomic.Uint64 // async IDs handed out: 1..issued
	finals     atomic.Uint64 // final results seen (progress)
	refusedN   atomic.Uint64 // sends refused (no result will come)
	rep        Report
	examples   map[string]int
	op         Op
	ub, kb, vb []byte
	rk         []byte
	// partKeyRecords: index-read records carry the part key itself (a
	// Redis list's key, BackendRedis) rather than part key + "/" + position.
	partKeyRecords bool
}

const examplesPerKind = 3

// NewChecker returns a Checker for requests with async IDs 1..capacity of
// workload w, allowing each at most maxRetries+1 attempts.
func NewChecker(w *Workload, capacity, maxRetries int) *Checker {
	return &Checker{w: w, maxRetries: maxRetries, states: make([]reqState, capacity), examples: map[string]int{},
		// Sized up front so that a run's heap grows with the client's
		// requests in flight, not with the Checker (memory figures).
		rep: Report{Latencies: make([]time.Duration, 0, capacity)}}
}

// SetPartKeyRecords makes the Checker expect index-read records to carry
// the part key itself, as Redis lists' do through transport/resp
// (BackendRedis), rather than part key + "/" + position. Call it before
// the first Check.
func (c *Checker) SetPartKeyRecords(on bool) { c.partKeyRecords = on }

// violate counts a broken invariant and keeps a few examples of each kind.
func (c *Checker) violate(kind, format string, args ...any) {
	c.examples[kind]++
	if c.examples[kind] <= examplesPerKind {
		c.rep.Violations = append(c.rep.Violations, kind+": "+fmt.Sprintf(format, args...))
	}
}

// Begin records that request id (1, 2, … in order, at most the capacity)
// is about to be sent, at (since the run's start). Sending side only.
func (c *Checker) Begin(id uint64, at time.Duration) {
	c.issued.Store(id)
	c.states[id-1].sentAt.Store(int64(at))
}

// Sent records the sequence number the client returned for request id; its
// answers must carry it. Sending side only.
func (c *Checker) Sent(id, seq uint64) { c.states[id-1].seq.Store(seq) }

// Refused records that the client refused request id (its send returned an
// error): no answer may come for it. Sending side only.
func (c *Checker) Refused(id uint64) {
	c.states[id-1].failed.Store(true)
	c.refusedN.Add(1)
}

// Capacity returns the most requests the Checker tracks.
func (c *Checker) Capacity() int { return len(c.states) }

// Issued returns how many requests Begin recorded.
func (c *Checker) Issued() uint64 { return c.issued.Load() }

// Finals returns how many final results Check has seen.
func (c *Checker) Finals() uint64 { return c.finals.Load() }

// Settled reports whether every issued request has its final result or was
// refused.
func (c *Checker) Settled() bool { return c.finals.Load()+c.refusedN.Load() >= c.issued.Load() }

// Check checks one answer, received at now (since the run's start).
func (c *Checker) Check(a *Answer, now time.Duration) {
	id := a.AsyncID
	if id == 0 || id > c.issued.Load() {
		c.rep.BadAsyncID++
		c.violate("bad async id", "response with async id %d, %d issued", id, c.issued.Load())
		return
	}
	st := &c.states[id-1]
	op := &c.op
	c.w.Op(id, op)
	if st.failed.Load() {
		c.violate("response to a refused send", "async id %d", id)
	}
	c.ub = AppendUserBuffer(c.ub[:0], id)
	if !bytes.Equal(a.UserBuffer, c.ub) {
		c.rep.BadUserBuffer++
		c.violate("user buffer", "async id %d: got %x, want %x", id, a.UserBuffer, c.ub)
	}
	if a.Command != op.Command {
		c.violate("command", "async id %d: response for %v, sent %v", id, a.Command, op.Command)
	}
	if st.gotSeq == 0 {
		st.gotSeq = a.Seq
	} else if st.gotSeq != a.Seq {
		c.rep.BadSeq++
		c.violate("seq", "async id %d: seq %d after %d", id, a.Seq, st.gotSeq)
	}
	if st.finals > 0 {
		c.rep.FinalsDuplicated++
		c.violate("response after the final result", "async id %d %v result %d more=%v", id, op.Command, a.Result, a.HaveMore)
		return
	}
	if !st.started {
		st.started = true
		st.next = op.Position
	}
	st.resps++
	c.checkRecords(a, st, op)
	if a.HaveMore {
		return
	}
	st.finals++
	c.finals.Add(1)
	c.rep.FinalResults++
	attempts := a.Attempts
	c.rep.Attempts += uint64(attempts)
	c.rep.MaxAttempts = max(c.rep.MaxAttempts, attempts)
	if attempts > c.maxRetries+1 || attempts < 1 {
		c.rep.AttemptsOverLimit++
		c.violate("attempts", "async id %d: %d attempts, limit %d", id, attempts, c.maxRetries+1)
	}
	res := a.Result
	if !op.Command.IsRead() {
		switch res {
		case retry.ResultOK:
			c.rep.OK++
			c.rep.WritesOK++
		case retry.ResultWaitRspTimeout:
			c.rep.WaitTimeouts++
		case retry.ResultReadRetryTimeout:
			c.rep.ReadRetryTimeouts++
			c.violate("write ended with -19219", "async id %d %v: writes are never retried", id, op.Command)
		default:
			c.rep.OtherErrors++
		}
		return
	}
	c.rep.Latencies = append(c.rep.Latencies, now-time.Duration(st.sentAt.Load()))
	switch {
	case res == c.w.ExpectedResult(op):
		if missing := c.missing(st, op); missing > 0 {
			c.rep.RecordsMissing += missing
			c.violate("records missing", "async id %d %v ended OK with %d records missing", id, op.Command, missing)
			return
		}
		c.rep.OK++
		c.rep.ReadsOK++
	case res == retry.ResultReadRetryTimeout:
		c.rep.ReadRetryTimeouts++
	case res == retry.ResultWaitRspTimeout:
		c.rep.WaitTimeouts++
	default:
		c.rep.OtherErrors++
	}
}

// missing returns how many records of a read that ended with its expected
// result were never delivered.
func (c *Checker) missing(st *reqState, op *Op) uint64 {
	switch op.Command.Body() {
	case wire.BodyKey:
		if op.Key < c.w.Data.Keys && st.seen == 0 {
			return 1
		}
	case wire.BodyBatch:
		return uint64(op.NKeys - bits.OnesCount64(st.seen))
	case wire.BodyIndex:
		if end := c.w.StreamEnd(op); st.next < end {
			return end - st.next
		}
	}
	return 0
}

// checkRecords checks every record a response delivers against the
// dataset: the right key and value, each exactly once, index records in
// stream order.
func (c *Checker) checkRecords(a *Answer, st *reqState, op *Op) {
	d := c.w.Data
	for i := range a.Records {
		rec := &a.Records[i]
		c.rep.RecordsDelivered++
		switch op.Command.Body() {
		case wire.BodyKey:
			c.kb = d.AppendKey(c.kb[:0], op.Key)
			c.vb = d.AppendValue(c.vb[:0], c.kb)
			if st.seen != 0 {
				c.rep.RecordsDuplicated++
				c.violate("record duplicated", "async id %d %v", op.ID, op.Command)
			} else if op.Key >= d.Keys || rec.Result != 0 || !bytes.Equal(rec.Key, c.kb) || !bytes.Equal(rec.Value, c.vb) {
				c.rep.RecordsWrong++
				c.violate("record wrong", "async id %d %v key %q: got %q=%q result %d", op.ID, op.Command, c.kb, rec.Key, rec.Value, rec.Result)
			}
			st.seen = 1
		case wire.BodyBatch:
			if rec.Tag >= uint64(op.NKeys) {
				c.rep.RecordsWrong++
				c.violate("record wrong", "async id %d %v: tag %d of %d keys", op.ID, op.Command, rec.Tag, op.NKeys)
				continue
			}
			bit := uint64(1) << rec.Tag
			if st.seen&bit != 0 {
				c.rep.RecordsDuplicated++
				c.violate("record duplicated", "async id %d %v key index %d", op.ID, op.Command, rec.Tag)
				continue
			}
			st.seen |= bit
			k := op.Keys[rec.Tag]
			c.kb = d.AppendKey(c.kb[:0], k)
			okRec := bytes.Equal(rec.Key, c.kb)
			if k < d.Keys {
				c.vb = d.AppendValue(c.vb[:0], c.kb)
				okRec = okRec && rec.Result == 0 && bytes.Equal(rec.Value, c.vb)
			} else {
				okRec = okRec && rec.Result == ResultNotFound && len(rec.Value) == 0
			}
			if !okRec {
				c.rep.RecordsWrong++
				c.violate("record wrong", "async id %d %v index %d: got %q=%q result %d", op.ID, op.Command, rec.Tag, rec.Key, rec.Value, rec.Result)
			}
		case wire.BodyIndex:
			switch {
			case rec.Tag < st.next:
				c.rep.RecordsDuplicated++
				c.violate("record duplicated", "async id %d %v position %d, next expected %d", op.ID, op.Command, rec.Tag, st.next)
				continue
			case rec.Tag > st.next:
				c.rep.RecordsOutOfOrder++
				c.violate("record out of order", "async id %d %v position %d, next expected %d", op.ID, op.Command, rec.Tag, st.next)
			}
			st.next = rec.Tag + 1
			c.kb = d.AppendPartKey(c.kb[:0], op.Key)
			c.vb = d.AppendRecordValue(c.vb[:0], c.kb, rec.Tag)
			c.rk = d.AppendRecordKey(c.rk[:0], c.kb, rec.Tag)
			if c.partKeyRecords {
				c.rk = append(c.rk[:0], c.kb...)
			}
			if rec.Tag >= c.w.StreamEnd(op) || rec.Result != 0 || !bytes.Equal(rec.Key, c.rk) || !bytes.Equal(rec.Value, c.vb) {
				c.rep.RecordsWrong++
				c.violate("record wrong", "async id %d %v position %d: got %q=%q", op.ID, op.Command, rec.Tag, rec.Key, rec.Value)
			}
		default:
			c.rep.RecordsWrong++
			c.violate("record wrong", "async id %d: a write answered with a record", op.ID)
		}
	}
	if len(a.Records) != a.RecordCount {
		c.violate("record count", "async id %d: RecordCount %d, %d iterated", op.ID, a.RecordCount, len(a.Records))
	}
}

// Finish runs the end-of-run checks over every request issued — exactly
// one final result for each request the client accepted, none for a
// refused one, the sequence numbers it returned — and returns the Report's
// counts, latencies and violations (the caller fills in the scenario, the
// engine's counters and its own figures). Call it once, after sending and
// checking are over.
func (c *Checker) Finish() Report {
	n := c.issued.Load()
	for i := uint64(0); i < n; i++ {
		st := &c.states[i]
		if st.failed.Load() {
			c.rep.SendErrors++
			continue
		}
		c.rep.Requests++
		c.w.Op(i+1, &c.op)
		if c.op.Command.IsRead() {
			c.rep.Reads++
		} else {
			c.rep.Writes++
		}
		if st.finals == 0 {
			c.rep.FinalsMissing++
			c.violate("final result missing", "async id %d %v (%d responses)", i+1, c.op.Command, st.resps)
		}
		if st.gotSeq != 0 && st.gotSeq != st.seq.Load() {
			c.rep.BadSeq++
			c.violate("seq", "async id %d: responses carry seq %d, Send returned %d", i+1, st.gotSeq, st.seq.Load())
		}
	}
	if c.rep.Requests > 0 {
		c.rep.AttemptsPerReq = float64(c.rep.Attempts) / float64(c.rep.Requests)
		c.rep.ExtraAttemptsPct = 100 * (float64(c.rep.Attempts) - float64(c.rep.Requests)) / float64(c.rep.Requests)
	}
	for _, kind := range slices.Sorted(maps.Keys(c.examples)) { // the same order every run
		if k := c.examples[kind]; k > examplesPerKind {
			c.rep.Violations = append(c.rep.Violations, fmt.Sprintf("%s: %d more", kind, k-examplesPerKind))
		}
	}
	c.rep.finishLatency()
	return c.rep
}
