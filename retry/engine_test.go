package retry_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

const ms = time.Millisecond

func sendTimes(sent []retrytest.Sent, at time.Duration) []time.Duration {
	out := make([]time.Duration, len(sent))
	for i := range out {
		out[i] = at
	}
	return out
}

// TestR6SimpleSchedule: the seed's worked example to the millisecond: T =
// 3000 ms, 2 retries: sends at 0, 500, 1500, and -19219 at 3000.
func TestR6SimpleSchedule(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	start := f.clock.Now()
	seq := f.send(retry.Request{Command: wire.CmdGet, Table: "t", Key: []byte("k1"), AsyncID: 77, UserBuffer: []byte("ub")})
	if len(f.tr.Sent()) != 1 {
		t.Fatal("first send missing")
	}
	gs := f.runSchedule(start, []step{
		{at: 499 * ms},
		{at: 500 * ms, sends: "500ms"},
		{at: 1499 * ms},
		{at: 1500 * ms, sends: "1.5s"},
		{at: 2999 * ms},
		{at: 3000 * ms, want: "-19219@3s"},
		{at: 3100 * ms},
	})
	if r := gs[0]; r.seq != seq || r.asyncID != 77 || r.user != "ub" || r.attempts != 3 {
		t.Fatalf("final: seq %d, async ID %d, user %q, %d attempts; want %d, 77, \"ub\", 3", r.seq, r.asyncID, r.user, r.attempts, seq)
	}
	st := f.stats()
	if st.RetriesTimeout != 2 || st.Exhausted != 1 || st.FinalResults != 1 || st.ReadsSent != 1 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR10ComplexSchedule: T = 6000 ms, 2 retries: waits of 1000, 2000 and
// 3000 ms between packets, then -19219 (the seed's §4.2 example). A packet
// that arrives restarts the wait; the retry count never goes back.
func TestR10ComplexSchedule(t *testing.T) {
	t.Run("silent", func(t *testing.T) {
		f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
		start := f.clock.Now()
		f.send(retry.Request{Command: wire.CmdBatchGet, Keys: [][]byte{[]byte("a"), []byte("b")}, AsyncID: 1})
		f.tr.Sent()
		f.runSchedule(start, []step{
			{at: 999 * ms},
			{at: 1000 * ms, sends: "1s"},
			{at: 2999 * ms},
			{at: 3000 * ms, sends: "3s"},
			{at: 5999 * ms},
			{at: 6000 * ms, want: "-19219@6s"},
			{at: 6100 * ms},
		})
		f.drained()
	})
	t.Run("packets restart the wait", func(t *testing.T) {
		f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
		start := f.clock.Now()
		f.send(retry.Request{Command: wire.CmdBatchGet, Keys: [][]byte{[]byte("a"), []byte("b"), []byte("c")}, AsyncID: 1})
		first := f.tr.Sent()[0]
		deliver := func(idx uint32, attempt uint16, p retry.Proxy) {
			req := first.Request()
			var rb wire.ResponseBuilder
			rb.Start(nil, wire.ResponseHeader{Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), HaveMore: true, Attempt: attempt})
			_ = rb.AddRecord(uint64(idx), 0, nil, []byte("v"))
			f.tr.Deliver(p, rb.Frame())
		}
		var sends []time.Duration
		var results []got
		run := func(until time.Duration) {
			for f.clock.Now().Sub(start) < until {
				f.clock.Add(ms)
				for _, g := range f.poll() {
					g.at = f.clock.Now().Sub(start)
					results = append(results, g)
				}
				for _, s := range f.tr.Sent() {
					sends = append(sends, f.clock.Now().Sub(start))
					first = s // later deliveries come from the latest attempt's proxy
				}
			}
		}
		run(800 * ms)
		deliver(0, 0, first.Proxy) // at 800: wait restarts, 1x = 1000 → deadline 1800
		results = append(results, f.poll()...)
		run(2500 * ms)             // re-send 1 at 1800; wait now 2x = 2000 → 3800
		deliver(1, 1, first.Proxy) // at 2500: deadline 2500 + 2000 = 4500
		results = append(results, f.poll()...)
		run(9000 * ms) // re-send 2 at 4500; wait 3x → 7500: -19219
		if !slices.Equal(sends, []time.Duration{1800 * ms, 4500 * ms}) {
			t.Fatalf("re-sends at %v, want [1.8s 4.5s]", sends)
		}
		fin := finals(results)
		if len(results) != 3 || len(fin) != 1 || fin[0].at != 7500*ms || fin[0].result != retry.ResultReadRetryTimeout {
			t.Fatalf("results %+v", results)
		}
		f.drained()
	})
}

