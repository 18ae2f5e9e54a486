//go:build !race

package retryprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retryprom"
	"github.com/readretry/readretry/wire"
)

// TestAllocRequestPath: with the collector registered and scraped, a read
// with read retry on still allocates nothing from Send to its final result
// (SPEC §5): the collector adds nothing to the request path. (Not under
// -race, which allocates on its own.)
func TestAllocRequestPath(t *testing.T) {
	c, zone, col := servedZone(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	req := retry.Request{Command: wire.CmdGet, Key: []byte("user:1"), UserBuffer: make([]byte, 16)}
	run := func() {
		if _, err := c.Send(zone, &req); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.RecvResponse(); !ok {
			t.Fatal("no final response")
		}
	}
	for range 20_000 { // warm the engine's pools past their calibration
		run()
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(2000, run); n != 0 {
		t.Fatalf("%.2f allocations per read, want 0", n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// TestAllocCollectPerZone: Collect allocates two objects per zone for its
// 24 series when the zone's label values are below 100 (strconv has them
// ready), as the package doc says: the difference between 200 and 100
// zones is 200 allocations.
func TestAllocCollectPerZone(t *testing.T) {
	perRun := func(n int) float64 {
		c, zones := zonesClient(t, n, 0)
		col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones})
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan prometheus.Metric, 24*n+16)
		return testing.AllocsPerRun(50, func() {
			col.Collect(ch)
			for len(ch) > 0 {
				<-ch
			}
		})
	}
	small, large := perRun(100), perRun(200)
	if d := (large - small) / 100; d != 2 {
		t.Fatalf("%.2f allocations per zone (%.0f for 100 zones, %.0f for 200), want 2", d, small, large)
	}
}
