package readme_test

// The README's snippets. Each block between a "// README:begin" line and a
// "// README:end" line is one ```go block of README.md once its one level
// of indentation is removed (TestReadmeSnippets); what a snippet takes from
// its surroundings — a context, the keys, a client, a handler — are the
// parameters of the function around it, as a newcomer's own code would
// have them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/call"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// readmeDo is the blocking API: compiled, not run (it dials the proxies it
// names).
func readmeDo(ctx context.Context, keys [][]byte) (*retry.Result, error) {
	// README:begin
	tr, err := tcp.New(tcp.Config{}) // or retrytest.NewTransport() in tests
	if err != nil {
		return nil, err
	}
	defer tr.Close() // the transport is yours: Client.Close leaves it open
	c, err := retry.New(retry.Config{Transport: tr})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	zone := retry.Zone{AppID: 2, ZoneID: 3}
	// Each route update from the directory; the conf:// element is the zone's retry configuration.
	_ = c.ApplyRoute(zone, []retry.Proxy{{Host: "10.0.0.1", Port: 9000}, {Host: "10.0.0.2", Port: 9000}},
		"tcp://10.0.0.9:9000;conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second) // budgets of simple and complex reads
	_ = tr.WaitDialed(ctx)                                  // at start-up only: ApplyRoute never waits on a dial

	var res retry.Result // reusable: records are views into its own buffer
	err = c.Do(ctx, zone, &retry.Request{Command: wire.CmdBatchGet, Table: "players", Keys: keys}, &res)
	switch {
	case err == nil: // every record once: res.Record(i) for i < res.Len(); res.Failed() records failed
	case errors.Is(err, retry.ErrReadRetryTimeout): // -19219: retries and budget used up
	case errors.Is(err, retry.ErrNoProxy): // a *retry.NoProxyError names each proxy and why (dial error)
	case errors.Is(err, context.DeadlineExceeded): // ctx ended first
	}
	// README:end
	return &res, err
}

// readmeAsync is the seed's asynchronous API on a client made with
// Poller: retry.PollHand: compiled, not run.
func readmeAsync(c *retry.Client, zone retry.Zone, key, ctxBytes []byte) error {
	// README:begin
	if _, err := c.Send(zone, &retry.Request{Command: wire.CmdGet, Table: "players", Key: key,
		AsyncID: 42, UserBuffer: ctxBytes}); err != nil {
		return err
	}
	// From one goroutine, at each tick of the SDK's loop: each poll drives re-sends and timeouts.
	for {
		rsp, ok := c.RecvResponse() // a view, valid until the next RecvResponse
		if !ok {
			break // nothing ready
		}
		switch rsp.Result() {
		case retry.ResultOK: // records: rsp.Records(); rsp.AsyncID(), rsp.UserBuffer() as sent
		case retry.ResultReadRetryTimeout: // -19219: retries used up
		}
	}
	// README:end
	return nil
}

// readmeIdem is the server and the client side of idempotent writes.
func readmeIdem(tenant idem.Scope, orders http.Handler, policy *call.Policy) (*http.ServeMux, *http.Client, error) {
	// README:begin
	store, err := idem.NewMemory(idem.MemoryConfig{}) // one process; redisstore, sqlstore across processes
	if err != nil {
		return nil, nil, err
	}
	guard, err := idem.Middleware(store, tenant) // tenant names the authenticated account
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/orders", guard(orders)) // once per Idempotency-Key; repeats get the stored answer
	// The client: each POST gets an Idempotency-Key, so the policy may retry it.
	client := &http.Client{Transport: idem.NewTransport(http.DefaultTransport, policy)}
	// README:end
	return mux, client, nil
}

// The idempotency snippet run end to end: a POST sent twice with one key
// creates one order, and the repeat gets the first answer.
func Example_idem() {
	account := func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil }
	created := 0
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		created++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d", created)
	})
	mux, client, err := readmeIdem(account, orders, call.MustPolicy())
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer client.CloseIdleConnections()
	key := idem.NewKey()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader("2 books"))
		req.Header.Set("X-Account", "acme")
		idem.SetKey(req, key)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get(idem.HeaderReplayed) == "true")
	}
	fmt.Println("orders created:", created)
	// Output:
	// 201 order 1 replayed: false
	// 201 order 1 replayed: true
	// orders created: 1
}