// TestR13ProxyOrder: hosts A:1, A:2, B:1, C:1, A:1 silent: the re-send
// goes to an untried host; then the other untried host; then the untried
// port of a tried host; then, all tried, the least recently tried.
func TestR13ProxyOrder(t *testing.T) {
	px := []retry.Proxy{{Host: "A", Port: 1}, {Host: "A", Port: 2}, {Host: "B", Port: 1}, {Host: "C", Port: 1}}
	f := newFixture(t, px, "conf://ReadRetryMaxCnt=6")
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	var order []retry.Proxy
	for i := 0; i < 3500; i++ {
		f.clock.Add(ms)
		f.poll()
		for _, s := range f.tr.Sent() {
			order = append(order, s.Proxy)
		}
	}
	if len(order) != 7 || order[0] != px[0] {
		t.Fatalf("order %v", order)
	}
	hosts := map[string]bool{"A": true}
	for i := 1; i <= 2; i++ { // B and C, in some order
		if hosts[order[i].Host] {
			t.Fatalf("attempt %d went to tried host: %v", i+1, order)
		}
		hosts[order[i].Host] = true
	}
	if order[3] != px[1] {
		t.Fatalf("attempt 4 should be the untried port A:2: %v", order)
	}
	// All tried: least recently tried first: A:1, then the first of B/C, then the second.
	if order[4] != px[0] || order[5] != order[1] || order[6] != order[2] {
		t.Fatalf("reuse order %v", order)
	}
	f.drained()

	// Unavailable proxies are skipped; a single proxy is reused.
	g := newFixture(t, px[:1], seedConf)
	g.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	g.step(3000*ms, g.clock.Now())
	if n := g.tr.Sends(px[0]); n != 3 {
		t.Fatalf("single proxy got %d sends, want 3", n)
	}
	h := newFixture(t, px, seedConf)
	h.tr.SetAvailable(px[2], false)
	h.tr.SetAvailable(px[3], false)
	h.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	h.step(3000*ms, h.clock.Now())
	if h.tr.Sends(px[2])+h.tr.Sends(px[3]) != 0 || h.tr.Sends(px[0]) != 2 || h.tr.Sends(px[1]) != 1 {
		t.Fatalf("unavailable not skipped: %d %d %d %d", h.tr.Sends(px[0]), h.tr.Sends(px[1]), h.tr.Sends(px[2]), h.tr.Sends(px[3]))
	}
}

// TestR7HedgedAnswers: the original answer arriving after the re-send is
// delivered once; the re-send's answer is dropped and counted (SPEC R7, R12).
func TestR7HedgedAnswers(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 5, UserBuffer: []byte("u")})
	orig := f.tr.Sent()[0]
	f.step(600*ms, start)
	resend := f.tr.Sent()
	if len(resend) != 1 || resend[0].Proxy == orig.Proxy || resend[0].Request().Attempt() != 1 {
		t.Fatalf("re-send %+v", resend)
	}
	f.answer(orig, 0, "from-original")
	f.answer(resend[0], 0, "from-resend")
	f.answer(orig, 0, "network-duplicate")
	gs := f.poll()
	if len(gs) != 1 || gs[0].result != 0 || string(gs[0].recs[0].Value) != "from-original" || gs[0].asyncID != 5 || gs[0].user != "u" {
		t.Fatalf("responses %+v", gs)
	}
	if st := f.stats(); st.DuplicatesDropped != 2 || st.FinalResults != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Nothing more, ever: no timeout after the answer.
	if more := f.step(5000*ms, start); len(more) != 0 {
		t.Fatalf("extra responses %+v", more)
	}
	f.drained()
}

