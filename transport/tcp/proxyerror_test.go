package tcp_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// closedPort returns a loopback address nothing listens on: connecting to
// it is refused at once.
func closedPort(t *testing.T) (string, uint16) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	_ = ln.Close()
	return addr.String(), uint16(addr.Port)
}

// lockedBuffer is a log sink safe for the client's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWrongAddressNamedInError: a client pointed at a loopback port that
// nothing listens on gets from Send and from Do an error that names the
// address and the refusal, and that still matches retry.ErrNoProxy with its
// result code (issue 29: "ErrNoProxy (keep the dial error)"); the engine's
// log says the same. The expectations come from the operating system (a
// connect to a closed port is ECONNREFUSED), not from the engine.
func TestWrongAddressNamedInError(t *testing.T) {
	addr, port := closedPort(t)
	tr := newTransport(t, tcp.Config{}, nil) // dials p.String(): the address itself
	var logs lockedBuffer
	c, err := retry.New(retry.Config{Transport: tr, Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnResponse: func(*retry.Response) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	zone := retry.Zone{AppID: 3, ZoneID: 4}
	if err := c.ApplyRoute(zone, []retry.Proxy{{Host: "127.0.0.1", Port: port}}, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.WaitDialed(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(call string, err error) {
		t.Helper()
		var code *retry.Error
		var op *net.OpError
		var np *retry.NoProxyError
		switch {
		case !errors.Is(err, retry.ErrNoProxy) || !errors.As(err, &code) || code.Code != retry.ResultNoProxy:
			t.Fatalf("%s: %v, want ErrNoProxy with ResultNoProxy", call, err)
		case !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || op.Op != "dial":
			t.Fatalf("%s: %v, want the dial's *net.OpError with ECONNREFUSED", call, err)
		case !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused"):
			t.Fatalf("%s: %q names neither %s nor the refusal", call, err, addr)
		case !errors.As(err, &np) || np.Zone != zone || np.Proxies != 1 || len(np.Causes) != 1:
			t.Fatalf("%s: %#v", call, np)
		}
	}
	get := &retry.Request{Command: wire.CmdGet, Key: []byte("k")}
	_, err = c.Send(zone, get)
	check("Send", err)
	check("Do", c.Do(ctx, zone, get, nil))
	if out := logs.String(); !strings.Contains(out, retry.MsgNoProxy) || !strings.Contains(out, "connection refused") ||
		!strings.Contains(out, addr) || !strings.Contains(out, "app_id=3") {
		t.Fatalf("the log does not say why:\n%s", out)
	}
	if n := strings.Count(logs.String(), "msg=\""+retry.MsgNoProxy+"\""); n != 1 {
		t.Fatalf("%d lines of %q for two refusals within a second, want 1 (rate-limited)", n, retry.MsgNoProxy)
	}
}

// TestProxyErrorSaysWhy: ProxyError (retry.ProxyErrorer) says why a proxy
// is down — the first dial still under way, the refused dial as the
// network returned it, the transport closed — and nil once it is up.
func TestProxyErrorSaysWhy(t *testing.T) {
	hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // Close cancels it
		return nil, ctx.Err()
	}
	slow := newTransport(t, tcp.Config{Dial: hang, DialTimeout: time.Minute}, nil)
	if err := slow.Open(1, retry.Proxy{Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := slow.ProxyError(1); !errors.Is(err, tcp.ErrConnecting) || !errors.Is(err, retry.ErrUnavailable) {
		t.Fatalf("first dial under way: %v, want ErrConnecting", err)
	}
	if err := slow.ProxyError(2); !errors.Is(err, tcp.ErrUnknownProxy) {
		t.Fatalf("never opened: %v", err)
	}
	_ = slow.Close()
	if err := slow.ProxyError(1); !errors.Is(err, tcp.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}

	addr, port := closedPort(t)
	// No redial after a loss within the test: the cause stays the loss.
	tr := newTransport(t, tcp.Config{Backoff: backoff.Constant{Wait: time.Hour}}, nil)
	openDialed(t, tr, 1, retry.Proxy{Host: "127.0.0.1", Port: port})
	err := tr.ProxyError(1)
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("refused dial: %v, want ECONNREFUSED naming %s", err, addr)
	}
	live := newEchoServer(t).start()
	_, lp, _ := net.SplitHostPort(live.addr())
	n, _ := strconv.Atoi(lp)
	openDialed(t, tr, 2, retry.Proxy{Host: "127.0.0.1", Port: uint16(n)})
	if err := tr.ProxyError(2); err != nil || !tr.Available(2) {
		t.Fatalf("connected proxy: %v, available %v", err, tr.Available(2))
	}
	eventually(t, "the connection's loss", func() bool {
		live.dropConns() // again until the server has registered the connection
		return !tr.Available(2)
	})
	if err := tr.ProxyError(2); err == nil || !strings.Contains(err.Error(), "lost") || !strings.Contains(err.Error(), live.addr()) {
		t.Fatalf("lost connection: %v, want it named with %s", err, live.addr())
	}
}
