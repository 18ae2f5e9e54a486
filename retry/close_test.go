package retry_test

// Close (SPEC §7 R22): every Do under way ends with ErrClosed at once,
// whatever the poller and wherever its result is.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

// TestCloseEndsEveryDo: the input. A hand-polled client (PollHand)
// whose loop returns one response per call: an asynchronous read A and 20
// Do calls time out in one poll, A first, so that poll hands out A and the
// 20 results made for the Do calls are still queued when the caller calls
// Close. Every one of the 20 must return ErrClosed; before round 3, Close
// skipped requests whose result was queued and then emptied the queue, and
// the Do calls stayed blocked for ever. The PollSelf case (the client's
// own driver) is checked the same way with the 20 calls in flight.
func TestCloseEndsEveryDo(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, poller := range []retry.Poller{retry.PollHand, retry.PollSelf} {
		t.Run(poller.String(), func(t *testing.T) {
			var f *fixture
			if poller == retry.PollHand {
				f = newFixture(t, hostProxies("a", "b"), seedConf)
			} else {
				// A PollSelf client on a clock that stands still: the calls
				// stay in flight until Close.
				c, tr := benchSilentClient(t)
				f = &fixture{t: t, c: c, tr: tr}
			}
			f.tr.SetLog(false)
			if poller == retry.PollHand {
				f.send(retry.Request{Command: wire.CmdGet, Key: []byte("A"), AsyncID: 1})
				f.clock.Add(ms)
			}
			const n = 20
			errs := make(chan error, n)
			for i := range n {
				go func() {
					errs <- f.c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: fmt.Appendf(nil, "d%d", i)}, nil)
				}()
			}
			want := n
			if poller == retry.PollHand {
				want++
			}
			for {
				if reqs, _ := f.c.InFlight(testZone); reqs == want {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if poller == retry.PollHand {
				f.clock.Add(3100 * ms)
				rsp, ok := f.c.RecvResponse()
				if !ok || rsp.AsyncID() != 1 || rsp.Result() != retry.ResultReadRetryTimeout {
					t.Fatalf("the loop's one response: %v, want A's -19219", ok)
				}
			}
			_ = f.c.Close()
			for i := range n {
				if err := <-errs; !errors.Is(err, retry.ErrClosed) {
					t.Fatalf("Do %d after Close: %v, want ErrClosed", i, err)
				}
			}
			if err := f.c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("late")}, nil); !errors.Is(err, retry.ErrClosed) {
				t.Fatalf("Do after Close: %v", err)
			}
		})
	}
}
