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

// checker verifies every response of one client against the workload
// (SPEC R9, R11, R12) and keeps the report's counts. Not safe for
// concurrent use: the polling goroutine owns it; the sender touches only
// the states' atomics and issued.
type checker struct {
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
}

const examplesPerKind = 3

func newChecker(w *Workload, capacity, maxRetries int) *checker {
	return &checker{w: w, maxRetries: maxRetries, states: make([]reqState, capacity), examples: map[string]int{}}
}

// violate counts a broken invariant and keeps a few examples of each kind.
func (c *checker) violate(kind, format string, args ...any) {
	c.examples[kind]++
	if c.examples[kind] <= examplesPerKind {
		c.rep.Violations = append(c.rep.Violations, kind+": "+fmt.Sprintf(format, args...))
	}
}

// onResponse checks one response, received at now (since the run's start).
func (c *checker) onResponse(rsp *retry.Response, now time.Duration) {
	id := rsp.AsyncID()
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
	if !bytes.Equal(rsp.UserBuffer(), c.ub) {
		c.rep.BadUserBuffer++
		c.violate("user buffer", "async id %d: got %x, want %x", id, rsp.UserBuffer(), c.ub)
	}
	if rsp.Command() != op.Command {
		c.violate("command", "async id %d: response for %v, sent %v", id, rsp.Command(), op.Command)
	}
	if st.gotSeq == 0 {
		st.gotSeq = rsp.Seq()
	} else if st.gotSeq != rsp.Seq() {
		c.rep.BadSeq++
		c.violate("seq", "async id %d: seq %d after %d", id, rsp.Seq(), st.gotSeq)
	}
	if st.finals > 0 {
		c.rep.FinalsDuplicated++
		c.violate("response after the final result", "async id %d %v result %d more=%v", id, op.Command, rsp.Result(), rsp.HaveMore())
		return
	}
	if !st.started {
		st.started = true
		st.next = op.Position
	}
	st.resps++
	c.checkRecords(rsp, st, op)
	if rsp.HaveMore() {
		return
	}
	st.finals++
	c.finals.Add(1)
	c.rep.FinalResults++
	attempts := rsp.Attempts()
	c.rep.Attempts += uint64(attempts)
	c.rep.MaxAttempts = max(c.rep.MaxAttempts, attempts)
	if attempts > c.maxRetries+1 || attempts < 1 {
		c.rep.AttemptsOverLimit++
		c.violate("attempts", "async id %d: %d attempts, limit %d", id, attempts, c.maxRetries+1)
	}
	res := rsp.Result()
	if !op.Command.IsRead() {
		switch res {
		case retry.ResultOK:
			c.rep.OK++
			c.rep.WritesOK++
		case retry.ResultWaitRspTimeout:
			c.rep.WaitTimeouts++
		case retry.ResultReadRetryTimeout:
			c.rep.ReadRetryTimeouts++
			c.violate("write ended with -19219", "async id %d %v: writes are never retried (SPEC R3)", id, op.Command)
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
func (c *checker) missing(st *reqState, op *Op) uint64 {
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
func (c *checker) checkRecords(rsp *retry.Response, st *reqState, op *Op) {
	d := c.w.Data
	n := 0
	s := rsp.Scan()
	for s.Next() {
		rec := s.Record()
		n++
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
			if rec.Tag >= c.w.StreamEnd(op) || rec.Result != 0 || !bytes.Equal(rec.Key, c.rk) || !bytes.Equal(rec.Value, c.vb) {
				c.rep.RecordsWrong++
				c.violate("record wrong", "async id %d %v position %d: got %q=%q", op.ID, op.Command, rec.Tag, rec.Key, rec.Value)
			}
		default:
			c.rep.RecordsWrong++
			c.violate("record wrong", "async id %d: a write answered with a record", op.ID)
		}
	}
	if n != rsp.RecordCount() {
		c.violate("record count", "async id %d: RecordCount %d, %d iterated", op.ID, rsp.RecordCount(), n)
	}
}

// finish runs the end-of-run checks over every request issued: exactly one
// final result for each request Send accepted, none for a refused one,
// and the sequence numbers Send returned.
func (c *checker) finish() {
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
}
