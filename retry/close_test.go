package retry_test

// Close (SPEC §7 R22): every Do under way ends with ErrClosed at once,
// whatever the poller and wherever its result is.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
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

// holdAvailable parks the first Send inside the engine (in proxy choice),
// after its closed check, until released.
type holdAvailable struct {
	*retrytest.Transport
	once             sync.Once
	entered, release chan struct{}
}

func (h *holdAvailable) Available(id retry.ProxyID) bool {
	h.once.Do(func() { close(h.entered); <-h.release })
	return h.Transport.Available(id)
}

// TestCloseWaitsForSend: Close waits for a Send under way, so the request
// either fails with ErrClosed or is swept; nothing stays behind (SPEC §6).
func TestCloseWaitsForSend(t *testing.T) {
	h := &holdAvailable{Transport: retrytest.NewTransport(), entered: make(chan struct{}), release: make(chan struct{})}
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: h, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(time.Second, time.Second)
	if err := c.ApplyRoute(testZone, hostProxies("a"), seedConf); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error)
	go func() {
		_, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		errc <- err
	}()
	<-h.entered
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a Send was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	if err := <-errc; err != nil {
		t.Fatalf("the Send under way: %v", err)
	}
	<-closed
	if reqs, timers := c.InFlight(testZone); reqs != 0 {
		t.Fatalf("requests=%d timers=%d after Close", reqs, timers)
	}
	if st, _ := c.Stats(testZone); st.Contexts != 0 {
		t.Fatalf("contexts %d after Close", st.Contexts)
	}
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); !errors.Is(err, retry.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}
