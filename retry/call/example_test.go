package call_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/call"
)

func ExampleDo() {
	policy := call.MustPolicy(
		call.WithMaxAttempts(4),
		call.WithBackoff(backoff.Exponential{Base: time.Millisecond, Max: 10 * time.Millisecond}),
	)
	attempts := 0
	err := call.Do(context.Background(), policy, func(ctx context.Context) error {
		attempts++
		fmt.Println("attempt", call.Attempt(ctx))
		if attempts < 3 {
			// A network error: retried. Errors the classifier does not
			// know are not, so mark yours.
			return call.Mark(errors.New("connection reset"), call.Network)
		}
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// attempt 1
	// attempt 2
	// attempt 3
	// err: <nil>
}

func ExampleWrap() {
	type GetUserReq struct{ ID int }
	type GetUserResp struct{ Name string }
	errInsufficient := call.Mark(errors.New("insufficient balance"), call.Business)

	calls := 0
	getUser := func(ctx context.Context, req GetUserReq) (GetUserResp, error) {
		calls++
		if req.ID == 0 {
			return GetUserResp{}, errInsufficient // business error: never retried
		}
		if calls == 1 {
			return GetUserResp{}, context.DeadlineExceeded // timeout: retried at the entrance
		}
		return GetUserResp{Name: "ada"}, nil
	}
	get := call.Wrap(call.MustPolicy(call.WithBackoff(backoff.None{})), getUser)

	resp, err := get(context.Background(), GetUserReq{ID: 7})
	fmt.Println(resp.Name, err, calls)
	calls = 0
	_, err = get(context.Background(), GetUserReq{ID: 0})
	fmt.Println(err, calls)
	// Output:
	// ada <nil> 2
	// insufficient balance 1
}

func ExampleTransport() {
	// A server on 127.0.0.1 that is unavailable for its first two requests
	// and prints the flags each request arrived with (SPEC B5), as
	// call.Handler hands them to the handler.
	var served atomic.Int32
	srv := httptest.NewServer(call.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		f, _ := call.FlagsFrom(r.Context())
		fmt.Printf("server: %s=%s %s=%s -> attempt %d, retry %v, entrance %v\n",
			call.HeaderAttempt, r.Header.Get(call.HeaderAttempt), call.HeaderFlag, r.Header.Get(call.HeaderFlag),
			f.Attempt, f.IsRetry(), f.Entrance)
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	})))
	defer srv.Close()

	b, _ := budget.New(budget.Config{}) // one per client: retries ≤ 10% of requests
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &call.Transport{
		Base: base,
		Policy: call.MustPolicy(
			call.WithSettings(backoff.Settings{
				InitialRetryDelay: 5 * time.Millisecond, RetryDelayMultiplier: 2, MaxRetryDelay: time.Second,
				InitialRPCTimeout: 2 * time.Second, MaxRPCTimeout: 2 * time.Second,
				TotalTimeout: 5 * time.Second, MaxAttempts: 3,
			}),
			call.WithBudget(b),
		),
		Replayable: call.IdempotentOrKeyed, // POSTs with an Idempotency-Key too
	}}

	// The entrance sets the scenario's retry flag; every attempt carries it.
	ctx := call.WithRetryFlag(context.Background(), "checkout")
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := b.Stats()
	fmt.Printf("client: %s %q; budget: %d request, %d retries\n", resp.Status, body, s.Requests, s.Retries)
	// Output:
	// server: X-Retry-Attempt=1 X-Retry-Flag=checkout -> attempt 1, retry false, entrance false
	// server: X-Retry-Attempt=2 X-Retry-Flag=checkout -> attempt 2, retry true, entrance false
	// server: X-Retry-Attempt=3 X-Retry-Flag=checkout -> attempt 3, retry true, entrance false
	// client: 200 OK "hello"; budget: 1 request, 2 retries
}

// ExampleRetryIf retries on a business code in the response (SPEC M3, seed
// 001's needRetryErr): "err_01" is retried, "ok" is not.
func ExampleRetryIf() {
	type Resp struct{ BizCode string }
	answers := []string{"err_01", "ok"}
	calls := 0
	rpc := func(ctx context.Context, key string) (Resp, error) {
		calls++
		return Resp{BizCode: answers[min(calls, len(answers))-1]}, nil
	}
	get := call.Wrap(call.MustPolicy(call.WithBackoff(backoff.None{})), rpc,
		call.RetryIf(func(r Resp) bool { return r.BizCode == "err_01" || r.BizCode == "err_02" }))

	r, err := get(context.Background(), "k")
	fmt.Println(r.BizCode, err, calls)

	answers, calls = []string{"err_02"}, 0
	r, err = get(context.Background(), "k")
	fmt.Println(r.BizCode, errors.Is(err, call.ErrRetryableResult), calls)
	// Output:
	// ok <nil> 2
	// err_02 true 3
}

func ExampleRetry() {
	type Req struct {
		Key  string
		Meta map[string]string
	}
	metadata := func(_ context.Context, r *Req) call.Carrier { return headerMap(r.Meta) }

	var sent []string
	rpc := func(ctx context.Context, r *Req) (string, error) {
		sent = append(sent, r.Meta[call.HeaderAttempt])
		if len(sent) < 2 {
			return "", call.Mark(errors.New("connection refused"), call.Network)
		}
		return "value of " + r.Key, nil
	}
	// Retry outside, Propagate inside: each attempt carries its number.
	endpoint := call.Chain(
		call.Retry[*Req, string](call.MustPolicy(call.WithBackoff(backoff.None{}))),
		call.Propagate[*Req, string](metadata),
	)(rpc)

	ctx := call.WithRetryFlag(context.Background(), "checkout")
	v, err := endpoint(ctx, &Req{Key: "k", Meta: map[string]string{}})
	fmt.Println(v, err, sent)
	// Output: value of k <nil> [1 2]
}

type headerMap map[string]string

func (h headerMap) Get(k string) string { return h[k] }
func (h headerMap) Set(k, v string)     { h[k] = v }
