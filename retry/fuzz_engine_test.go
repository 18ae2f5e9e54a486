package retry_test

// FuzzEngine drives the engine with random programs — sends of the three
// read kinds, answers to any attempt sent (good, listed error, other error,
// partial, with gaps), duplicated packets, unanswered attempts, route
// updates that change the retry configuration, and clock steps with polls —
// and checks what comes out against a model written from SPEC, not from the
// engine: one final result per request (R12), async ID and user buffer as
// sent (R9), no record lost or doubled and index records in order (R11),
// at most n+1 attempts with n the MaxRetries the request was sent with
// (R5, R6), a simple read's result decided by its first answer that is not
// a listed error code (R7, R8), and a simple read that got no such answer
// ending within [T, T + tick + poll] after its first send, or earlier only
// once every attempt it sent had answered (§7 R9/R8/R19, R14).

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// fuzzBudget is the simple budget; complex reads get twice it.
const fuzzBudget = 300 * time.Millisecond

// fuzzReq is the model of one request.
type fuzzReq struct {
	seq, asyncID uint64
	kind         wire.BodyKind // BodyKey, BodyBatch, BodyIndex
	retry        bool          // sent with read retry (the zone's MaxCnt > 0 then)
	n            int           // MaxRetries at send time
	codes        map[int32]bool
	user         []byte
	keys         int // batch: keys; index: the stream's length
	sentAt       time.Duration
	attempts     map[uint16]bool // attempt numbers sent
	answered     map[uint16]bool // attempt numbers answered with a final packet
	firstAnswer  int32           // first non-listed result delivered to a simple read
	haveFirst    bool
	listed       bool // a listed error was delivered (simple)
	got          map[uint64]int
	order        []uint64
	final        bool
	packets      map[string]uint32 // next packet index per attempt
}

// fuzzProg reads the program's bytes.
type fuzzProg struct {
	b []byte
	i int
}

func (p *fuzzProg) next() byte {
	if p.i >= len(p.b) {
		return 0
	}
	p.i++
	return p.b[p.i-1]
}

func (p *fuzzProg) done() bool { return p.i >= len(p.b) }

func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 5, 40})
	f.Add([]byte{0, 1, 2, 5, 20, 3, 0, 0, 5, 200, 5, 200})
	f.Add([]byte{1, 4, 5, 60, 3, 1, 0xff, 1, 4, 0, 5, 255, 5, 255})
	f.Add([]byte{2, 6, 3, 0, 0x0f, 2, 5, 100, 3, 1, 0x03, 0, 5, 255})
	f.Add([]byte{6, 0, 0, 2, 1, 3, 6, 3, 0, 0, 5, 250, 5, 250, 4, 0})
	f.Add([]byte{0, 3, 0, 1, 5, 60, 3, 1, 1, 5, 255, 5, 255, 5, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		runFuzzEngine(t, data)
	})
}

