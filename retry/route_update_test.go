package retry_test

// Route updates and the configuration a request keeps (SPEC R5): a request keeps what it was sent
// with.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

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

// TestRequestKeepsItsMaxRetries: a read sent under ReadRetryMaxCnt=2 keeps
// 2 retries when a route update changes the zone's count to 1 or to 8
// while it is in flight (SPEC R5 round 2): 3 attempts at 0, 500 and
// 1500 ms, -19219 at 3000 ms.
func TestRequestKeepsItsMaxRetries(t *testing.T) {
	for _, later := range []int{1, 8} {
		t.Run(fmt.Sprint("MaxCnt=", later), func(t *testing.T) {
			f := newFixture(t, hostProxies("a", "b", "c"), confWith(2, "-7953"))
			start := f.clock.Now()
			f.send(retry.Request{Command: wire.CmdGet, Key: []byte("k")})
			if err := f.c.ApplyRoute(testZone, f.px, confWith(later, "-7953")); err != nil {
				t.Fatal(err)
			}
			f.runSteps(start, []step{
				{at: 3100 * ms, want: "-19219@3s"},
			})
			if n := len(f.tr.Sent()); n != 3 {
				t.Fatalf("%d attempts, want 3", n)
			}
			if st := f.stats(); st.RetriesTimeout != 2 {
				t.Fatalf("%d re-sends, want 2", st.RetriesTimeout)
			}
			f.drained()
		})
	}
}
