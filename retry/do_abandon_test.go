package retry_test

// Do calls whose context ends first (SPEC R20): the engine finishes their
// requests and counts what it drops.

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

// TestR20AbandonedResponsesExact: every simple read has exactly one
// response, so once every request has ended, AbandonedResponses must equal
// DoAbandoned: each abandoned call's one answer was dropped, whenever the
// caller left — also in the instant between the poller copying the answer
// into the waiter and handing it over. Callers leave at random moments
// while 64 KB answers are copied, which makes that instant likely; before
// round 3 the answer copied just before its caller left was not counted.
func TestR20AbandonedResponsesExact(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := servingClient(t, 0, "a")
	defer c.Close()
	value := bytes.Repeat([]byte("v"), 64<<10)
	tr.SetHandler(px[0], func(req wire.Request, r *retrytest.Replier) {
		r.Start(req, retry.ResultOK, false, 0, 0)
		r.Record(0, retry.ResultOK, req.Key(), value)
		r.Send()
	})
	calls := 4000
	if raceEnabled {
		calls = 1000
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res retry.Result
			for i := range calls {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i*7+g*13)%50)*time.Microsecond)
				_ = c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res)
				cancel()
			}
		}()
	}
	wg.Wait()
	for {
		if reqs, _ := c.InFlight(testZone); reqs == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st, _ := c.Stats(testZone)
	t.Logf("%d of %d calls abandoned", st.DoAbandoned, 4*calls)
	if st.AbandonedResponses != st.DoAbandoned {
		t.Fatalf("AbandonedResponses %d, DoAbandoned %d: want equal (one answer per abandoned read)", st.AbandonedResponses, st.DoAbandoned)
	}
}
