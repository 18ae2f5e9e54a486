package retry_test

// Held answers and per-record error codes (SPEC R7 over R8, R8b): an error that cannot be re-sent
// waits for a better answer.

import (
	"fmt"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

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
			sent := &sentLog{f: f}
			start := f.clock.Now()
			f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 4, UserBuffer: []byte("ub")})
			final := "-7953@3s"
			if p1Answers {
				final = "0@1.501s"
			}
			gs := f.runSteps(start, []step{
				{at: 1000 * ms, do: func() {
					if s1 := sent.get(1); s1.Proxy == sent.get(0).Proxy {
						t.Fatalf("re-send at 1000 ms to the first attempt's proxy %v", s1.Proxy)
					}
					f.answer(sent.get(1), retry.ResultProxySwiftTimeout, "")
				}},
				{at: 1500 * ms, do: func() { // the hedge's error is held, not delivered
					if p1Answers {
						f.answer(sent.get(0), retry.ResultOK, "v")
					}
				}},
				{at: 3500 * ms, want: final},
			})
			g := gs[0]
			if g.user != "ub" || g.asyncID != 4 || p1Answers && (len(g.recs) != 1 || string(g.recs[0].Value) != "v") {
				t.Fatalf("final %+v", g)
			}
			wantExhausted, wantLines := uint64(1), 1
			if p1Answers {
				wantExhausted, wantLines = 0, 0
			}
			if st := f.stats(); st.Exhausted != wantExhausted || st.FinalResults != 1 {
				t.Fatalf("Exhausted %d, FinalResults %d; want %d, 1", st.Exhausted, st.FinalResults, wantExhausted)
			}
			if n := len(f.logs.find(retry.MsgExhausted)); n != wantLines {
				t.Fatalf("%d exhaustion lines, want %d", n, wantLines)
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
