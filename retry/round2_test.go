package retry_test

// Round-2 regressions of the engine's semantics (issue 12, issue 17 items
// 11-12): inputs taken from other retry and hedging clients' public bug
// reports and from edge cases a new user would try. Each test is named by
// the requirement that gives its expected value; all run on the fake clock
// and retrytest, without sleeping.

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

func confWith(maxCnt int, codes string) string {
	return fmt.Sprintf("conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=%s&ReadRetryMaxCnt=%d", codes, maxCnt)
}

// TestR8HeldErrorLosesToLateGoodAnswer: ReadRetryMaxCnt=1, simple budget
// 3000 ms (x = 2T/((n+1)(n+2)) = 1000 ms). Attempt 1 to P1 is slow; the
// re-send at 1000 ms goes to P2, which answers -7953 at once. SPEC R7 over
// R8: with no retry left that error is held, so P1's OK at 1500 ms is what
// the caller gets; with P1 silent, the held -7953 comes at 3000 ms, once,
// never -19219. Other drivers had exactly this fault (a hedge's error
// reached the caller although the first attempt then succeeded).
func TestR8HeldErrorLosesToLateGoodAnswer(t *testing.T) {
	for _, p1Answers := range []bool{true, false} {
		t.Run(fmt.Sprintf("p1Answers=%v", p1Answers), func(t *testing.T) {
			f := newFixture(t, hostProxies("p1", "p2"), confWith(1, "-7953"))
			start := f.clock.Now()
			f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 4, UserBuffer: []byte("ub")})
			s0 := f.tr.Sent()[0]
			if gs := f.step(1000*ms, start); len(gs) != 0 {
				t.Fatalf("responses before the re-send: %+v", gs)
			}
			s1 := f.tr.Sent()
			if len(s1) != 1 || s1[0].Proxy == s0.Proxy {
				t.Fatalf("re-send at 1000 ms: %+v", s1)
			}
			f.answer(s1[0], retry.ResultProxySwiftTimeout, "")
			if gs := f.poll(); len(gs) != 0 {
				t.Fatalf("the hedge's error was delivered while attempt 1 may answer: %+v", gs)
			}
			var gs []got
			if p1Answers {
				gs = append(gs, f.step(500*ms, start)...)
				f.answer(s0, retry.ResultOK, "v")
				gs = append(gs, f.step(2000*ms, start)...)
				if len(gs) != 1 || gs[0].result != retry.ResultOK || gs[0].at != 1501*ms || len(gs[0].recs) != 1 || string(gs[0].recs[0].Value) != "v" {
					t.Fatalf("want P1's OK (polled at 1501 ms), got %+v", gs)
				}
				if st := f.stats(); st.Exhausted != 0 || st.FinalResults != 1 {
					t.Fatalf("stats %+v", st)
				}
			} else {
				gs = f.step(2500*ms, start)
				if len(gs) != 1 || gs[0].result != retry.ResultProxySwiftTimeout || gs[0].at != 3000*ms || gs[0].user != "ub" || gs[0].asyncID != 4 {
					t.Fatalf("want the held -7953 at 3000 ms, got %+v", gs)
				}
				if st := f.stats(); st.Exhausted != 1 || st.FinalResults != 1 {
					t.Fatalf("stats %+v", st)
				}
				if n := len(f.logs.find(retry.MsgExhausted)); n != 1 {
					t.Fatalf("%d exhaustion lines, want 1", n)
				}
			}
			f.drained()
		})
	}
}

// TestR8HeldErrorWhenEveryAttemptAnswered: when every attempt has answered
// with a listed code, nothing better can come: the held error is delivered
// at once, not at the budget's end (SPEC R8).
func TestR8HeldErrorWhenEveryAttemptAnswered(t *testing.T) {
	f := newFixture(t, hostProxies("p1", "p2"), confWith(1, "-7953"))
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 4})
	s0 := f.tr.Sent()[0]
	f.step(1000*ms, start)
	s1 := f.tr.Sent()[0]
	f.answer(s1, retry.ResultProxySwiftTimeout, "")
	f.poll()
	f.clock.Add(10 * ms)
	f.answer(s0, -7953, "")
	gs := f.poll()
	if len(gs) != 1 || gs[0].result != retry.ResultProxySwiftTimeout || gs[0].more {
		t.Fatalf("want the error at once, got %+v", gs)
	}
	f.drained()
}

