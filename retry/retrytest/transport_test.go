package retrytest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

func frame(t testing.TB, cmd wire.Command, seq uint64) []byte {
	h := wire.RequestHeader{Command: cmd, Seq: seq, AsyncID: seq * 10}
	var b []byte
	var err error
	switch cmd.Body() {
	case wire.BodyKey:
		b, err = wire.AppendKeyRequest(nil, h, []byte("k"))
	case wire.BodyBatch:
		b, err = wire.AppendBatchRequest(nil, h, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	case wire.BodyIndex:
		b, err = wire.AppendIndexRequest(nil, h, []byte("p"), 2, 0)
	default:
		b, err = wire.AppendWriteRequest(nil, h, []byte("k"), []byte("v"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func recvAll(tr *retrytest.Transport) []wire.Response {
	var out []wire.Response
	for {
		f, _, ok := tr.Recv()
		if !ok {
			return out
		}
		r, err := wire.ParseResponse(append([]byte(nil), f...))
		if err != nil {
			panic(err)
		}
		out = append(out, r)
	}
}

func TestServe(t *testing.T) {
	tr := retrytest.NewTransport()
	p := retry.Proxy{Host: "h", Port: 1}
	tr.SetHandler(p, retrytest.Serve(retrytest.Data{StreamLen: 7}, 2)) // before Open: kept
	if err := tr.Open(1, p); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []wire.Command{wire.CmdGet, wire.CmdBatchGet, wire.CmdGetByPartKey, wire.CmdInsert} {
		if err := tr.Send(1, frame(t, cmd, 5)); err != nil {
			t.Fatal(err)
		}
	}
	rs := recvAll(tr)
	// 1 simple + 2 batch packets (2+1) + 3 index packets (positions 2..6 by 2) + 1 write.
	if len(rs) != 7 {
		t.Fatalf("%d packets", len(rs))
	}
	if s := rs[0].Scan(); s.Len() != 1 {
		t.Fatal("simple answer")
	}
	if !rs[1].HaveMore() || rs[2].HaveMore() || rs[1].RecordCount()+rs[2].RecordCount() != 3 {
		t.Fatal("batch packets")
	}
	last := rs[5]
	if last.HaveMore() || last.Cursor() != 7 || rs[3].Cursor() != 4 {
		t.Fatalf("index cursors %d %d", rs[3].Cursor(), last.Cursor())
	}
	var pos []uint64
	for _, r := range rs[3:6] {
		s := r.Scan()
		for s.Next() {
			pos = append(pos, s.Tag())
		}
	}
	if fmt.Sprint(pos) != "[2 3 4 5 6]" {
		t.Fatalf("positions %v", pos)
	}
	if tr.Sends(p) != 4 || tr.Pending() != 0 {
		t.Fatal("counters")
	}
}

func TestAvailabilityAndLog(t *testing.T) {
	tr := retrytest.NewTransport()
	p := retry.Proxy{Host: "h", Port: 1}
	_ = tr.Open(3, p)
	tr.SetLog(true)
	if err := tr.Send(9, frame(t, wire.CmdGet, 1)); !errors.Is(err, retrytest.ErrUnknownProxy) {
		t.Fatalf("unknown proxy: %v", err)
	}
	tr.SetAvailable(p, false)
	if tr.Available(3) || !errors.Is(tr.Send(3, frame(t, wire.CmdGet, 1)), retry.ErrUnavailable) {
		t.Fatal("unavailable proxy accepted a send")
	}
	tr.SetAvailable(p, true)
	tr.SetRefusing(p, true)
	if !tr.Available(3) || !errors.Is(tr.Send(3, frame(t, wire.CmdGet, 1)), retry.ErrUnavailable) {
		t.Fatal("refusing proxy")
	}
	tr.SetRefusing(p, false)
	if err := tr.Send(3, frame(t, wire.CmdGet, 2)); err != nil {
		t.Fatal(err)
	}
	sent := tr.Sent()
	if len(sent) != 1 || sent[0].Request().Seq() != 2 || sent[0].Proxy != p || len(tr.Sent()) != 0 {
		t.Fatalf("log %+v", sent)
	}
	// Silent proxy: nothing in the inbox; Replay answers later; Deliver injects.
	if tr.Pending() != 0 {
		t.Fatal("silent proxy answered")
	}
	tr.Replay(sent[0], retrytest.Fail(-7953))
	tr.Deliver(p, wire.AppendResponse(nil, wire.ResponseHeader{Seq: 77}))
	rs := recvAll(tr)
	if len(rs) != 2 || rs[0].Result() != -7953 || rs[0].Seq() != 2 || rs[1].Seq() != 77 {
		t.Fatalf("inbox %+v", rs)
	}
}

// An in-memory proxy answers a batch read in packets of two records.
func Example() {
	tr := retrytest.NewTransport()
	p := retry.Proxy{Host: "h", Port: 1}
	_ = tr.Open(1, p)
	tr.SetHandler(p, retrytest.Serve(retrytest.Data{}, 2))
	req, _ := wire.AppendBatchRequest(nil, wire.RequestHeader{Command: wire.CmdBatchGet, Seq: 1}, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	_ = tr.Send(1, req)
	for {
		f, _, ok := tr.Recv()
		if !ok {
			break
		}
		rsp, _ := wire.ParseResponse(f)
		s := rsp.Scan()
		for s.Next() {
			fmt.Printf("packet %d key %d: %s (more: %v)\n", rsp.Packet(), s.Tag(), s.Value(), rsp.HaveMore())
		}
	}
	// Output:
	// packet 0 key 0: value-of-a (more: true)
	// packet 0 key 1: value-of-b (more: true)
	// packet 1 key 2: value-of-c (more: false)
}

// A handler may change its own proxy's state: the proxy takes the request,
// answers, and goes down (no deadlock).
func TestHandlerChangesTransport(t *testing.T) {
	tr := retrytest.NewTransport()
	p := retry.Proxy{Host: "h", Port: 1}
	_ = tr.Open(1, p)
	tr.SetHandler(p, func(req wire.Request, r *retrytest.Replier) {
		retrytest.Fail(-1)(req, r)
		tr.SetAvailable(p, false)
	})
	if err := tr.Send(1, frame(t, wire.CmdGet, 1)); err != nil {
		t.Fatal(err)
	}
	if tr.Available(1) || tr.Pending() != 1 {
		t.Fatal("handler's changes lost")
	}
}

// TestRelease: Release forgets a proxy (Send fails, Available is false),
// drops its answers still queued — a proxy opened next under the same ID
// never delivers them (the fence of retry.Transport.Release) — and keeps a
// handler set with SetHandler for the address's next Open.
func TestRelease(t *testing.T) {
	tr := retrytest.NewTransport()
	a, b := retry.Proxy{Host: "a", Port: 1}, retry.Proxy{Host: "b", Port: 1}
	tr.SetHandler(a, retrytest.Serve(retrytest.Data{}, 0))
	tr.SetDefaultHandler(retrytest.Fail(-1))
	if err := tr.Open(1, a); err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(1, frame(t, wire.CmdGet, 5)); err != nil {
		t.Fatal(err)
	}
	tr.Release(1)
	if tr.Available(1) || !errors.Is(tr.Send(1, frame(t, wire.CmdGet, 6)), retrytest.ErrUnknownProxy) || tr.Proxies() != 0 {
		t.Fatal("a released proxy is still usable")
	}
	if err := tr.Open(1, b); err != nil { // b has the default handler
		t.Fatal(err)
	}
	if err := tr.Send(1, frame(t, wire.CmdGet, 7)); err != nil {
		t.Fatal(err)
	}
	rs := recvAll(tr)
	if len(rs) != 1 || rs[0].Seq() != 7 || rs[0].Result() != -1 || tr.Dropped() != 1 {
		t.Fatalf("after the release: %d answers (want b's only), %d dropped", len(rs), tr.Dropped())
	}
	if err := tr.Open(2, a); err != nil { // a comes back under another ID, with its handler
		t.Fatal(err)
	}
	if err := tr.Send(2, frame(t, wire.CmdGet, 8)); err != nil {
		t.Fatal(err)
	}
	if rs := recvAll(tr); len(rs) != 1 || rs[0].Result() != 0 || tr.Opened() != 3 {
		t.Fatalf("a reopened: %d answers, opened %d", len(rs), tr.Opened())
	}
}
