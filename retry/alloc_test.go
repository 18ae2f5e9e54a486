//go:build !race

package retry_test

import (
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// TestSteadyStateAllocs: with read retry on, a mix of simple reads, 100-key
// batches and index reads allocates nothing per request once warm (SPEC §5):
// the frame pools keep one size class each, the tables and wheels reuse
// their slabs. (Not under -race, which allocates on its own.)
func TestSteadyStateAllocs(t *testing.T) { steadyAllocs(t, benchClient(t, true, 10)) }

// TestSteadyStateAllocsHedge: the same with Config.Hedge on — recording
// each answer's latency in the zone's histogram and reading the estimate at
// each send allocate nothing (SPEC R21).
func TestSteadyStateAllocsHedge(t *testing.T) {
	c, _, _ := servingClientWith(t, retry.Config{Poller: retry.PollHand, Hedge: retry.Hedge{Percentile: 0.95}}, 10, "a", "b", "c")
	steadyAllocs(t, c)
}

func steadyAllocs(t *testing.T, c *retry.Client) {
	reqs := []retry.Request{
		{Command: wire.CmdGet, Key: []byte("user:1"), UserBuffer: make([]byte, 16)},
		{Command: wire.CmdBatchGet, Keys: batchKeys(100), UserBuffer: make([]byte, 16)},
		{Command: wire.CmdGet, Key: []byte("user:2")},
		{Command: wire.CmdGetByPartKey, Key: []byte("guild"), UserBuffer: make([]byte, 16)},
		{Command: wire.CmdInsert, Key: []byte("w"), Value: []byte("v")},
	}
	run := func() {
		for i := range reqs {
			if _, err := c.Send(testZone, &reqs[i]); err != nil {
				t.Fatal(err)
			}
			for {
				rsp, ok := c.RecvResponse()
				if !ok {
					t.Fatal("no final response")
				}
				if !rsp.HaveMore() {
					break
				}
			}
		}
	}
	for i := 0; i < 50_000; i++ { // warm the pools past their calibration
		run()
	}
	if n := testing.AllocsPerRun(2000, run); n != 0 {
		t.Fatalf("%.2f allocations per mixed round of %d requests, want 0", n, len(reqs))
	}
}
