package call_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	b, _ := budget.New(budget.Config{}) // one per client: retries ≤ 10% of requests
	client := &http.Client{Transport: &call.Transport{
		Policy: call.MustPolicy(
			call.WithSettings(backoff.Settings{
				InitialRetryDelay: 50 * time.Millisecond, RetryDelayMultiplier: 2, MaxRetryDelay: time.Second,
				InitialRPCTimeout: 2 * time.Second, MaxRPCTimeout: 2 * time.Second,
				TotalTimeout: 5 * time.Second, MaxAttempts: 3,
			}),
			call.WithBudget(b),
		),
		Replayable: call.IdempotentOrKeyed, // POSTs with an Idempotency-Key too
	}}
	// On the server side, call.Handler reads the flags of each request so
	// that the handler's own calls know whether they may retry.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f, _ := call.FlagsFrom(r.Context())
		_ = f.IsRetry()
	})
	srv := &http.Server{Handler: call.Handler(mux)}
	fmt.Println(client.Transport != nil, srv.Handler != nil)
	// Output: true true
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