// TestR8ErrorCode: an answer with a listed error code and retries left is
// not delivered; the read is re-sent at once to another proxy and the next
// segment starts then. With no retry left the answer is held while another
// attempt may still answer (SPEC R8 round 2), and delivered as it is when
// the budget ends, with the exhaustion line logged.
func TestR8ErrorCode(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 9, UserBuffer: []byte("ub")})
	s0 := f.tr.Sent()[0]
	f.step(100*ms, start)
	f.answer(s0, retry.ResultProxySwiftTimeout, "")
	if gs := f.poll(); len(gs) != 0 {
		t.Fatalf("error code delivered: %+v", gs)
	}
	s1 := f.tr.Sent()
	if len(s1) != 1 || s1[0].Proxy == s0.Proxy {
		t.Fatalf("no immediate re-send to another proxy: %+v", s1)
	}
	// Segment 2 lasts 2x = 1000 ms from 100 ms: the next re-send is at 1100.
	var sends []time.Duration
	for f.clock.Now().Sub(start) < 1200*ms {
		f.clock.Add(ms)
		if gs := f.poll(); len(gs) != 0 {
			t.Fatalf("unexpected response %+v", gs)
		}
		sends = append(sends, sendTimes(f.tr.Sent(), f.clock.Now().Sub(start))...)
	}
	if !slices.Equal(sends, []time.Duration{1100 * ms}) {
		t.Fatalf("re-sends at %v, want [1.1s]", sends)
	}
	// No retry left, the third attempt (sent at 1100 ms) still out: the
	// code is held past segment 3's end (3x = 1500 ms from 1100, 2600 ms)
	// until first send + T = 3000 ms (SPEC §7 R9/R8/R19: an error-code
	// re-send never moves the read's end earlier), then delivered as it is,
	// not -19219.
	f.answer(s1[0], retry.ResultProxySwiftTimeout, "")
	if gs := f.poll(); len(gs) != 0 {
		t.Fatalf("held error delivered while an attempt is out: %+v", gs)
	}
	gs := f.step(2000*ms, start)
	if len(gs) != 1 || gs[0].at != 3000*ms || gs[0].result != retry.ResultProxySwiftTimeout || gs[0].asyncID != 9 || gs[0].user != "ub" || gs[0].more {
		t.Fatalf("last error code: %+v", gs)
	}
	if st := f.stats(); st.RetriesErrorCode != 1 || st.RetriesTimeout != 1 || st.Exhausted != 1 {
		t.Fatalf("stats %+v", st)
	}
	if len(f.logs.find(retry.MsgExhausted)) != 1 {
		t.Fatal("exhaustion not logged")
	}
	f.drained()
}

// TestR9Exhaustion: the final -19219 carries the async ID, sequence number
// and user buffer exactly as sent, and is logged at error level.
func TestR9Exhaustion(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), seedConf)
	user := []byte{0, 1, 2, 255, 'x'}
	seq := f.send(retry.Request{Command: wire.CmdPBFieldGet, Key: []byte("k"), AsyncID: 1 << 60, UserBuffer: user})
	user[0] = 9 // the caller's buffer is the caller's: the copy is kept
	gs := f.step(3000*ms, f.clock.Now())
	if len(gs) != 1 || gs[0].seq != seq || gs[0].asyncID != 1<<60 || gs[0].user != "\x00\x01\x02\xffx" || gs[0].result != retry.ResultReadRetryTimeout {
		t.Fatalf("final %+v", gs)
	}
	logs := f.logs.find(retry.MsgExhausted)
	if len(logs) != 1 || logs[0].level.String() != "ERROR" || logs[0].attrs["retries"] != int64(2) || logs[0].attrs["cost_ms"] != int64(3000) {
		t.Fatalf("log %+v", logs)
	}
	f.drained()
}

func batchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte("key-" + strconv.Itoa(i))
	}
	return keys
}

