package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// TestNoProxyErrorNamesCauses (issue 29, SPEC R13, R16): when every proxy
// of a zone is down, Send and Do return an error that matches ErrNoProxy
// with its code, names the zone, and names each of the first
// MaxNoProxyCauses proxies with the cause its transport gives
// (retry.ProxyErrorer), reachable with errors.Is; the rest are counted.
// The engine logs it at most once per second per zone. The causes are the
// test's own errors, so the expectation does not come from the engine.
func TestNoProxyErrorNamesCauses(t *testing.T) {
	px := hostProxies("a", "b", "c", "d", "e", "f")
	f := newFixture(t, px, seedConf)
	causes := make([]error, len(px))
	for i, p := range px {
		causes[i] = fmt.Errorf("dial %s: refused by test %d", p, i)
		f.tr.SetDown(p, causes[i])
	}
	get := &retry.Request{Command: wire.CmdGet, Key: []byte("k")}
	_, sendErr := f.c.Send(testZone, get)
	doErr := f.c.Do(context.Background(), testZone, get, nil)
	for call, err := range map[string]error{"Send": sendErr, "Do": doErr} {
		var code *retry.Error
		if !errors.Is(err, retry.ErrNoProxy) || !errors.As(err, &code) || code.Code != retry.ResultNoProxy {
			t.Fatalf("%s: %v, want ErrNoProxy with ResultNoProxy", call, err)
		}
		var np *retry.NoProxyError
		if !errors.As(err, &np) || np.Zone != testZone || np.Proxies != len(px) || len(np.Causes) != retry.MaxNoProxyCauses {
			t.Fatalf("%s: %#v", call, np)
		}
		msg := err.Error()
		for i := range retry.MaxNoProxyCauses {
			if np.Causes[i].Proxy != px[i] || np.Causes[i].Err != causes[i] || !errors.Is(err, causes[i]) {
				t.Fatalf("%s: cause %d is %v: %v, want %v: %v", call, i, np.Causes[i].Proxy, np.Causes[i].Err, px[i], causes[i])
			}
			if !strings.Contains(msg, px[i].String()+": "+causes[i].Error()) {
				t.Fatalf("%s: %q does not name %v with its cause", call, msg, px[i])
			}
		}
		if errors.Is(err, causes[len(px)-1]) || !strings.Contains(msg, "and 2 more") || !strings.Contains(msg, "app_id 2, zone_id 3") {
			t.Fatalf("%s: %q", call, msg)
		}
	}
	if reqs, _ := f.c.InFlight(testZone); reqs != 0 {
		t.Fatalf("a refused Send kept %d requests", reqs)
	}
	lines := f.logs.find(retry.MsgNoProxy)
	if len(lines) != 1 || lines[0].level != slog.LevelWarn || lines[0].attrs["error"] != sendErr.Error() {
		t.Fatalf("log lines %+v, want one warn line with Send's error", lines)
	}
	f.clock.Add(time.Second)
	_, _ = f.c.Send(testZone, get)
	// Do's refusal came within the second of Send's and was held back; the
	// Send a second later is logged with it counted.
	if lines = f.logs.find(retry.MsgNoProxy); len(lines) != 2 || lines[1].attrs["suppressed"] != uint64(1) {
		t.Fatalf("log lines after a second %+v", lines)
	}

	// A route that names no proxy says so.
	empty := retry.Zone{AppID: 7, ZoneID: 8}
	if err := f.c.ApplyRoute(empty, nil, ""); err != nil {
		t.Fatal(err)
	}
	_, err := f.c.Send(empty, get)
	if !errors.Is(err, retry.ErrNoProxy) || !strings.Contains(err.Error(), "app_id 7, zone_id 8: the route names no proxy") {
		t.Fatalf("empty route: %v", err)
	}
}

// plainTransport hides every method but retry.Transport's: a transport that
// cannot say why a proxy is down (no retry.ProxyErrorer).
type plainTransport struct{ retry.Transport }

