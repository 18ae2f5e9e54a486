package resp_test

import (
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp"
)

// Steady state over three healthy replicas: every mapped read, checked
// against the data set.
func TestReadsAgainstReplicas(t *testing.T) {
	r := shared.get(t)
	c, tr := setup(t, r, resp.Config{BatchChunk: 16, RangeChunk: 50}, time.Second, 2*time.Second)
	d := r.Data
	var res retry.Result
	for i := range d.Keys + 20 { // 20 missing keys: nil bulk is an answer
		if err := do(c, getReq(d, i), &res, 5*time.Second); err != nil && !isCode(err, resp.ResultNotFound) {
			t.Fatalf("GET %d: %v", i, err)
		}
		if err := checkGet(d, i, &res); err != nil {
			t.Fatal(err)
		}
	}
	idx := make([]int, 0, 100)
	for i := 0; i < 100; i++ {
		idx = append(idx, (i*37)%(d.Keys+30))
	}
	if err := do(c, batchReq(d, idx), &res, 5*time.Second); err != nil {
		t.Fatalf("MGET: %v", err)
	}
	if err := checkBatch(d, idx, &res); err != nil {
		t.Fatal(err)
	}
	if got := res.Packets(); got != 7 { // 100 keys in chunks of 16
		t.Errorf("MGET packets: got %d, want 7", got)
	}
	for j := range d.Lists + 2 {
		for _, pl := range []struct {
			pos   uint64
			limit uint32
		}{{0, 0}, {7, 0}, {3, 60}, {100, 50}} {
			if err := do(c, rangeReq(d, j, pl.pos, pl.limit), &res, 5*time.Second); err != nil {
				t.Fatalf("LRANGE %d from %d: %v", j, pl.pos, err)
			}
			if err := checkRange(d, j, pl.pos, pl.limit, &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s := tr.Stats(); s.ProtocolErrors != 0 || s.ReplicaErrors != 0 {
		t.Errorf("stats: %+v", s)
	}
}
