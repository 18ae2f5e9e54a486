package retry_test

// Every record exactly once (SPEC R8b, R11, R12): the mutation audit's
// surviving changes of round 3, each a test of its own.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// batchPacket answers req (a BATCH_GET) with one packet carrying the keys
// of tags, each OK or with code, haveMore as given.
func batchPacket(f *fixture, s retrytest.Sent, packet uint32, haveMore bool, tags []uint64, codes map[uint64]int32) {
	f.tr.Replay(s, func(req wire.Request, r *retrytest.Replier) {
		var d retrytest.Data
		r.Start(req, retry.ResultOK, haveMore, packet, 0)
		for _, tag := range tags {
			key := fmt.Appendf(nil, "k%d", tag)
			r.Record(tag, codes[tag], key, d.AppendValue(nil, key))
		}
		r.Send()
	})
}

// tagsOf lists the tags of every record delivered, in order, with a "!"
// after those whose own result is not OK.
func tagsOf(gs []got) string {
	var out []string
	for _, g := range gs {
		for _, r := range g.recs {
			s := fmt.Sprint(r.Tag)
			if r.Result != retry.ResultOK {
				s += "!"
			}
			out = append(out, s)
		}
	}
	return fmt.Sprint(out)
}

// TestBatchPacketMixingAnsweredAndFreshKeys: a BATCH_GET of 4 keys whose
// proxy sends keys 0 and 1, then a packet with keys 1 (already delivered:
// a network duplicate inside a new packet) and 2, then key 3. The caller
// gets each key once, in arrival order, and the repeat is counted (SPEC
// R11, R12).
func TestBatchPacketMixingAnsweredAndFreshKeys(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), seedConf)
	sent := &sentLog{f: f}
	f.send(batchReq(1))
	s0 := sent.get(0)
	batchPacket(f, s0, 0, true, []uint64{0, 1}, nil)
	batchPacket(f, s0, 1, true, []uint64{1, 2}, nil)
	batchPacket(f, s0, 2, false, []uint64{3}, nil)
	gs := f.poll()
	if got := tagsOf(gs); got != "[0 1 2 3]" || len(finals(gs)) != 1 || len(gs) != 3 {
		t.Fatalf("records %s in %d responses, want [0 1 2 3] in 3", got, len(gs))
	}
	if st := f.stats(); st.DuplicatesDropped != 1 {
		t.Fatalf("DuplicatesDropped %d, want 1", st.DuplicatesDropped)
	}
	f.drained()
}

// TestHeldRecordsDeliveredWhileAKeyIsMissing: BATCH_GET of keys 0-3,
// MaxCnt=1. Attempt 1 ends with keys 0 and 2 OK, key 1 failing (-7953) and
// key 3 missing; the re-send of keys 1 and 3 gets key 1 failing again and
// key 3 missing again. Every attempt has answered, so the read ends at once
// (SPEC R8): key 1's failed record is delivered as it is, exactly once
// (R8b), then -19219 because key 3 never came (R9, R11) — counted once as
// exhausted, with one failed record.
func TestHeldRecordsDeliveredWhileAKeyIsMissing(t *testing.T) {
	f := newFixture(t, hostProxies("a", "b"), confWith(1, "-7953"))
	sent := &sentLog{f: f}
	f.send(batchReq(1))
	batchPacket(f, sent.get(0), 0, false, []uint64{0, 1, 2}, map[uint64]int32{1: retry.ResultProxySwiftTimeout})
	gs := f.poll()
	re := sent.get(1).Request()
	if re.KeyCount() != 2 {
		t.Fatalf("re-send of %d keys, want 2 (keys 1 and 3)", re.KeyCount())
	}
	batchPacket(f, sent.get(1), 0, false, []uint64{1}, map[uint64]int32{1: retry.ResultProxySwiftTimeout})
	gs = append(gs, f.poll()...)
	fin := finals(gs)
	if got := tagsOf(gs); got != "[0 2 1!]" || len(fin) != 1 || fin[0].result != retry.ResultReadRetryTimeout {
		t.Fatalf("records %s, finals %+v; want [0 2 1!] then -19219", got, fin)
	}
	if st := f.stats(); st.Exhausted != 1 || st.RecordsFailed != 1 || st.FinalResults != 1 {
		t.Fatalf("Exhausted %d, RecordsFailed %d, FinalResults %d; want 1, 1, 1", st.Exhausted, st.RecordsFailed, st.FinalResults)
	}
	if n := len(f.logs.find(retry.MsgExhausted)); n != 1 {
		t.Fatalf("%d exhaustion lines, want 1", n)
	}
	f.drained()
}

