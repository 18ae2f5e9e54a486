//go:build !race

package resp_test

import (
	"context"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp"
)

// TestAllocs: once warm, a GET, a 100-key MGET (two chunks) and a list read
// of two LRANGE chunks through the engine and this transport against a
// real replica allocate nothing per request (SPEC §5, R23): pending
// commands, key bytes, replies and frames live in per-connection buffers
// that are reused. (Not under -race, which allocates on its own.)
func TestAllocs(t *testing.T) {
	r := shared.get(t)
	c, _ := setup(t, r, resp.Config{}, time.Second, 2*time.Second)
	d := r.Data
	idx := make([]int, 100)
	for i := range idx {
		idx[i] = i * 3
	}
	reqs := []*retry.Request{getReq(d, 7), batchReq(d, idx), rangeReq(d, 2, 0, 0)} // list 2: 256 elements
	var res retry.Result
	run := func() {
		for _, req := range reqs {
			// context.Background: a deadline's timer would be the caller's
			// allocation, not the transport's.
			if err := c.Do(context.Background(), zone, req, &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2000 {
		run()
	}
	if err := checkRange(d, 2, 0, 0, &res); err != nil || res.Len() != 256 {
		t.Fatalf("warm-up answer: %v (%d records)", err, res.Len())
	}
	if n := testing.AllocsPerRun(500, run); n != 0 {
		t.Fatalf("%.2f allocations per round of %d requests, want 0", n, len(reqs))
	}
}