func runFuzzEngine(t *testing.T, data []byte) {
	clock := newFakeClock()
	tr := retrytest.NewTransport()
	tr.SetLog(true)
	px := hostProxies("a", "b", "c")
	c, err := retry.New(retry.Config{Transport: tr, Clock: clock.Now, Logger: quiet, Poller: retry.PollHand, WaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(fuzzBudget, 2*fuzzBudget)
	maxCnt, codes := 2, map[int32]bool{-7953: true}
	if err := c.ApplyRoute(testZone, px, confWith(maxCnt, "-7953")); err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	now := func() time.Duration { return clock.Now().Sub(start) }
	reqs := map[uint64]*fuzzReq{}
	var sent []retrytest.Sent // every attempt, in send order
	var delivered [][]byte    // answer frames, for duplicates
	var deliveredFrom []retry.Proxy
	poll := time.Millisecond // the step between polls

	collect := func() {
		for _, s := range tr.Sent() {
			r := s.Request()
			m := reqs[r.Seq()]
			if m == nil {
				t.Fatalf("frame for unknown seq %d", r.Seq())
			}
			if m.attempts[r.Attempt()] {
				t.Fatalf("seq %d: attempt %d sent twice", r.Seq(), r.Attempt())
			}
			m.attempts[r.Attempt()] = true
			if m.retry && len(m.attempts) > m.n+1 || !m.retry && len(m.attempts) > 1 {
				t.Fatalf("seq %d: %d attempts, want at most %d", r.Seq(), len(m.attempts), m.n+1)
			}
			sent = append(sent, s)
		}
	}
	check := func(rsp *retry.Response) {
		m := reqs[rsp.Seq()]
		if m == nil {
			t.Fatalf("response for unknown seq %d", rsp.Seq())
		}
		if m.final {
			t.Fatalf("seq %d: a response after its final one", rsp.Seq())
		}
		if rsp.AsyncID() != m.asyncID || !bytes.Equal(rsp.UserBuffer(), m.user) {
			t.Fatalf("seq %d: async ID %d, user %q; want %d, %q", rsp.Seq(), rsp.AsyncID(), rsp.UserBuffer(), m.asyncID, m.user)
		}
		for it := rsp.Records(); ; {
			rec, ok := it.Next()
			if !ok {
				break
			}
			m.got[rec.Tag]++
			m.order = append(m.order, rec.Tag)
			if m.retry && m.kind != wire.BodyKey && m.got[rec.Tag] > 1 {
				t.Fatalf("seq %d: record %d delivered twice", rsp.Seq(), rec.Tag)
			}
			if rec.Result == retry.ResultOK && m.kind != wire.BodyIndex && !bytes.Equal(rec.Value, append([]byte("v"), rec.Key...)) {
				t.Fatalf("seq %d: record %d value %q for key %q", rsp.Seq(), rec.Tag, rec.Value, rec.Key)
			}
		}
		if m.retry && m.kind == wire.BodyIndex {
			for i, tag := range m.order {
				if tag != uint64(i) {
					t.Fatalf("seq %d: index records %v, want 0, 1, ... in order", rsp.Seq(), m.order)
				}
			}
		}
		if rsp.HaveMore() {
			return
		}
		m.final = true
		at := now() - m.sentAt
		res := rsp.Result()
		if !m.retry {
			return // a plain request: one final, checked above
		}
		if rsp.Attempts() != len(m.attempts) {
			t.Fatalf("seq %d: Attempts %d, %d sent", rsp.Seq(), rsp.Attempts(), len(m.attempts))
		}
		switch m.kind {
		case wire.BodyKey:
			allAnswered := len(m.answered) == len(m.attempts)
			switch {
			case m.haveFirst:
				if res != m.firstAnswer {
					t.Fatalf("seq %d: final %d, want the first answer not listed, %d", rsp.Seq(), res, m.firstAnswer)
				}
			case m.listed && m.codes[res]:
				// A listed error held once no retry was left (R8).
			case res == retry.ResultReadRetryTimeout:
				// Nothing held: listed errors that came with retries left
				// were re-sent, not held (R8, R9).
			default:
				t.Fatalf("seq %d: final %d (listed error delivered %v)", rsp.Seq(), res, m.listed)
			}
			if !m.haveFirst {
				if at > fuzzBudget+time.Millisecond+poll {
					t.Fatalf("seq %d: ended %v after its first send, want at most T + tick + poll = %v", rsp.Seq(), at, fuzzBudget+time.Millisecond+poll)
				}
				if at < fuzzBudget && !allAnswered {
					t.Fatalf("seq %d: ended %v after its first send with result %d, before T, with attempts out", rsp.Seq(), at, res)
				}
			}
		default:
			if res == retry.ResultOK {
				for k := range m.keys {
					if m.got[uint64(k)] != 1 {
						t.Fatalf("seq %d: OK final with record %d delivered %d times (%v)", rsp.Seq(), k, m.got[uint64(k)], m.order)
					}
				}
			}
		}
	}
	pollAll := func() {
		for {
			rsp, ok := c.RecvResponse()
			collect()
			if !ok {
				return
			}
			check(rsp)
		}
	}
	answer := func(p *fuzzProg) {
		collect()
		if len(sent) == 0 {
			return
		}
		s := sent[int(p.next())%len(sent)]
		req := s.Request()
		m := reqs[req.Seq()]
		mode := p.next()
		var rb wire.ResponseBuilder
		pk := fmt.Sprint(req.Attempt())
		packet := m.packets[pk]
		m.packets[pk]++
		start := func(result int32, more bool, cursor uint64) {
			rb.Start(nil, wire.ResponseHeader{Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), Result: result,
				HaveMore: more, Attempt: req.Attempt(), Packet: packet, Cursor: cursor})
		}
		switch req.Body() {
		case wire.BodyKey:
			res := []int32{retry.ResultOK, -7953, -1}[int(mode)%3]
			start(res, false, 0)
			if res == retry.ResultOK {
				_ = rb.AddRecord(0, retry.ResultOK, req.Key(), append([]byte("v"), req.Key()...))
			}
			if !m.final {
				m.answered[req.Attempt()] = true
				switch {
				case m.retry && m.codes[res]:
					m.listed = true
				case !m.haveFirst:
					m.firstAnswer, m.haveFirst = res, true
				}
			}
		case wire.BodyBatch:
			bits := p.next()
			more := mode&1 != 0
			start(retry.ResultOK, more, 0)
			for it := req.Keys(); ; {
				idx, k, ok := it.Next()
				if !ok {
					break
				}
				if bits&(1<<(idx%8)) == 0 {
					continue
				}
				res := retry.ResultOK
				if mode&2 != 0 && idx%3 == 0 {
					res = -7953
				}
				_ = rb.AddRecord(uint64(idx), res, k, append([]byte("v"), k...))
			}
			if !more {
				m.answered[req.Attempt()] = true
			}
		case wire.BodyIndex:
			pos, l := req.Position(), uint64(m.keys)
			more := mode&1 != 0 && pos < l
			end := l
			if more {
				end = min(l, pos+uint64(p.next()%4))
			}
			start(retry.ResultOK, more, end)
			for q := pos; q < end; q++ {
				if mode&4 != 0 && q == pos+1 {
					continue // a lost record: a gap
				}
				res := retry.ResultOK
				if mode&2 != 0 && q == pos {
					res = -7953
				}
				_ = rb.AddRecord(q, res, []byte(fmt.Sprint(q)), nil)
			}
			if !more {
				m.answered[req.Attempt()] = true
			}
		}
		frame := rb.Frame()
		tr.Deliver(s.Proxy, frame)
		delivered = append(delivered, frame)
		deliveredFrom = append(deliveredFrom, s.Proxy)
	}

	var asyncID uint64
	prog := &fuzzProg{b: data}
	for steps := 0; !prog.done() && steps < 300; steps++ {
		switch op := prog.next() % 8; op {
		case 0, 1, 2: // send a simple, batch or index read
			asyncID++
			m := &fuzzReq{asyncID: asyncID, user: []byte(fmt.Sprint("ub", asyncID)), sentAt: now(), retry: maxCnt > 0, n: maxCnt,
				codes: codes, attempts: map[uint16]bool{}, answered: map[uint16]bool{}, got: map[uint64]int{}, packets: map[string]uint32{}}
			req := retry.Request{AsyncID: asyncID, UserBuffer: m.user, Table: "t"}
			switch op {
			case 0:
				m.kind, req.Command, req.Key = wire.BodyKey, wire.CmdGet, []byte(fmt.Sprint("k", asyncID))
			case 1:
				m.kind, req.Command, m.keys = wire.BodyBatch, wire.CmdBatchGet, 1+int(prog.next()%8)
				for k := range m.keys {
					req.Keys = append(req.Keys, []byte(fmt.Sprint("b", asyncID, "-", k)))
				}
			case 2:
				m.kind, req.Command, req.Key, m.keys = wire.BodyIndex, wire.CmdGetByPartKey, []byte("g"), 1+int(prog.next()%6)
			}
			seq, err := c.Send(testZone, &req)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			m.seq = seq
			reqs[seq] = m
			collect()
		case 3: // answer an attempt
			answer(prog)
		case 4: // a duplicate of an answer already delivered
			if len(delivered) > 0 {
				i := int(prog.next()) % len(delivered)
				tr.Deliver(deliveredFrom[i], delivered[i])
			}
		case 5: // time passes, polled every poll step
			d := time.Duration(prog.next()) * time.Millisecond
			for end := now() + d; now() < end; {
				clock.Add(poll)
				pollAll()
			}
		case 6: // a route update changes the retry configuration
			maxCnt = int(prog.next() % 4)
			codes = map[int32]bool{-7953: true}
			list := "-7953"
			if prog.next()&1 != 0 {
				codes, list = map[int32]bool{-7953: true, -1: true}, "-7953|-1"
			}
			if err := c.ApplyRoute(testZone, px, confWith(maxCnt, list)); err != nil {
				t.Fatal(err)
			}
		case 7: // the poll step changes
			poll = time.Duration(1+prog.next()%5) * time.Millisecond
		}
		pollAll()
	}
	// Let every request end: budgets, waits and the wait timeout.
	allFinal := func() bool {
		for _, m := range reqs {
			if !m.final {
				return false
			}
		}
		return true
	}
	for end := now() + 20*time.Second; now() < end && !allFinal(); {
		clock.Add(poll)
		pollAll()
	}
	for range 2 { // the last timers and releases
		clock.Add(2 * fuzzBudget)
		pollAll()
	}
	for seq, m := range reqs {
		if !m.final {
			t.Fatalf("seq %d (%+v): no final result", seq, m)
		}
	}
	if reqs, timers := c.InFlight(testZone); reqs != 0 || timers != 0 {
		t.Fatalf("leak: %d requests, %d timers", reqs, timers)
	}
}