// TestSendNamesAnUnknownCommand: Send refuses a command the wire format
// does not carry (SQL and the like) with ErrBadRequest and an error that
// names it (SPEC R4), and sends nothing.
func TestSendNamesAnUnknownCommand(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	for _, cmd := range []wire.Command{0, 2, 200, 999} {
		_, err := f.c.Send(testZone, &retry.Request{Command: cmd, Key: []byte("k")})
		if !errors.Is(err, retry.ErrBadRequest) || !strings.Contains(err.Error(), fmt.Sprint(uint32(cmd))) {
			t.Fatalf("command %d: %v, want ErrBadRequest naming %d", cmd, err, cmd)
		}
	}
	if n := len(f.tr.Sent()); n != 0 {
		t.Fatalf("%d frames sent", n)
	}
}

// TestUnknownZoneNamed: Send, Stats and RemoveZone for a zone no route
// named refuse with ErrUnknownZone and say which zone, so that a log line
// tells an operator what the client asked for; nothing is sent.
func TestUnknownZoneNamed(t *testing.T) {
	f := newFixture(t, hostProxies("a"), seedConf)
	other := retry.Zone{AppID: 70, ZoneID: 9}
	_, sendErr := f.c.Send(other, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	_, statsErr := f.c.Stats(other)
	for i, err := range []error{sendErr, statsErr, f.c.RemoveZone(other)} {
		if !errors.Is(err, retry.ErrUnknownZone) || !strings.Contains(err.Error(), "app_id 70, zone_id 9") {
			t.Errorf("step %d: got %v, want ErrUnknownZone naming app_id 70, zone_id 9", i, err)
		}
	}
	if n := len(f.tr.Sent()); n != 0 {
		t.Fatalf("%d frames sent", n)
	}
}

// TestExhaustionLogIsRateLimited: 100 reads exhausted in one poll write one
// MsgExhausted line; the next line, a second later, says how many were
// suppressed (SPEC R16: noisy lines rate-limited, at most 10 a second per
// zone), while Exhausted counts every read.
func TestExhaustionLogIsRateLimited(t *testing.T) {
	f := newFixture(t, hostProxies("a"), confWith(1, "-7953"))
	f.tr.SetLog(false)
	start := f.clock.Now()
	for i := range 100 {
		f.send(retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "k%d", i)})
	}
	if gs := f.step(3000*ms, start); len(gs) != 100 {
		t.Fatalf("%d finals, want 100", len(gs))
	}
	if l := f.logs.find(retry.MsgExhausted); len(l) != 1 {
		t.Fatalf("%d exhaustion lines for 100 reads at one instant, want 1", len(l))
	}
	f.clock.Add(time.Second)
	f.send(retry.Request{Command: wire.CmdGet, Key: []byte("late")})
	f.step(3100*ms, f.clock.Now())
	l := f.logs.find(retry.MsgExhausted)
	if len(l) != 2 || l[1].attrs["suppressed"] != uint64(99) {
		t.Fatalf("lines %+v, want a second one with suppressed=99", l)
	}
	if st := f.stats(); st.Exhausted != 101 {
		t.Fatalf("Exhausted %d, want 101", st.Exhausted)
	}
}

// TestR11IndexLimitLastPacketLost: an index read with a Limit whose records
// all arrived but whose empty last packet was lost is complete: one final
// OK, not -19219 after a timeout (SPEC R11, R12).
func TestR11IndexLimitLastPacketLost(t *testing.T) {
	px := hostProxies("a", "b")
	f := newFixture(t, px, seedConf)
	lossy := func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, 0, true, 0, 10) // records 0..9 with HaveMore; the last packet never comes
		for i := req.Position(); i < 10; i++ {
			r.Record(i, 0, []byte("k"), []byte("v"))
		}
		r.Send()
	}
	for _, p := range px {
		f.tr.SetHandler(p, lossy)
	}
	f.send(retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("pk"), Limit: 10})
	gs := f.poll()
	if len(gs) != 1 || gs[0].more || gs[0].result != retry.ResultOK || len(gs[0].recs) != 10 || gs[0].attempts != 1 {
		t.Fatalf("responses %+v", gs)
	}
	if st := f.stats(); st.Exhausted != 0 || st.RetriesTimeout != 0 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}