// batchKeys4 is the BATCH_GET of the input: four keys.
func batchReq(asyncID uint64) retry.Request {
	return retry.Request{Command: wire.CmdBatchGet, Table: "t", AsyncID: asyncID, UserBuffer: []byte("ub"),
		Keys: [][]byte{[]byte("k0"), []byte("k1"), []byte("k2"), []byte("k3")}}
}

// failKey answers a batch with every key in one last packet, the record of
// key index bad carrying -7953 (SPEC R8b's input).
func failKey(bad uint32) retrytest.Handler {
	var d retrytest.Data
	return func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, 0)
		for it := req.Keys(); ; {
			idx, key, ok := it.Next()
			if !ok {
				break
			}
			if idx == bad {
				r.Record(uint64(idx), retry.ResultProxySwiftTimeout, key, nil)
			} else {
				r.Record(uint64(idx), retry.ResultOK, key, d.AppendValue(nil, key))
			}
		}
		r.Send()
	}
}

// TestR8bFailedBatchRecordIsRetried: BATCH_GET of 4 keys, 2 retries left;
// the first proxy's final packet carries key 2's record with -7953 and keys
// 0, 1, 3 OK; other proxies serve every key. SPEC R8b: key 2 counts as not
// answered, goes out again alone under its index 2, and is delivered OK
// exactly once.
func TestR8bFailedBatchRecordIsRetried(t *testing.T) {
	px := hostProxies("p1", "p2", "p3")
	f := newFixture(t, px, confWith(2, "-7953"))
	var d retrytest.Data
	f.tr.SetHandler(px[0], failKey(2))
	f.tr.SetHandler(px[1], retrytest.Serve(d, 0))
	f.tr.SetHandler(px[2], retrytest.Serve(d, 0))
	f.c.RecvResponse() // nothing yet; keeps the route's proxies opened
	f.tr.SetLog(true)
	f.send(batchReq(8))
	gs := f.poll()
	sent := f.tr.Sent()
	if len(sent) != 2 || sent[0].Proxy != px[0] {
		t.Fatalf("want the first send and one re-send, got %d sends", len(sent))
	}
	re := sent[1].Request()
	if re.KeyCount() != 1 {
		t.Fatalf("re-send carries %d keys, want 1", re.KeyCount())
	}
	it := re.Keys()
	if idx, key, _ := it.Next(); idx != 2 || string(key) != "k2" {
		t.Fatalf("re-sent key %d %q, want index 2 k2", idx, key)
	}
	seen := map[uint64]int{}
	for _, g := range gs {
		for _, r := range g.recs {
			seen[r.Tag]++
			if r.Result != retry.ResultOK || string(r.Value) != "value-of-"+string(r.Key) {
				t.Fatalf("record %+v", r)
			}
		}
	}
	if len(finals(gs)) != 1 || finals(gs)[0].result != retry.ResultOK || len(seen) != 4 || seen[0]+seen[1]+seen[2]+seen[3] != 4 {
		t.Fatalf("records per key %v, responses %+v", seen, gs)
	}
	if st := f.stats(); st.RetriesErrorCode != 1 || st.RecordsResent != 1 || st.Exhausted != 0 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR8bFailedRecordOnLastAttempt: every proxy fails key 2. With the
// retries used up, the failed record is delivered as it is, exactly once,
// once every attempt has answered (SPEC R8b, R8); the other keys once each.
func TestR8bFailedRecordOnLastAttempt(t *testing.T) {
	px := hostProxies("p1", "p2")
	f := newFixture(t, px, confWith(1, "-7953"))
	for _, p := range px {
		f.tr.SetHandler(p, failKey(2))
	}
	f.send(batchReq(9))
	gs := f.poll()
	count := map[uint64]int{}
	var key2 wire.Record
	for _, g := range gs {
		for _, r := range g.recs {
			count[r.Tag]++
			if r.Tag == 2 {
				key2 = r
			}
		}
	}
	fin := finals(gs)
	if len(fin) != 1 || fin[0].result != retry.ResultOK || len(count) != 4 || count[2] != 1 || key2.Result != retry.ResultProxySwiftTimeout {
		t.Fatalf("counts %v, key 2 %+v, responses %+v", count, key2, gs)
	}
	if st := f.stats(); st.RetriesErrorCode != 1 || f.tr.Sends(px[0])+f.tr.Sends(px[1]) != 2 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR8bFailedIndexRecordResumes: in an index read, a record with a listed
// code ends the run accepted in order; the resume starts at its position
// (SPEC R8b, R11).
func TestR8bFailedIndexRecordResumes(t *testing.T) {
	px := hostProxies("p1", "p2")
	f := newFixture(t, px, confWith(2, "-7953"))
	d := retrytest.Data{StreamLen: 10}
	f.tr.SetHandler(px[0], func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, 10)
		for pos := uint64(0); pos < 10; pos++ {
			res := retry.ResultOK
			if pos == 4 {
				res = retry.ResultProxySwiftTimeout
			}
			r.Record(pos, res, d.AppendStreamKey(nil, req.Key(), pos), d.AppendStreamValue(nil, req.Key(), pos))
		}
		r.Send()
	})
	f.tr.SetHandler(px[1], retrytest.Serve(d, 0))
	f.send(retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("g"), AsyncID: 3})
	gs := f.poll()
	sent := f.tr.Sent()
	if len(sent) != 2 || sent[1].Request().Position() != 4 {
		t.Fatalf("want a resume from position 4, got %d sends", len(sent))
	}
	var tags []uint64
	for _, g := range gs {
		for _, r := range g.recs {
			if r.Result != retry.ResultOK {
				t.Fatalf("failed record delivered: %+v", r)
			}
			tags = append(tags, r.Tag)
		}
	}
	if fmt.Sprint(tags) != "[0 1 2 3 4 5 6 7 8 9]" || len(finals(gs)) != 1 || finals(gs)[0].result != retry.ResultOK {
		t.Fatalf("tags %v, responses %+v", tags, gs)
	}
	f.drained()
}