// TestNoProxyErrorKeepsSendError: with a transport that says nothing of
// its proxies, the cause of the proxy whose Send failed last is the error
// that Send returned, and the others' is ErrUnavailable (issue 29).
func TestNoProxyErrorKeepsSendError(t *testing.T) {
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Transport: plainTransport{tr}, Poller: retry.PollHand, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := hostProxies("a", "b")
	if err := c.ApplyRoute(testZone, px, ""); err != nil {
		t.Fatal(err)
	}
	sendErrs := map[retry.Proxy]error{}
	for _, p := range px {
		sendErrs[p] = fmt.Errorf("write to %s: broken by test: %w", p, retry.ErrUnavailable)
		tr.SetSendError(p, sendErrs[p])
	}
	_, err = c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	var np *retry.NoProxyError
	if !errors.As(err, &np) || len(np.Causes) != 2 {
		t.Fatalf("%v", err)
	}
	own := 0
	for _, pc := range np.Causes {
		switch pc.Err {
		case sendErrs[pc.Proxy]:
			own++
		case retry.ErrUnavailable:
		default:
			t.Fatalf("cause of %v: %v", pc.Proxy, pc.Err)
		}
	}
	if own != 1 || !errors.Is(err, retry.ErrNoProxy) {
		t.Fatalf("%v: %d causes are their proxy's Send error, want 1", err, own)
	}
}

// countingTransport counts the Send calls the engine makes.
type countingTransport struct {
	*retrytest.Transport
	sends atomic.Int64
}

func (c *countingTransport) Send(id retry.ProxyID, frame []byte) error {
	c.sends.Add(1)
	return c.Transport.Send(id, frame)
}

// TestRequestRefusedIsNotNoProxy (issue 29, SPEC R13): a Send error that
// wraps ErrRequestRefused says the request is unacceptable whatever the
// proxy. Send and Do return it as it is, after one Send call: no other
// proxy is tried, none is counted as a send failure or made suspect. A
// re-send refused so is sent nowhere else either.
func TestRequestRefusedIsNotNoProxy(t *testing.T) {
	clock := newFakeClock()
	tr := &countingTransport{Transport: retrytest.NewTransport()}
	c, err := retry.New(retry.Config{Transport: tr, Clock: clock.Now, Poller: retry.PollHand, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := hostProxies("a", "b", "c")
	if err := c.ApplyRoute(testZone, px, seedConf); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadRetryTimeout(3000*time.Millisecond, 6000*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	refusal := fmt.Errorf("codec: no such command here: %w", retry.ErrRequestRefused)
	for _, p := range px {
		tr.SetSendError(p, refusal)
	}
	get := &retry.Request{Command: wire.CmdGet, Key: []byte("k")}
	_, sendErr := c.Send(testZone, get)
	doErr := c.Do(context.Background(), testZone, get, nil)
	for call, err := range map[string]error{"Send": sendErr, "Do": doErr} {
		if err != refusal {
			t.Fatalf("%s: %v, want the transport's error as it is", call, err)
		}
	}
	st, _ := c.Stats(testZone)
	if n := tr.sends.Load(); n != 2 || st.SendFailures != 0 || c.ClientStats().SuspectMarks != 0 {
		t.Fatalf("%d Send calls for 2 refused requests (want 2), %d send failures, %d suspect marks",
			n, st.SendFailures, c.ClientStats().SuspectMarks)
	}
	if reqs, _ := c.InFlight(testZone); reqs != 0 {
		t.Fatalf("a refused request kept %d requests", reqs)
	}

	// A read out on one proxy (silent: the read is re-sent at 500 ms),
	// whose re-send the next proxy refuses: it is sent nowhere else.
	for _, p := range px {
		tr.SetSendError(p, nil)
	}
	if _, err := c.Send(testZone, get); err != nil {
		t.Fatal(err)
	}
	sends := tr.sends.Load()
	for _, p := range px {
		tr.SetSendError(p, refusal)
	}
	clock.Add(600 * time.Millisecond)
	for range 100 {
		c.RecvResponse()
	}
	if st, _ := c.Stats(testZone); tr.sends.Load() != sends+1 || st.SendFailures != 0 {
		t.Fatalf("re-send: %d Send calls (want 1), %d send failures", tr.sends.Load()-sends, st.SendFailures)
	}
}
