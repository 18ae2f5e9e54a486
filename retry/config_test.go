package retry_test

// Bad configuration and route input (SPEC R2, §6): refused with a clear error, nothing changed.

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

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
	if _, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), Shards: 8, Tick: retry.MaxTick, PollInterval: retry.MaxTick}); err != nil {
		t.Fatalf("valid limits refused: %v", err)
	}
}

// TestR2CapRaisedAfterZone: SPEC R2 (round 2): a change of the cap applies
// at once to every zone, those that exist already included, raising as well
// as lowering. The zone was added with a cap of 10; raised to 600,000 it
// holds 600,000 contexts, each with its timer (before round 2 it was
// clamped to 500,000 because the wheel had been sized when the zone was
// added); lowered again, new reads go out without a context while the
// contexts in flight stay.
func TestR2CapRaisedAfterZone(t *testing.T) {
	logs := &captureHandler{}
	clock := newFakeClock()
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), MaxWaitingPerZone: 10, Logger: slog.New(logs), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	c.SetReadRetryMaxContextCountPerZone(10)
	if err := c.ApplyRoute(testZone, hostProxies("a"), seedConf); err != nil {
		t.Fatal(err)
	}
	n := 600_000
	if raceEnabled {
		n = 60_000 // the race detector makes 600,000 sends take minutes
	}
	c.SetReadRetryMaxContextCountPerZone(n)
	req := retry.Request{Command: wire.CmdGet, Key: []byte("k")}
	for range n {
		if _, err := c.Send(testZone, &req); err != nil {
			t.Fatal(err)
		}
	}
	reqs, timers := c.InFlight(testZone)
	if st, _ := c.Stats(testZone); reqs != n || timers != n || st.Contexts != int64(n) || st.CapHits != 0 {
		t.Fatalf("requests %d timers %d contexts %d cap hits %d, want %d contexts", reqs, timers, st.Contexts, st.CapHits, n)
	}
	if l := logs.find(retry.MsgSetMaxContext); len(l) != 2 || l[1].attrs["max_context_count"] != int64(n) {
		t.Fatalf("set logs %+v", l)
	}
	c.SetReadRetryMaxContextCountPerZone(n / 2)
	if _, err := c.Send(testZone, &req); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stats(testZone); st.Contexts != int64(n) || st.CapHits != 1 || st.ReadsWithoutContext != 1 {
		t.Fatalf("after lowering: contexts %d cap hits %d", st.Contexts, st.CapHits)
	}
	c.SetReadRetryMaxContextCountPerZone(1 << 40)
	if l := logs.find(retry.MsgSetMaxContext); l[len(l)-1].attrs["max_context_count"] != int64(retry.MaxContextsPerZone) {
		t.Fatalf("a cap above MaxContextsPerZone: %+v", l[len(l)-1])
	}
}