// TestR14PastDueSegmentsInOnePoll: tick 1 ms, simple budget 1 ms,
// ReadRetryMaxCnt=8 (x ≈ 22 µs), polled every 1 ms, silent proxies. Every
// segment already past due is handled in the same poll: -19219 arrives by
// budget + one tick + one poll interval (3 ms), never before the budget,
// and the read is still retried 8 times (SPEC R14).
func TestR14PastDueSegmentsInOnePoll(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), confWith(8, "-7953"))
	if err := f.c.SetReadRetryTimeout(time.Millisecond, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	gs := f.step(20*ms, start)
	if len(gs) != 1 || gs[0].result != retry.ResultReadRetryTimeout || gs[0].at < time.Millisecond || gs[0].at > 3*ms || gs[0].attempts != 9 {
		t.Fatalf("want -19219 within [1 ms, 3 ms] after 9 attempts, got %+v", gs)
	}
	if st := f.stats(); st.RetriesTimeout != 8 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR14LatenessBound checks the bound SPEC R14 states for every schedule:
// with silent proxies a simple read with read retry ends no earlier than its
// budget T and no later than T + one tick + one poll interval, having sent
// all n+1 attempts; a complex read's last wait ends the same way. The model
// is the SPEC's: segments k·x, x = 2T/((n+1)(n+2)), summing to T.
func TestR14LatenessBound(t *testing.T) {
	for _, budget := range []time.Duration{time.Millisecond, 7 * ms, 300 * ms, 3 * time.Second} {
		for _, n := range []int{1, 2, 5, 8} {
			for _, poll := range []time.Duration{time.Millisecond, 3 * ms, 10 * ms} {
				name := fmt.Sprintf("T=%v/n=%d/poll=%v", budget, n, poll)
				clock := newFakeClock()
				tr := retrytest.NewTransport()
				c, err := retry.New(retry.Config{Transport: tr, Clock: clock.Now, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetReadRetryTimeout(budget, budget)
				if err := c.ApplyRoute(testZone, hostProxies("a", "b", "c"), confWith(n, "-7953")); err != nil {
					t.Fatal(err)
				}
				start := clock.Now()
				if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
					t.Fatal(err)
				}
				var at time.Duration
				for at == 0 && clock.Now().Sub(start) < 2*budget+time.Second {
					clock.Add(poll)
					if rsp, ok := c.RecvResponse(); ok {
						if rsp.Result() != retry.ResultReadRetryTimeout || rsp.Attempts() != n+1 {
							t.Fatalf("%s: result %d after %d attempts", name, rsp.Result(), rsp.Attempts())
						}
						at = clock.Now().Sub(start)
					}
				}
				if at < budget || at > budget+time.Millisecond+poll {
					t.Fatalf("%s: -19219 at %v, want within [%v, %v]", name, at, budget, budget+time.Millisecond+poll)
				}
				_ = c.Close()
			}
		}
	}
}

// TestR15OutsizedRequestBufferNotKept: a read with a 1 MiB key whose first
// attempt is lost is re-sent, then 10,000 ordinary reads follow; no buffer
// above the largest pooled size class is kept afterwards (SPEC R15: memory
// follows load). Before round 2 the re-send buffer kept 1,056,768 bytes for
// the client's lifetime.
func TestR15OutsizedRequestBufferNotKept(t *testing.T) {
	px := hostProxies("a", "b")
	f := newFixture(t, px, seedConf)
	f.tr.SetLog(false)
	start := f.clock.Now()
	big := bytes.Repeat([]byte("k"), 1<<20)
	f.send(retry.Request{Command: wire.CmdGet, Key: big})
	f.tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	f.tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	if gs := f.step(600*ms, start); len(gs) != 1 || gs[0].result != retry.ResultOK {
		t.Fatalf("the outsized read: %+v", gs)
	}
	for i := range 10_000 {
		f.send(retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "user:%d", i)})
		f.poll()
	}
	if n := retry.RetainedBufBytes(f.c); n > retry.MaxRetainedBuf {
		t.Fatalf("a %d-byte buffer is kept, want none above %d", n, retry.MaxRetainedBuf)
	}
	f.drained()
}

