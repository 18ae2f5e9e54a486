package httpcall_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/call"
	"github.com/readretry/readretry/retry/call/httpcall"
)

func ExampleTransport() {
	// A server on 127.0.0.1 that is unavailable for its first two requests
	// and prints the flags each request arrived with (SPEC B5), as Handler
	// hands them to the handler.
	var served atomic.Int32
	srv := httptest.NewServer(httpcall.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	client := &http.Client{Transport: &httpcall.Transport{
		Base: base,
		Policy: call.MustPolicy(
			call.WithSettings(backoff.Settings{
				InitialRetryDelay: 5 * time.Millisecond, RetryDelayMultiplier: 2, MaxRetryDelay: time.Second,
				InitialRPCTimeout: 2 * time.Second, MaxRPCTimeout: 2 * time.Second,
				TotalTimeout: 5 * time.Second, MaxAttempts: 3,
			}),
			call.WithBudget(b),
		),
		Replayable: httpcall.IdempotentOrKeyed, // POSTs with an Idempotency-Key too
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
