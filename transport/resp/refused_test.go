package resp_test

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp"
	"github.com/readretry/readretry/wire"
)

// TestWriteRefusedIsNotNoProxy (issue 29, SPEC R3, R13): a write is
// refused by the transport, not by a replica, so Do returns
// ErrWriteRefused itself — not ErrNoProxy after asking every replica —
// after one refused Send: the other replicas saw nothing, none is counted
// as a send failure, and reads go on.
func TestWriteRefusedIsNotNoProxy(t *testing.T) {
	r := shared.get(t)
	c, tr := setup(t, r, resp.Config{}, time.Second, 2*time.Second)
	err := do(c, &retry.Request{Command: wire.CmdInsert, Key: []byte("k"), Value: []byte("v")}, nil, 5*time.Second)
	if !errors.Is(err, resp.ErrWriteRefused) || !errors.Is(err, retry.ErrRequestRefused) || errors.Is(err, retry.ErrNoProxy) {
		t.Fatalf("write: %v, want ErrWriteRefused", err)
	}
	st, _ := c.Stats(zone)
	if s := tr.Stats(); s.Refused != 1 || s.Conn.FramesSent != 0 || st.SendFailures != 0 {
		t.Fatalf("%d refused Sends (want 1), %d frames sent, %d send failures", s.Refused, s.Conn.FramesSent, st.SendFailures)
	}
	var res retry.Result
	if err := do(c, getReq(r.Data, 0), &res, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := checkGet(r.Data, 0, &res); err != nil {
		t.Fatal(err)
	}
}

// TestWrongReplicaAddressNamed (issue 29): a client whose replica address
// refuses connections gets from Do an error that names the address and the
// refusal and still matches retry.ErrNoProxy. No redis-server needed.
func TestWrongReplicaAddressNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, _ := setupAddrs(t, []string{addr}, resp.Config{}, time.Second, 2*time.Second)
	err = do(c, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, nil, 5*time.Second)
	if !errors.Is(err, retry.ErrNoProxy) || !errors.Is(err, syscall.ECONNREFUSED) ||
		!strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), proxyFor(0).String()) {
		t.Fatalf("Do: %v, want ErrNoProxy naming %s (%v) and the refusal", err, addr, proxyFor(0))
	}
}