// TestR5RequestKeepsItsErrorCodes: a read sent while the zone's list is
// -7953 keeps that list after a route update changes it to -1: its attempt
// answering -7953 is re-sent, not delivered (SPEC R5 round 2: a request
// keeps its whole configuration — budget, MaxRetries and error codes).
func TestR5RequestKeepsItsErrorCodes(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b", "c"), confWith(2, "-7953"))
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 1})
	s0 := f.tr.Sent()[0]
	if err := f.c.ApplyRoute(testZone, f.px, confWith(2, "-1")); err != nil {
		t.Fatal(err)
	}
	f.answer(s0, retry.ResultProxySwiftTimeout, "")
	if gs := f.poll(); len(gs) != 0 {
		t.Fatalf("delivered under the new list: %+v", gs)
	}
	if re := f.tr.Sent(); len(re) != 1 {
		t.Fatalf("%d re-sends, want 1", len(re))
	}
	// A read sent after the update uses the new list: -7953 is an answer.
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k2"), AsyncID: 2})
	s := f.tr.Sent()
	f.answer(s[0], retry.ResultProxySwiftTimeout, "")
	if gs := f.poll(); len(gs) != 1 || gs[0].asyncID != 2 || gs[0].result != retry.ResultProxySwiftTimeout {
		t.Fatalf("new read: %+v", gs)
	}
}

