package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/retry/call"
)

// A request ID claimed twice: the first caller runs, completes and stores
// its answer; the repeat finds the answer instead of running again.
func ExampleMemory() {
	ctx := context.Background()
	store, err := idem.NewMemory(idem.MemoryConfig{Capacity: 1024})
	if err != nil {
		panic(err)
	}
	key := []byte("7f3c9a2e-request-id")

	fence, _ := store.Claim(ctx, key, time.Minute)
	fmt.Println("first claim won:", fence != 0)
	repeat, _ := store.Claim(ctx, key, time.Minute)
	fmt.Println("repeat claim won:", repeat != 0)

	state, _, _ := store.Lookup(ctx, key, nil)
	fmt.Println("state while running:", state)

	_ = store.Complete(ctx, key, fence, []byte("order 42 created"), time.Hour)
	state, result, _ := store.Lookup(ctx, key, nil)
	fmt.Printf("state after: %v, result: %s\n", state, result)

	// Tokens (seed 003): issued before the call, consumed by delete.
	_ = store.Issue(ctx, []byte("token-1"), time.Minute)
	first, _ := store.Consume(ctx, []byte("token-1"))
	second, _ := store.Consume(ctx, []byte("token-1"))
	fmt.Println("token consumed:", first, "then:", second)
	// Output:
	// first claim won: true
	// repeat claim won: false
	// state while running: pending
	// state after: done, result: order 42 created
	// token consumed: true then: false
}

// Do runs the business function once per key; a repeat gets the stored
// result back.
func ExampleDo() {
	ctx := context.Background()
	store, _ := idem.NewMemory(idem.MemoryConfig{Capacity: 1024})
	charge := func(context.Context) ([]byte, error) {
		fmt.Println("charging the card")
		return []byte("receipt 1001"), nil
	}
	for range 3 {
		receipt, replayed, err := idem.Do(ctx, store, []byte("payment-88"), idem.DefaultTTL, charge)
		fmt.Printf("%s replayed=%v err=%v\n", receipt, replayed, err)
	}
	// Output:
	// charging the card
	// receipt 1001 replayed=false err=<nil>
	// receipt 1001 replayed=true err=<nil>
	// receipt 1001 replayed=true err=<nil>
}

// The HTTP pair: Middleware on the server, NewTransport on the client. The
// client's POST carries an Idempotency-Key, so httpcall.Transport may retry it;
// the server runs the handler once and replays its answer to repeats.
func ExampleMiddleware() {
	store, _ := idem.NewMemory(idem.MemoryConfig{Capacity: 1024})
	// A single-tenant service: one scope for all. A multi-tenant one
	// passes a Scope naming the authenticated account.
	guard, err := idem.Middleware(store, idem.GlobalScope)
	if err != nil {
		panic(err)
	}
	orders := 0
	srv := httptest.NewServer(guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d", orders)
	})))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: idem.NewTransport(base, call.MustPolicy())}

	key := idem.NewKey() // one key per logical operation, kept across retries
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader("2 books"))
		idem.SetKey(req, key)
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get(idem.HeaderReplayed) == "true")
	}
	fmt.Println("orders created:", orders)
	// Output:
	// 201 order 1 replayed: false
	// 201 order 1 replayed: true
	// orders created: 1
}