// TestR11BatchPartialResend: a 100-key batch answered in packets of 10, one
// packet lost: only its 10 keys are re-sent; when the lost packet shows up
// late it is discarded; the caller gets 100 unique keys.
func TestR11BatchPartialResend(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	start := f.clock.Now()
	keys := batchKeys(100)
	f.send(retry.Request{Command: wire.CmdBatchGet, Keys: keys, AsyncID: 3, UserBuffer: []byte("batch")})
	orig := f.tr.Sent()[0]
	req := orig.Request()
	var lost []byte
	for p := 0; p < 10; p++ {
		var rb wire.ResponseBuilder
		rb.Start(nil, wire.ResponseHeader{Command: req.Command(), Seq: req.Seq(), AsyncID: req.AsyncID(), HaveMore: p < 9, Packet: uint32(p)})
		for i := p * 10; i < p*10+10; i++ {
			_ = rb.AddRecord(uint64(i), 0, keys[i], []byte("v"+strconv.Itoa(i)))
		}
		if p == 4 {
			lost = rb.Frame()
			continue
		}
		f.tr.Deliver(orig.Proxy, rb.Frame())
	}
	gs := f.poll()
	if len(gs) != 9 || finals(gs) != nil {
		t.Fatalf("%d responses before the loss is noticed, finals %v", len(gs), finals(gs))
	}
	more := f.step(1000*ms, start)
	if len(more) != 0 {
		t.Fatalf("responses %+v", more)
	}
	rs := f.tr.Sent()
	if len(rs) != 1 || rs[0].Proxy == orig.Proxy {
		t.Fatalf("re-send %+v", rs)
	}
	rr := rs[0].Request()
	var idx []uint32
	for it := rr.Keys(); ; {
		i, k, ok := it.Next()
		if !ok {
			break
		}
		if string(k) != string(keys[i]) {
			t.Fatalf("key %d re-sent as %q", i, k)
		}
		idx = append(idx, i)
	}
	if !slices.Equal(idx, []uint32{40, 41, 42, 43, 44, 45, 46, 47, 48, 49}) || rr.Attempt() != 1 || rr.Seq() != req.Seq() {
		t.Fatalf("re-sent keys %v attempt %d", idx, rr.Attempt())
	}
	// The re-send's answer, then the lost packet arriving late.
	var rb wire.ResponseBuilder
	rb.Start(nil, wire.ResponseHeader{Command: rr.Command(), Seq: rr.Seq(), AsyncID: rr.AsyncID(), Attempt: 1})
	for _, i := range idx {
		_ = rb.AddRecord(uint64(i), 0, keys[i], []byte("v"+strconv.Itoa(int(i))))
	}
	f.tr.Deliver(rs[0].Proxy, rb.Frame())
	f.tr.Deliver(orig.Proxy, lost)
	gs = append(gs, f.poll()...)
	seen := map[uint64]int{}
	for _, g := range gs {
		if g.asyncID != 3 || g.user != "batch" {
			t.Fatalf("response %+v", g)
		}
		for _, r := range g.recs {
			seen[r.Tag]++
			if string(r.Value) != "v"+strconv.Itoa(int(r.Tag)) {
				t.Fatalf("record %d value %q", r.Tag, r.Value)
			}
		}
	}
	if len(seen) != 100 {
		t.Fatalf("%d keys delivered", len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("key %d delivered %d times", k, n)
		}
	}
	fin := finals(gs)
	if len(fin) != 1 || gs[len(gs)-1].more || fin[0].result != 0 {
		t.Fatalf("finals %+v", fin)
	}
	// The late packet finds its request ended: one packet dropped.
	if st := f.stats(); st.RecordsResent != 10 || st.DuplicatesDropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR11IndexResume: an index read cut after packet 2 resumes from the
// position after the last record accepted: no gap, no duplicate, order kept.
func TestR11IndexResume(t *testing.T) {
	for _, cmd := range []wire.Command{wire.CmdGetByPartKey, wire.CmdListGetAll} {
		t.Run(cmd.String(), func(t *testing.T) {
			f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
			data := retrytest.Data{StreamLen: 50}
			start := f.clock.Now()
			f.send(retry.Request{Command: cmd, Key: []byte("guild"), AsyncID: 4})
			orig := f.tr.Sent()[0]
			req := orig.Request()
			// Packets of 10: deliver packets 0 and 1, then packet 3 (2 lost: a gap), then silence.
			pkt := func(p int, more bool) []byte {
				var rb wire.ResponseBuilder
				rb.Start(nil, wire.ResponseHeader{Command: cmd, Seq: req.Seq(), AsyncID: 4, HaveMore: more, Packet: uint32(p), Cursor: uint64(p*10 + 10)})
				for pos := uint64(p * 10); pos < uint64(p*10+10); pos++ {
					_ = rb.AddRecord(pos, 0, data.AppendStreamKey(nil, []byte("guild"), pos), data.AppendStreamValue(nil, []byte("guild"), pos))
				}
				return rb.Frame()
			}
			f.tr.Deliver(orig.Proxy, pkt(0, true))
			f.tr.Deliver(orig.Proxy, pkt(1, true))
			f.tr.Deliver(orig.Proxy, pkt(3, true))
			gs := f.poll()
			if len(gs) != 2 {
				t.Fatalf("%d responses", len(gs))
			}
			gs = append(gs, f.step(1000*ms, start)...)
			rs := f.tr.Sent()
			if len(rs) != 1 || rs[0].Request().Position() != 20 || rs[0].Request().Attempt() != 1 {
				t.Fatalf("resume %+v", rs)
			}
			// The resumed attempt answers from the retrytest proxy model, in packets of 7.
			f.tr.Replay(rs[0], retrytest.Serve(data, 7))
			gs = append(gs, f.poll()...)
			var positions []uint64
			for _, g := range gs {
				for _, r := range g.recs {
					positions = append(positions, r.Tag)
					if string(r.Key) != string(data.AppendStreamKey(nil, []byte("guild"), r.Tag)) {
						t.Fatalf("record %d key %q", r.Tag, r.Key)
					}
				}
			}
			for i, p := range positions {
				if p != uint64(i) {
					t.Fatalf("positions %v", positions)
				}
			}
			if len(positions) != 50 {
				t.Fatalf("%d records", len(positions))
			}
			fin := finals(gs)
			if len(fin) != 1 || gs[len(gs)-1].more {
				t.Fatalf("finals %+v", fin)
			}
			f.drained()
		})
	}
}

// TestR3WritesNeverRetried: a write that times out is sent once and ends
// with the ordinary wait timeout, even if the configuration lists it.
func TestR3WritesNeverRetried(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), "conf://ReadRetryCmd=1|3|7&ReadRetryMaxCnt=8")
	seq := f.send(retry.Request{Command: wire.CmdInsert, Key: []byte("k"), Value: []byte("v"), AsyncID: 8, UserBuffer: []byte("w")})
	if c, _ := f.c.Conf(testZone); slices.Contains(c.Cmds, 1) {
		t.Fatal("write kept in the configuration")
	}
	gs := f.step(6000*ms, f.clock.Now())
	if len(f.tr.Sent()) != 1 {
		t.Fatal("write re-sent")
	}
	if len(gs) != 1 || gs[0].result != retry.ResultWaitRspTimeout || gs[0].at != 5000*ms || gs[0].seq != seq || gs[0].user != "w" {
		t.Fatalf("write final %+v", gs)
	}
	if st := f.stats(); st.WritesSent != 1 || st.WaitTimeouts != 1 || st.ReadsSent != 0 || st.Contexts != 0 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR3Eligibility: retry only with a budget for the class, a zone