// TestR5HugeMaxCntClamped: ReadRetryMaxCnt=99999999999 is clamped to 8 with
// the warning, like any value above 8 (SPEC R5 round 2), and the zone
// retries 8 times.
func TestR5HugeMaxCntClamped(t *testing.T) {
	f := newFixture(t, hostProxies("a"), confWith(2, "-7953"))
	if err := f.c.ApplyRoute(testZone, f.px, "conf://ReadRetryMaxCnt=99999999999"); err != nil {
		t.Fatal(err)
	}
	if c, _ := f.c.Conf(testZone); c.MaxRetries != 8 {
		t.Fatalf("MaxRetries %d", c.MaxRetries)
	}
	l := f.logs.find(retry.MsgConfClamped)
	if len(l) != 1 || l[0].attrs["read_retry_max_cnt"] != "99999999999" || l[0].attrs["used"] != int64(8) {
		t.Fatalf("clamp log %+v", l)
	}
}

// TestR5ErrorCodeListBound: a bloated conf:// (160,000 error codes, 1.1 MB,
// issue 17 item 11) is malformed: refused with the old configuration kept
// and logged, before any quadratic work (SPEC R5 round 2).
func TestR5ErrorCodeListBound(t *testing.T) {
	f := newFixture(t, hostProxies("a"), confWith(2, "-7953"))
	var b strings.Builder
	b.WriteString("conf://ReadRetryErrorCode=")
	for i := range 160_000 {
		fmt.Fprintf(&b, "-%d|", 1000000+i)
	}
	if err := f.c.ApplyRoute(testZone, f.px, b.String()); err == nil {
		t.Fatal("accepted 160,000 error codes")
	}
	if c, _ := f.c.Conf(testZone); len(c.ErrorCodes) != 1 || c.ErrorCodes[0] != -7953 {
		t.Fatalf("configuration not kept: %+v", c)
	}
	if len(f.logs.find(retry.MsgBadConf)) != 1 {
		t.Fatal("not logged")
	}
}

// TestR17UnknownAndLateApart: a frame naming no zone of the client counts
// client-wide; one naming a sequence number its zone never sent counts as
// UnknownSeq, not as a duplicate; a late answer counts as a duplicate; a
// malformed frame counts client-wide and in its zone; both unknowns are
// logged, rate-limited (SPEC R17, §6).
func TestR17UnknownAndLateApart(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), seedConf)
	seq := f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 1})
	s0 := f.tr.Sent()[0]
	f.answer(s0, retry.ResultOK, "v")
	f.poll()
	f.answer(s0, retry.ResultOK, "v") // late
	deliver := func(seq uint64) {
		var rb wire.ResponseBuilder
		rb.Start(nil, wire.ResponseHeader{Command: wire.CmdGet, Seq: seq, AsyncID: 1})
		f.tr.Deliver(f.px[0], rb.Frame())
	}
	deliver(seq + 1000)         // the zone never sent it
	deliver(seq + 7<<40)        // no such zone
	deliver(seq &^ (1<<40 - 1)) // counter 0: never sent
	f.tr.Deliver(f.px[0], []byte("RR\x01\x02garbage"))
	f.poll()
	st := f.stats()
	if st.DuplicatesDropped != 1 || st.UnknownSeq != 2 {
		t.Fatalf("zone stats %+v", st)
	}
	if cs := f.c.ClientStats(); cs.UnknownZoneFrames != 1 || cs.MalformedFrames != 1 {
		t.Fatalf("client stats %+v", cs)
	}
	if l := f.logs.find(retry.MsgUnknownSeq); len(l) != 1 || l[0].attrs["suppressed"] != uint64(0) {
		t.Fatalf("unknown-seq log lines %+v (want 1: rate-limited to one a second)", l)
	}
	f.clock.Add(2 * time.Second)
	deliver(seq + 2000)
	f.poll()
	if l := f.logs.find(retry.MsgUnknownSeq); len(l) != 2 || l[1].attrs["suppressed"] != uint64(2) {
		t.Fatalf("second line %+v, want 2 suppressed before it", l)
	}
}

