package retry_test

// Every give-up is visible (SPEC R8b, R9, R17, §7 "R8b/R17/R20 — every
// give-up is visible").

import (
	"context"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

// failPosition answers an index read with its whole stream from the
// position asked for in one last packet, the record at position bad
// carrying -7953 (SPEC R8b's input for index reads).
func failPosition(bad uint64, streamLen uint64) retrytest.Handler {
	d := retrytest.Data{StreamLen: int(streamLen)}
	return func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, streamLen)
		for pos := req.Position(); pos < streamLen; pos++ {
			res := retry.ResultOK
			if pos == bad {
				res = retry.ResultProxySwiftTimeout
			}
			r.Record(pos, res, d.AppendStreamKey(nil, req.Key(), pos), d.AppendStreamValue(nil, req.Key(), pos))
		}
		r.Send()
	}
}

// TestGiveUpWithFailedRecordsIsCounted: the input. A batch whose
// key 2 fails with a listed code on every attempt (MaxCnt=1: two attempts)
// is delivered once inside an OK final; so is an index read whose position
// 4 fails on every attempt. Each is a give-up: Exhausted +1, RecordsFailed
// +1 (the one record no attempt answered well), one MsgExhausted line —
// before round 3 both stayed 0 and nothing was logged.
func TestGiveUpWithFailedRecordsIsCounted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler retrytest.Handler
		req     retry.Request
		records int
	}{
		{"batch", failKey(2), batchReq(7), 4},
		{"index", failPosition(4, 10), retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("g"), AsyncID: 7}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hostProxies("p1", "p2"), confWith(1, "-7953"))
			for _, p := range f.px {
				f.tr.SetHandler(p, tc.handler)
			}
			f.send(tc.req)
			gs := f.poll()
			fin := finals(gs)
			recs, failed := 0, 0
			for _, g := range gs {
				for _, r := range g.recs {
					recs++
					if r.Result != retry.ResultOK {
						failed++
					}
				}
			}
			if len(fin) != 1 || fin[0].result != retry.ResultOK || recs != tc.records || failed != 1 {
				t.Fatalf("%d finals (%+v), %d records of which %d failed; want one OK final, %d records, 1 failed", len(fin), fin, recs, failed, tc.records)
			}
			st := f.stats()
			if st.Exhausted != 1 || st.RecordsFailed != 1 || st.RetriesErrorCode != 1 {
				t.Fatalf("Exhausted %d, RecordsFailed %d, RetriesErrorCode %d; want 1, 1, 1", st.Exhausted, st.RecordsFailed, st.RetriesErrorCode)
			}
			if l := f.logs.find(retry.MsgExhausted); len(l) != 1 || l[0].attrs["result"] != int64(retry.ResultOK) {
				t.Fatalf("exhaustion lines %+v, want one with result 0", l)
			}
			f.drained()
		})
	}
}

// TestDoReportsFailedRecords: Do returns nil for a batch whose key 2 no
// attempt answered well — its packets arrived — and Result.Failed says one
// of its four records carries a non-zero result (SPEC §7 R8b/R17/R20).
func TestDoReportsFailedRecords(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := servingClient(t, 0, "a", "b")
	defer c.Close()
	for _, p := range px {
		tr.SetHandler(p, failKey(2))
	}
	if err := c.ApplyRoute(testZone, px, confWith(1, "-7953")); err != nil {
		t.Fatal(err)
	}
	var res retry.Result
	req := batchReq(1)
	if err := c.Do(context.Background(), testZone, &req, &res); err != nil {
		t.Fatalf("Do: %v, want nil", err)
	}
	if res.Len() != 4 || res.Failed() != 1 || res.Code() != retry.ResultOK {
		t.Fatalf("%d records, %d failed, code %d; want 4, 1, 0", res.Len(), res.Failed(), res.Code())
	}
	for i := range res.Len() {
		if r := res.Record(i); (r.Result != retry.ResultOK) != (r.Tag == 2) {
			t.Fatalf("record %+v", r)
		}
	}
	// Failed is per call: a clean read on the same Result reports 0.
	tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	tr.SetHandler(px[1], retrytest.Serve(retrytest.Data{}, 0))
	if err := c.Do(context.Background(), testZone, &req, &res); err != nil || res.Failed() != 0 || res.Len() != 4 {
		t.Fatalf("clean batch: %v, %d failed of %d", err, res.Failed(), res.Len())
	}
	if st, _ := c.Stats(testZone); st.Exhausted != 1 || st.RecordsFailed != 1 {
		t.Fatalf("Exhausted %d, RecordsFailed %d; want 1, 1", st.Exhausted, st.RecordsFailed)
	}
}