// configuration listing the command and MaxRetries > 0.
func TestR3Eligibility(t *testing.T) {
	cases := []struct {
		name            string
		conf            string
		simple, complex time.Duration
		cmd             wire.Command
		retried         bool
	}{
		{"on", seedConf, 3 * time.Second, 0, wire.CmdGet, true},
		{"simple budget off", seedConf, 0, 6 * time.Second, wire.CmdGet, false},
		{"complex budget off", seedConf, 3 * time.Second, 0, wire.CmdBatchGet, false},
		{"command not listed", "conf://ReadRetryCmd=103", 3 * time.Second, 0, wire.CmdGet, false},
		{"ReadRetryCmd empty", "conf://ReadRetryCmd=", 3 * time.Second, 0, wire.CmdGet, false},
		{"ReadRetryMaxCnt=0", "conf://ReadRetryMaxCnt=0", 3 * time.Second, 0, wire.CmdGet, false},
		{"no conf ever", "tcp://x:1", 3 * time.Second, 6 * time.Second, wire.CmdGet, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, hostProxies("a", "b"), c.conf)
			_ = f.c.SetReadRetryTimeout(c.simple, c.complex)
			req := retry.Request{Command: c.cmd, Key: []byte("k"), Keys: [][]byte{[]byte("k")}}
			f.send(req)
			f.step(5100*ms, f.clock.Now())
			if n := len(f.tr.Sent()); (n > 1) != c.retried {
				t.Fatalf("%d sends, retried want %v", n, c.retried)
			}
			st := f.stats()
			if !c.retried && st.ReadsWithoutContext != 1 {
				t.Fatalf("stats %+v", st)
			}
			f.drained()
		})
	}
	// A command the codec does not carry (SQL and the like) is refused.
	f := newFixture(t, hostProxies("a"), seedConf)
	if _, err := f.c.Send(testZone, &retry.Request{Command: 200}); !errors.Is(err, retry.ErrBadRequest) || !errors.Is(err, wire.ErrUnknownCommand) {
		t.Fatalf("unknown command: %v", err)
	}
}