// TestPlainRequestOverallCap: a request without read retry whose proxy
// keeps sending "more packets follow" every 50 ms ends with
// ResultWaitRspTimeout after Config.MaxWaitTotal (16 × the 100 ms wait
// timeout by default), however many packets came (issue 17 item 12).
func TestPlainRequestOverallCap(t *testing.T) {
	clock := newFakeClock()
	tr := retrytest.NewTransport()
	tr.SetLog(true)
	c, err := retry.New(retry.Config{Transport: tr, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler), WaitTimeout: 100 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyRoute(testZone, hostProxies("a"), ""); err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdInsert, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	req := tr.Sent()[0]
	var end time.Duration
	packets := 0
	for ; end == 0 && clock.Now().Sub(start) < time.Hour; clock.Add(ms) {
		if clock.Now().Sub(start)%(50*ms) == 0 {
			tr.Replay(req, func(r wire.Request, rp *retrytest.Replier) {
				rp.Start(r, retry.ResultOK, true, uint32(packets), 0)
				rp.Send()
			})
			packets++
		}
		for {
			rsp, ok := c.RecvResponse()
			if !ok {
				break
			}
			if !rsp.HaveMore() {
				if rsp.Result() != retry.ResultWaitRspTimeout {
					t.Fatalf("final result %d", rsp.Result())
				}
				end = clock.Now().Sub(start)
			}
		}
	}
	if end != 1600*ms {
		t.Fatalf("ended at %v after %d packets, want 1.6s", end, packets)
	}
}

// stormRun sends reads at 2000/s for 5 s of fake time (a poll every 1 ms)
// to four hosts whose handlers serve or stay silent, budgets 300/600 ms,
// ReadRetryMaxCnt=2, and returns the attempts sent per read, the share of
// reads answered OK and the zone's stats once every read has ended.
func stormRun(t *testing.T, cfg retry.Config, dark int) (attemptsPerRead, okShare float64, st retry.Stats) {
	t.Helper()
	clock := newFakeClock()
	tr := retrytest.NewTransport()
	px := hostProxies("h0", "h1", "h2", "h3")
	for i, p := range px {
		if i >= dark {
			tr.SetHandler(p, retrytest.Serve(retrytest.Data{}, 0))
		}
	}
	cfg.Transport, cfg.Clock, cfg.Logger = tr, clock.Now, quiet
	c, err := retry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(300*ms, 600*ms)
	if err := c.ApplyRoute(testZone, px, confWith(2, "-7953")); err != nil {
		t.Fatal(err)
	}
	const reads = 10_000
	ok, finals := 0, 0
	poll := func() {
		for {
			rsp, more := c.RecvResponse()
			if !more {
				return
			}
			if !rsp.HaveMore() {
				finals++
				if rsp.Result() == retry.ResultOK {
					ok++
				}
			}
		}
	}
	for i := range reads {
		if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "k%d", i)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			clock.Add(ms)
			poll()
		}
	}
	for finals < reads {
		clock.Add(ms)
		poll()
	}
	sends := 0
	for _, p := range px {
		sends += tr.Sends(p)
	}
	st, _ = c.Stats(testZone)
	return float64(sends) / reads, float64(ok) / reads, st
}

