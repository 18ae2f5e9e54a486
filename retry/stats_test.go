package retry_test

// Counters (SPEC R17): what each one counts, told apart.

import (
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

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