// TestR2Cap: at the cap a read is sent without a context, not retried,
// still answered; the hit is counted and logged once (rate-limited).
func TestR2Cap(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	f.c.SetReadRetryMaxContextCountPerZone(2)
	for i := 0; i < 5; i++ {
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k" + strconv.Itoa(i)), AsyncID: uint64(i)})
	}
	sent := f.tr.Sent()
	if st := f.stats(); st.Contexts != 2 || st.CapHits != 3 || st.ReadsWithoutContext != 3 || st.ReadsSent != 5 {
		t.Fatalf("stats %+v", st)
	}
	if n := len(f.logs.find(retry.MsgReachMaxContext)); n != 1 {
		t.Fatalf("%d cap log lines, want 1 (rate-limited)", n)
	}
	// The reads over the cap are still answered.
	for _, s := range sent[2:] {
		f.answer(s, 0, "v")
	}
	gs := f.poll()
	if len(gs) != 3 {
		t.Fatalf("%d answers", len(gs))
	}
	f.step(3100*ms, f.clock.Now())
	if n := len(f.tr.Sent()); n != 4 {
		t.Fatalf("%d re-sends, want 4 (only the two contexts)", n)
	}
	// n <= 0 means the default.
	f.c.SetReadRetryMaxContextCountPerZone(-1)
	f.drained()
}

// TestR5RouteUpdates: a route update without conf:// keeps the zone's
// configuration; a malformed one is logged and keeps it too; each applied
// one is logged.
func TestR5RouteUpdates(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), seedConf)
	if err := f.c.ApplyRoute(testZone, hostProxies("a", "b", "c"), "tcp://10.0.0.1:9000"); err != nil {
		t.Fatal(err)
	}
	if c, ok := f.c.Conf(testZone); !ok || c.MaxRetries != 2 || len(c.Cmds) != 8 {
		t.Fatalf("conf lost: %+v", c)
	}
	err := f.c.ApplyRoute(testZone, hostProxies("a"), "conf://ReadRetryMaxCnt=-3")
	if !errors.Is(err, retry.ErrMalformedConf) {
		t.Fatalf("malformed: %v", err)
	}
	if c, _ := f.c.Conf(testZone); c.MaxRetries != 2 {
		t.Fatal("malformed conf applied")
	}
	if len(f.logs.find(retry.MsgBadConf)) != 1 {
		t.Fatal("malformed conf not logged")
	}
	if err := f.c.ApplyRoute(testZone, hostProxies("a"), "conf://ReadRetryMaxCnt=12"); err != nil {
		t.Fatal(err)
	}
	recv := f.logs.find(retry.MsgRecvConf)
	if len(recv) != 2 || recv[1].attrs["max_retries"] != int64(8) || len(f.logs.find(retry.MsgConfClamped)) != 1 {
		t.Fatalf("conf logs %+v", recv)
	}
	// Turned off at run time: new reads are not retried.
	if err := f.c.ApplyRoute(testZone, hostProxies("a", "b"), "conf://ReadRetryCmd="); err != nil {
		t.Fatal(err)
	}
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	f.step(5100*ms, f.clock.Now())
	if n := len(f.tr.Sent()); n != 1 {
		t.Fatalf("%d sends with retry off", n)
	}
	f.drained()
}