// TestR19StormGuard: each zone's retry budget (SPEC R19, B4 semantics) holds
// the all-proxies-down case to at most 1.5 attempts per read (1 + 2 retries
// = 3 without it) with the defaults, and keeps the single-dark-host case
// whole: one host of four silent, at least 99.9% of reads still succeed.
// A refused re-send is not sent and is counted; the read waits for its
// attempts already out until its budget ends (-19219 at the budget, not
// earlier). With NoRetryBudget every retry goes out.
func TestR19StormGuard(t *testing.T) {
	att, _, st := stormRun(t, retry.Config{}, 4)
	t.Logf("all down: %.3f attempts per read, %+v", att, st)
	// The model: retries granted ≤ 0.4 × reads in the window + the floor
	// (10/s × 10 s = 100), so ≤ 1 + 0.4 + 100/10,000 attempts per read.
	if att > 1.5 || att < 1.3 {
		t.Fatalf("all proxies down: %.3f attempts per read, want within [1.3, 1.5]", att)
	}
	granted := st.RetriesTimeout
	if st.RetriesRefused == 0 || granted+st.RetriesRefused > 2*10_000 || float64(granted) > 0.4*10_000+100+1 {
		t.Fatalf("stats %+v", st)
	}
	if st.Exhausted != 10_000 || st.Contexts != 0 {
		t.Fatalf("every read must end with -19219 once: %+v", st)
	}

	att, okShare, st := stormRun(t, retry.Config{}, 1)
	if okShare < 0.999 {
		t.Fatalf("one host of four dark: %.4f of reads ok, want ≥ 0.999 (stats %+v)", okShare, st)
	}
	if att > 1.3 {
		t.Fatalf("one host dark: %.3f attempts per read", att)
	}

	att, _, st = stormRun(t, retry.Config{NoRetryBudget: true}, 4)
	if att != 3 || st.RetriesRefused != 0 {
		t.Fatalf("storm guard off: %.3f attempts per read, %d refused; want 3, 0", att, st.RetriesRefused)
	}
	if _, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), RetryBudget: budget.Config{Ratio: -1}}); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("bad budget config: %v", err)
	}
}

// TestR19RefusedReadWaitsForItsBudget: with a budget that grants nothing
// (no floor, ratio 0.1 and a single read), the read's re-send is refused:
// nothing more is sent and it ends at its budget's end — 3000 ms for a
// simple read, not at the first segment's end.
func TestR19RefusedReadWaitsForItsBudget(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), seedConf)
	c, err := retry.New(retry.Config{Transport: f.tr, Clock: f.clock.Now, Logger: quiet,
		RetryBudget: budget.Config{Ratio: 0.1, MinRetriesPerSecond: budget.NoFloor}})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	_ = c.SetReadRetryTimeout(3000*ms, 6000*ms)
	if err := c.ApplyRoute(testZone, f.px, seedConf); err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	f.tr.Sent()
	gs := f.step(3100*ms, start)
	if len(gs) != 1 || gs[0].result != retry.ResultReadRetryTimeout || gs[0].at != 3000*ms || gs[0].attempts != 1 {
		t.Fatalf("want -19219 at 3000 ms after 1 attempt, got %+v", gs)
	}
	if n := len(f.tr.Sent()); n != 0 {
		t.Fatalf("%d re-sends went out after the refusal", n)
	}
	if st := f.stats(); st.RetriesRefused != 1 || st.RetriesTimeout != 0 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestR15IdleZonesAreCheap: 1,000 zones with a conf:// element and no
// traffic cost at most 16 KiB each (SPEC R15 round 2: memory follows the
// contexts in flight, not the cap; before round 2 each cost about 300 KB,
// its timing wheel sized for two million timers when the zone was added).
// The per-zone figure goes into the README's R15 formula.
func TestR15IdleZonesAreCheap(t *testing.T) {
	const zones = 1000
	c, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := hostProxies("a", "b")
	_ = c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: 0}, px, seedConf) // proxies and the registries' first growth
	before := heapInUse()
	for i := 1; i <= zones; i++ {
		if err := c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: uint32(i)}, px, seedConf); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(heapInUse()-before) / zones
	t.Logf("idle zone: %.0f bytes", per)
	if per > 16<<10 {
		t.Fatalf("an idle zone costs %.0f bytes, want at most 16 KiB", per)
	}
}

