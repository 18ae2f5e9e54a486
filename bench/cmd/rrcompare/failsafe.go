package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/wire"
)

// failsafeCaller is failsafe-go's hedging around a blocking call over the
// demultiplexing TCP client: a timeout of the budget outside a hedge
// policy with delay x and n hedges, as failsafe-go's docs compose them. The
// hedges are cancelled by the first good answer only (CancelIf), so that a
// -7953 from one attempt does not end the request while its hedges may
// still answer (the engine's SPEC R7). Each attempt goes to the proxy R13
// picks. failsafe-go's hedges go out x apart (0, x, 2x), where the engine's
// segments grow (0, x, 3x): that is its design, kept as its docs give it.
type failsafeCaller struct {
	d                      *demux
	simple, complex, write failsafe.Executor[*stream]
}

// errCode is an answer whose result code is the retry code (-7953): an
// error to the policies.
type errCode struct{ st *stream }

func (e *errCode) Error() string { return "rrcompare: proxy answered -7953" }

func newFailsafeClient(e *env) (client, error) {
	d := newDemux(e.labels, e.addrs)
	d.waitUp(2 * time.Second)
	hedge := func(budget, x time.Duration) failsafe.Executor[*stream] {
		return failsafe.With[*stream](
			timeout.New[*stream](budget),
			hedgepolicy.NewBuilderWithDelay[*stream](x).
				WithMaxHedges(e.retries).
				CancelIf(func(_ *stream, err error) bool { return err == nil }).
				Build(),
		)
	}
	f := &failsafeCaller{d: d,
		simple:  hedge(e.opt.SimpleBudget, retry.SimpleDeadlines(e.opt.SimpleBudget, e.retries)[0]),
		complex: hedge(e.opt.ComplexBudget, retry.ComplexWaits(e.opt.ComplexBudget, e.retries)[0]),
		write:   failsafe.With[*stream](timeout.New[*stream](e.opt.WaitTimeout)),
	}
	return newBlocking(f, e.sink), nil
}

func (f *failsafeCaller) close() { f.d.close() }

func (f *failsafeCaller) call(ctx context.Context, r *request, ans *sim.Answer) {
	ex := f.write
	if r.read {
		ex = f.simple
		if r.complex {
			ex = f.complex
		}
	}
	var mu sync.Mutex
	var tried []int
	var attempts atomic.Int32
	st, err := ex.WithContext(ctx).GetWithExecution(func(exec failsafe.Execution[*stream]) (*stream, error) {
		mu.Lock()
		p := f.d.pick(tried)
		if p >= 0 {
			tried = append(tried, p)
		}
		mu.Unlock()
		if p < 0 {
			return nil, errUnavailable
		}
		n := attempts.Add(1) - 1
		frame := r.frame
		if n > 0 {
			var err error
			if frame, err = wire.AppendResend(nil, r.frame, uint16(n)); err != nil {
				return nil, err
			}
		}
		st, err := f.d.roundTrip(exec.Context(), p, frame)
		if err == nil && r.read && st.result == retry.ResultProxySwiftTimeout {
			return nil, &errCode{st}
		}
		return st, err
	})
	r.answerBase(ans, max(int(attempts.Load()), 1))
	var ec *errCode
	switch {
	case err == nil:
		st.fill(ans)
	case errors.As(err, &ec):
		ans.Result = ec.st.result
	case errors.Is(err, timeout.ErrExceeded) && r.read:
		ans.Result = retry.ResultReadRetryTimeout
	case errors.Is(err, timeout.ErrExceeded):
		ans.Result = retry.ResultWaitRspTimeout
	default:
		ans.Result = retry.ResultNoProxy
	}
}