// TestR1BudgetChange: a request keeps the budget it was sent with; a change
// applies to requests sent after it; negative budgets are refused.
func TestR1BudgetChange(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), seedConf)
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("old"), AsyncID: 1})
	if err := f.c.SetReadRetryTimeout(600*ms, 0); err != nil {
		t.Fatal(err)
	}
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("new"), AsyncID: 2})
	gs := f.step(3100*ms, start)
	if len(gs) != 2 || gs[0].asyncID != 2 || gs[0].at != 600*ms || gs[1].asyncID != 1 || gs[1].at != 3000*ms {
		t.Fatalf("finals %+v", gs)
	}
	if err := f.c.SetReadRetryTimeout(-1, 0); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("negative: %v", err)
	}
	if err := f.c.SetReadRetryTimeout(0, retry.MaxBudget+time.Second); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("above MaxBudget: %v", err)
	}
	if s, c := f.c.ReadRetryTimeout(); s != 600*ms || c != 0 {
		t.Fatal("refused change applied")
	}
	logs := f.logs.find(retry.MsgSetOption)
	if len(logs) != 2 || logs[1].attrs["simple_ms"] != int64(600) || logs[1].attrs["complex_ms"] != int64(0) {
		t.Fatalf("option logs %+v", logs)
	}
	f.drained()
}

// TestSendFailover: a send that fails synchronously moves the read to the
// next proxy at once; with no proxy available Send fails and keeps nothing.
func TestSendFailover(t *testing.T) {
	px := hostProxies("a", "b", "c")
	f := newFixture(t, px, seedConf)
	f.tr.SetRefusing(px[0], true)
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	s := f.tr.Sent()
	if len(s) != 1 || s[0].Proxy == px[0] {
		t.Fatalf("sent %+v", s)
	}
	if st := f.stats(); st.SendFailures != 1 || st.Contexts != 1 {
		t.Fatalf("stats %+v", st)
	}
	for _, p := range px {
		f.tr.SetRefusing(p, true)
	}
	_, err := f.c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k2")})
	var code *retry.Error
	if !errors.Is(err, retry.ErrNoProxy) || !errors.As(err, &code) || code.Code != retry.ResultNoProxy {
		t.Fatalf("all refusing: %v", err)
	}
	if reqs, _ := f.c.InFlight(testZone); reqs != 1 {
		t.Fatalf("failed send kept a context: %d", reqs)
	}
	// All proxies unavailable during retries: retries are used up, the read ends once.
	gs := f.step(3100*ms, f.clock.Now())
	if len(gs) != 1 || gs[0].result != retry.ResultReadRetryTimeout {
		t.Fatalf("finals %+v", gs)
	}
	if st := f.stats(); st.RetriesNoProxy != 2 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := f.c.Send(retry.Zone{AppID: 99}, &retry.Request{Command: wire.CmdGet}); !errors.Is(err, retry.ErrUnknownZone) {
		t.Fatalf("unknown zone: %v", err)
	}
	f.drained()
}

// TestStrayAndMalformedPackets: packets from a proxy the request never
// used, with another async ID, for unknown sequence numbers, or malformed,
// are dropped and counted, never delivered (SPEC §6).
func TestStrayAndMalformedPackets(t *testing.T) {
	px := hostProxies("a", "b")
	f := newFixture(t, px, seedConf)
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 1})
	s := f.tr.Sent()[0]
	other := px[0]
	if s.Proxy == other {
		other = px[1]
	}
	req := s.Request()
	rsp := func(async uint64) []byte {
		return wire.AppendResponse(nil, wire.ResponseHeader{Command: wire.CmdGet, Seq: req.Seq(), AsyncID: async})
	}
	f.tr.Deliver(other, rsp(1))   // wrong proxy
	f.tr.Deliver(s.Proxy, rsp(2)) // wrong async ID
	f.tr.Deliver(s.Proxy, []byte("garbage"))
	f.tr.Deliver(s.Proxy, rsp(1)[:30]) // a cut frame: counted against its zone
	f.tr.Deliver(s.Proxy, wire.AppendResponse(nil, wire.ResponseHeader{Seq: 1 << 60}))
	if gs := f.poll(); len(gs) != 0 {
		t.Fatalf("delivered %+v", gs)
	}
	if st := f.stats(); st.StrayPackets != 2 || st.MalformedPackets != 1 {
		t.Fatalf("stats %+v", st)
	}
	f.tr.Deliver(s.Proxy, rsp(1))
	if gs := f.poll(); len(gs) != 1 {
		t.Fatalf("good answer: %+v", gs)
	}
	f.drained()
}