// heapInUse returns the live heap bytes after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestApplyRouteChangesNothingOnError: found by a fresh-clone probe. A route
// update refused for too many proxy endpoints must leave the client as it
// was (no new zone), and duplicates in a route count once toward
// MaxProxies (SPEC §6: bad input gets a clear error and changes nothing).
// Round 3 (SPEC R22): one update lists at most MaxRouteProxies entries, and
// the client knows at most MaxProxies endpoints at once across its zones.
func TestApplyRouteChangesNothingOnError(t *testing.T) {
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	many := make([]retry.Proxy, retry.MaxRouteProxies+1)
	for i := range many {
		many[i] = retry.Proxy{Host: fmt.Sprintf("h%d", i/8), Port: uint16(i % 8)}
	}
	zone := retry.Zone{AppID: 9, ZoneID: 9}
	if err := c.ApplyRoute(zone, many, ""); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("too many proxies: %v", err)
	}
	if _, err := c.Stats(zone); !errors.Is(err, retry.ErrUnknownZone) || len(c.Zones()) != 0 || tr.Opened() != 0 {
		t.Fatalf("the refused update added its zone or opened proxies: %v, zones %v, opened %d", err, c.Zones(), tr.Opened())
	}
	same := make([]retry.Proxy, retry.MaxRouteProxies)
	for i := range same {
		same[i] = retry.Proxy{Host: "one", Port: 1}
	}
	if err := c.ApplyRoute(zone, same, ""); err != nil {
		t.Fatalf("%d copies of one proxy: %v", len(same), err)
	}
	if p, ok := c.ProxyOf(1); !ok || p != same[0] {
		t.Fatalf("proxy 1: %v %v", p, ok)
	}
	if _, ok := c.ProxyOf(2); ok {
		t.Fatal("a duplicate got an id of its own")
	}
	// MaxProxies endpoints at once, over many zones: the zone that would
	// need one more is refused whole.
	port := 0
	next := func(n int) []retry.Proxy {
		ps := make([]retry.Proxy, n)
		for i := range ps {
			ps[i] = retry.Proxy{Host: fmt.Sprintf("m%d", port/1000), Port: uint16(port % 1000)}
			port++
		}
		return ps
	}
	left := retry.MaxProxies - 1 // "one" holds an ID
	for zi := uint32(0); left > 0; zi++ {
		n := min(left, retry.MaxRouteProxies)
		if err := c.ApplyRoute(retry.Zone{AppID: 10, ZoneID: zi}, next(n), ""); err != nil {
			t.Fatalf("zone %d: %v", zi, err)
		}
		left -= n
	}
	extra := retry.Zone{AppID: 11}
	if err := c.ApplyRoute(extra, next(1), ""); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("endpoint %d: %v", retry.MaxProxies+1, err)
	}
	if _, err := c.Stats(extra); !errors.Is(err, retry.ErrUnknownZone) || tr.Proxies() != retry.MaxProxies {
		t.Fatalf("the refused update changed the client: %v, %d proxies open", err, tr.Proxies())
	}
}

// TestNewRejectsTraps: configurations that would only fail later, or
// quietly stretch every schedule, are refused by New with ErrInvalidConfig
// (SPEC §6). Found by a fresh-clone probe: Shards 3 made every ApplyRoute
// fail, and an hour-long Tick kept a 300 ms read from ever ending.
func TestNewRejectsTraps(t *testing.T) {
	for name, cfg := range map[string]retry.Config{
		"shards 3":          {Shards: 3},
		"shards 2^40":       {Shards: 1 << 40},
		"tick 1h":           {Tick: time.Hour},
		"poll interval max": {PollInterval: 1<<63 - 1},
		"wait timeout 1y":   {WaitTimeout: 365 * 24 * time.Hour},
		"waiting 2^30":      {MaxWaitingPerZone: 1 << 30},
		"negative":          {Tick: -1},
		"budget ratio":      {RetryBudget: budget.Config{Ratio: 100}},
	} {
		cfg.Transport = retrytest.NewTransport()
		if c, err := retry.New(cfg); !errors.Is(err, retry.ErrInvalidConfig) || c != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Shards: 8, Tick: retry.MaxTick, PollInterval: retry.MaxTick}); err != nil {
		t.Fatalf("valid limits refused: %v", err)
	}
}
