package call_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/readretry/readretry/retry/backoff"
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