// TestR16LogLines: the four stable messages with their attributes.
func TestR16LogLines(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	if l := f.logs.find(retry.MsgSetOption); len(l) != 1 || l[0].attrs["simple_ms"] != int64(3000) {
		t.Fatalf("%s: %+v", retry.MsgSetOption, l)
	}
	l := f.logs.find(retry.MsgRecvConf)
	if len(l) != 1 || l[0].attrs["max_retries"] != int64(2) || fmt.Sprint(l[0].attrs["cmds"]) != "[7 103 15 23 117 153 25 11]" ||
		fmt.Sprint(l[0].attrs["error_codes"]) != "[-7953]" || l[0].attrs["zone_id"] != uint64(3) {
		t.Fatalf("%s: %+v", retry.MsgRecvConf, l)
	}
	f.c.SetReadRetryMaxContextCountPerZone(1)
	for i := 0; i < 3; i++ {
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	}
	if l := f.logs.find(retry.MsgReachMaxContext); len(l) != 1 || l[0].attrs["max_context_count"] != int64(1) {
		t.Fatalf("%s: %+v", retry.MsgReachMaxContext, l)
	}
	f.step(3000*ms, f.clock.Now())
	if l := f.logs.find(retry.MsgExhausted); len(l) != 1 || l[0].attrs["retries"] != int64(2) {
		t.Fatalf("%s: %+v", retry.MsgExhausted, l)
	}
	f.drained()
}

// TestClose: Close drops every tracked request and refuses new work.
func TestClose(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	for i := 0; i < 10; i++ {
		f.send(retry.Request{Command: wire.CmdBatchGet, Keys: batchKeys(3), UserBuffer: []byte("x")})
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := f.c.InFlight(testZone); reqs != 0 {
		t.Fatalf("%d requests after Close", reqs)
	}
	if _, err := f.c.Send(testZone, &retry.Request{Command: wire.CmdGet}); !errors.Is(err, retry.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if _, ok := f.c.RecvResponse(); ok {
		t.Fatal("response after Close")
	}
	_ = f.c.Close()
}

// TestR14TimersUnderLoad: packets already received are handled before
// timers — the reads answered before the stall all succeed — but a busy
// inbox cannot hold timers back for long: the wheels advance at least every
// 16,384 packets, so the write's timeout comes within that many responses.
func TestR14TimersUnderLoad(t *testing.T) {
	px := hostProxies("a")
	f := newFixture(t, px, seedConf)
	f.tr.SetLog(false)
	// One write whose answer never comes, and 17,000 reads answered at once.
	f.send(retry.Request{Command: wire.CmdInsert, Key: []byte("w"), AsyncID: 1 << 40})
	f.tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	for i := 0; i < 17000; i++ {
		f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(i)})
	}
	f.clock.Add(6 * time.Second) // the poller stalled: every deadline has passed
	firstLate, writeDone := 0, false
	for n := 1; ; n++ {
		rsp, ok := f.c.RecvResponse()
		if !ok {
			break
		}
		if rsp.AsyncID() == 1<<40 {
			if rsp.Result() != retry.ResultWaitRspTimeout {
				t.Fatalf("write ended with %d", rsp.Result())
			}
			writeDone = true
		}
		if rsp.Result() != retry.ResultOK && firstLate == 0 {
			firstLate = n
		}
	}
	// Before the forced advance every queued answer wins; at it the timers
	// fire (the reads still queued then lose to their deadlines: the
	// documented trade) and the write times out.
	if firstLate != 16385 || !writeDone {
		t.Fatalf("first timed-out result at response %d (want 16385), write timed out: %v", firstLate, writeDone)
	}
	f.drained()
}
