package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/call"
	"github.com/readretry/readretry/retry/call/httpcall"
)

// discardWriter is a ResponseWriter whose answer nobody receives.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

func mustMiddleware(t testing.TB, s idem.Store, scope idem.Scope, opts ...idem.Option) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := idem.Middleware(s, scope, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// mustBodyFingerprint is idem.FingerprintBody(max) for a valid max.
func mustBodyFingerprint(t testing.TB, max int64) idem.Fingerprint {
	t.Helper()
	fp, err := idem.FingerprintBody(max)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// retryClient is the client side of issue 8: httpcall.Transport retrying
// keyed POSTs without delay, over connections that are never reused (so
// that net/http's own transport never retries on its own: every retry
// seen here is httpcall.Transport's).
func retryClient(t *testing.T) (*http.Client, *http.Transport) {
	base := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(base.CloseIdleConnections)
	p := call.MustPolicy(call.WithBackoff(backoff.None{}), call.WithMaxAttempts(3))
	return &http.Client{Transport: idem.NewTransport(base, p), Timeout: 10 * time.Second}, base
}

func post(t *testing.T, c *http.Client, url, key, body string) (*http.Response, string) {
	t.Helper()
	resp, b, err := postErr(c, url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// postErr is post for goroutines other than the test's, where t.Fatal must
// not be called: it returns the error instead.
func postErr(c *http.Client, url, key, body string) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	if key != "" {
		idem.SetKey(req, key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	return resp, string(b), nil
}

// TestRetriedPOSTExactlyOnce is issue 8's end-to-end test: a POST with an
// idempotency key goes through httpcall.Transport to a real server on
// 127.0.0.1; the first attempt is processed but its answer is lost (the
// connection is closed instead), httpcall.Transport retries because the
// request carries a key, and the middleware answers the retry with the
// stored first answer. The business logic runs exactly once.
func TestRetriedPOSTExactlyOnce(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var orders atomic.Int32
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := orders.Add(1)
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "order "+string(rune('0'+n))+": "+string(body))
	})
	guarded := mustMiddleware(t, store, idem.GlobalScope, idem.WithFingerprint(mustBodyFingerprint(t, 1<<10)))(app)
	var attempts atomic.Int32
	var retryHeader atomic.Value
	srv := httptest.NewServer(httpcall.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			// Process the request fully, then lose the answer.
			guarded.ServeHTTP(&discardWriter{h: http.Header{}}, r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		retryHeader.Store(r.Header.Get(call.HeaderAttempt))
		guarded.ServeHTTP(w, r)
	})))
	defer srv.Close()

	client, _ := retryClient(t)
	resp, body := post(t, client, srv.URL+"/orders", "order-key-1", "2 books")
	if resp.StatusCode != http.StatusCreated || body != "order 1: 2 books" {
		t.Fatalf("answer = %d %q, want the first call's 201", resp.StatusCode, body)
	}
	if resp.Header.Get(idem.HeaderReplayed) != "true" || resp.Header.Get("Location") != "/orders/1" {
		t.Fatalf("replayed answer headers = %v", resp.Header)
	}
	if n := orders.Load(); n != 1 {
		t.Fatalf("business logic ran %d times, want exactly 1", n)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("server saw %d attempts, want 2 (one retry)", n)
	}
	if h, _ := retryHeader.Load().(string); h != "2" {
		t.Fatalf("retry carried %s %q, want 2", call.HeaderAttempt, h)
	}
	// The same key with another payload is refused, not replayed.
	resp, _ = post(t, client, srv.URL+"/orders", "order-key-1", "3 books")
	if resp.StatusCode != http.StatusUnprocessableEntity || orders.Load() != 1 {
		t.Fatalf("key reused with another body: %d (orders %d), want 422", resp.StatusCode, orders.Load())
	}
}

// TestPOSTWithoutKeyNotRetried: the same lost answer without a key is not
// retried — httpcall.Transport only replays keyed writes.
func TestPOSTWithoutKeyNotRetried(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	base := &http.Transport{DisableKeepAlives: true}
	defer base.CloseIdleConnections()
	p := call.MustPolicy(call.WithBackoff(backoff.None{}))
	client := &http.Client{Transport: &httpcall.Transport{Base: base, Policy: p, Replayable: httpcall.IdempotentOrKeyed}}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("lost answer without a key: no error")
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("unkeyed POST sent %d times, want 1", n)
	}
}

// TestMiddlewareConcurrentDuplicates: while the first call runs, repeats
// get 409 with Retry-After; after it, repeats get its answer.
func TestMiddlewareConcurrentDuplicates(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	entered := make(chan struct{})
	release := make(chan struct{})
	var runs atomic.Int32
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(entered)
		}
		<-release
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created")
	})
	srv := httptest.NewServer(mustMiddleware(t, store, idem.GlobalScope)(app))
	defer srv.Close()
	c := srv.Client()
	defer c.CloseIdleConnections()

	first := make(chan int)
	go func() {
		resp, _, err := postErr(c, srv.URL, "k", "")
		if err != nil {
			t.Error(err)
			first <- 0
			return
		}
		first <- resp.StatusCode
	}()
	<-entered
	const dups = 20
	var wg sync.WaitGroup
	var conflicts atomic.Int32
	for range dups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _, err := postErr(c, srv.URL, "k", "")
			if err != nil {
				t.Error(err)
				return
			}
			if resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") == "1" {
				conflicts.Add(1)
			}
		}()
	}
	wg.Wait()
	close(release)
	if code := <-first; code != http.StatusCreated {
		t.Fatalf("first call = %d", code)
	}
	if conflicts.Load() != dups {
		t.Fatalf("%d of %d repeats during the first call got 409", conflicts.Load(), dups)
	}
	resp, body := post(t, c, srv.URL, "k", "")
	if resp.StatusCode != http.StatusCreated || body != "created" || resp.Header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("repeat after completion = %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times", runs.Load())
	}
}

// TestMiddlewareReleasesFailures: a 503 or a panicking handler releases
// the key, so httpcall.Transport's retry runs the handler again; the eventual
// success is stored.
func TestMiddlewareReleasesFailures(t *testing.T) {
	for _, fail := range []string{"503", "panic"} {
		t.Run(fail, func(t *testing.T) {
			store := newMemory(t, idem.MemoryConfig{Capacity: 64})
			var calls, successes atomic.Int32
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					if fail == "panic" {
						panic(http.ErrAbortHandler)
					}
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				successes.Add(1)
				io.WriteString(w, "done")
			})
			srv := httptest.NewServer(mustMiddleware(t, store, idem.GlobalScope)(app))
			defer srv.Close()
			client, _ := retryClient(t)
			resp, body := post(t, client, srv.URL, "k-"+fail, "")
			if resp.StatusCode != http.StatusOK || body != "done" || resp.Header.Get(idem.HeaderReplayed) != "" {
				t.Fatalf("after a released failure = %d %q", resp.StatusCode, body)
			}
			resp, body = post(t, client, srv.URL, "k-"+fail, "")
			if body != "done" || resp.Header.Get(idem.HeaderReplayed) != "true" {
				t.Fatalf("repeat = %d %q", resp.StatusCode, body)
			}
			if calls.Load() != 2 || successes.Load() != 1 {
				t.Fatalf("handler calls %d, successes %d; want 2, 1", calls.Load(), successes.Load())
			}
		})
	}
}

func TestMiddlewareRequests(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var runs atomic.Int32
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "0123456789")
	})
	var errs []error
	var mu sync.Mutex
	onErr := func(_ *http.Request, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	scoped := mustMiddleware(t, store, func(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil },
		idem.WithMaxBody(4), idem.WithRequireKey(),
		idem.WithErrorHandler(onErr), idem.WithTTL(idem.TTL{Pending: time.Second}))(app)
	do := func(method, key, account, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if key != "" {
			r.Header.Set(httpcall.HeaderIdempotencyKey, key)
		}
		r.Header.Set("X-Account", account)
		w := httptest.NewRecorder()
		scoped.ServeHTTP(w, r)
		return w
	}
	// Safe methods pass through, key or not.
	do("GET", "k", "a", "/x")
	do("GET", "k", "a", "/x")
	if runs.Load() != 2 {
		t.Fatalf("GET runs = %d", runs.Load())
	}
	// An unsafe request without a key is refused under WithRequireKey.
	if w := do("POST", "", "a", "/x"); w.Code != http.StatusBadRequest || runs.Load() != 2 {
		t.Fatalf("POST without key = %d", w.Code)
	}
	// A key too long with its scope: scope "a", the separator and 254
	// bytes make 256 (issue 17 item 1: the composite counts against
	// MaxKeyLen); 253 bytes fit.
	if w := do("POST", strings.Repeat("k", idem.MaxKeyLen-1), "a", "/x"); w.Code != http.StatusBadRequest || runs.Load() != 2 {
		t.Fatalf("key too long with its scope = %d", w.Code)
	}
	if w := do("POST", strings.Repeat("k", idem.MaxKeyLen-2), "a", "/x"); w.Code != http.StatusOK || runs.Load() != 3 {
		t.Fatalf("key that fits with its scope = %d", w.Code)
	}
	// The body over MaxBody reaches the first caller; a repeat gets the
	// status and headers, an empty body and no stale Content-Length.
	if w := do("POST", "k", "a", "/x"); w.Code != 200 || w.Body.String() != "0123456789" {
		t.Fatalf("first = %d %q", w.Code, w.Body)
	}
	w := do("POST", "k", "a", "/x")
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "" || w.Header().Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("repeat of an omitted body = %d %q %v", w.Code, w.Body, w.Header())
	}
	// Another account, same key: another request.
	if w := do("POST", "k", "b", "/x"); w.Header().Get(idem.HeaderReplayed) != "" {
		t.Fatal("a key was shared across scopes")
	}
	// Same key and account, another path: 422 under the default fingerprint.
	if w := do("PATCH", "k", "a", "/y"); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("key reused on another path = %d", w.Code)
	}
	if runs.Load() != 5 {
		t.Fatalf("handler runs = %d, want 5", runs.Load())
	}
	if len(errs) != 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
}

// failingStore is a store whose backend is down.
type failingStore struct{ idem.Store }

var errDown = errors.New("store down")

func (failingStore) Claim(context.Context, []byte, time.Duration) (idem.Fence, error) {
	return 0, errDown
}

func TestMiddlewareStoreDown(t *testing.T) {
	var got error
	mw := mustMiddleware(t, failingStore{}, idem.GlobalScope, idem.WithErrorHandler(func(_ *http.Request, err error) { got = err }))
	ran := false
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	r := httptest.NewRequest("POST", "/", nil)
	idem.SetKey(r, "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || ran || !errors.Is(got, errDown) {
		t.Fatalf("store down: %d, ran %v, err %v", w.Code, ran, got)
	}
	// call classifies the 503 as a network error: it is retried.
	if httpcall.StatusClass(w.Code) != call.Network {
		t.Fatalf("503 class = %v", httpcall.StatusClass(w.Code))
	}
}

func TestMiddlewareOptions(t *testing.T) {
	s := newMemory(t, idem.MemoryConfig{Capacity: 4})
	bad := []idem.Option{
		idem.WithTTL(idem.TTL{Pending: -1}),
		idem.WithMaxBody(-1),
		idem.WithFingerprint(nil),
		idem.WithRelease(nil),
		idem.WithErrorHandler(nil),
	}
	for i, o := range bad {
		if _, err := idem.Middleware(s, idem.GlobalScope, o); !errors.Is(err, idem.ErrInvalidConfig) {
			t.Errorf("option %d: %v, want ErrInvalidConfig", i, err)
		}
	}
	if _, err := idem.Middleware(nil, idem.GlobalScope); !errors.Is(err, idem.ErrInvalidConfig) {
		t.Errorf("nil store: %v", err)
	}
	// The scope is required (issue 17 item 2): no silent global default.
	if _, err := idem.Middleware(s, nil); !errors.Is(err, idem.ErrInvalidConfig) {
		t.Errorf("nil scope: %v", err)
	}
	// WithRelease decides what is stored: here even a 500 is kept.
	mw := mustMiddleware(t, s, idem.GlobalScope, idem.WithRelease(func(int) bool { return false }), nil)
	runs := 0
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(500)
	}))
	for range 2 {
		r := httptest.NewRequest("POST", "/", nil)
		idem.SetKey(r, "k")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if runs != 1 {
		t.Fatalf("stored 500 ran %d times", runs)
	}
	// FingerprintBody refuses a body over its limit with 413.
	mw = mustMiddleware(t, s, idem.GlobalScope, idem.WithFingerprint(mustBodyFingerprint(t, 4)))
	r := httptest.NewRequest("POST", "/", strings.NewReader("12345"))
	idem.SetKey(r, "big")
	w := httptest.NewRecorder()
	mw(http.NotFoundHandler()).ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body = %d", w.Code)
	}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestKeyTransport(t *testing.T) {
	var keys []string
	kt := &idem.KeyTransport{Next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		keys = append(keys, idem.Key(r))
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})}
	send := func(method, key string) *http.Request {
		r := httptest.NewRequest(method, "http://example/", nil)
		if key != "" {
			r.Header.Set("X-Idempotency-Key", key)
		}
		if _, err := kt.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	orig := send("POST", "")
	send("GET", "")
	send("PUT", "")
	send("POST", "mine")
	// Every unsafe method gets a key (PUT too: the server's Middleware
	// guards it like a POST); safe ones do not; a key present is kept.
	if len(keys) != 4 || len(keys[0]) != 26 || keys[1] != "" || len(keys[2]) != 26 || keys[3] != "mine" {
		t.Fatalf("keys sent = %q", keys)
	}
	if idem.Key(orig) != "" {
		t.Fatal("KeyTransport modified the caller's request")
	}
	if a, b := idem.NewKey(), idem.NewKey(); a == b {
		t.Fatal("NewKey repeated itself")
	}
}

// TestRetryWaitsOutInProgress: a keyed POST whose earlier copy is still
// running on the server gets 409 with Retry-After; with idem.Classify the
// client waits and retries, and receives the first call's stored answer.
func TestRetryWaitsOutInProgress(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	entered := make(chan struct{})
	release := make(chan struct{})
	var runs atomic.Int32
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(entered)
		}
		<-release
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created once")
	})
	guarded := mustMiddleware(t, store, idem.GlobalScope)(app)
	var requests atomic.Int32
	conflictServed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		guarded.ServeHTTP(w, r)
		if n == 2 {
			close(conflictServed) // the retrying client's first attempt got its 409
		}
	}))
	defer srv.Close()
	defer srv.Client().CloseIdleConnections()

	// An earlier copy of the request (an attempt the client gave up on)
	// holds the key.
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		idem.SetKey(req, "slow-key")
		if resp, err := srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	go func() {
		<-conflictServed
		close(release) // the first copy finishes while the client waits
	}()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	p := call.MustPolicy(call.WithClassifier(idem.Classify), call.WithBackoff(backoff.None{}))
	client := &http.Client{Transport: idem.NewTransport(base, p)}
	resp, body := post(t, client, srv.URL, "slow-key", "x")
	<-firstDone
	if resp.StatusCode != http.StatusCreated || body != "created once" || resp.Header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("answer after waiting out the first copy = %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if runs.Load() != 1 || requests.Load() != 3 {
		t.Fatalf("handler ran %d times over %d requests; want 1 over 3", runs.Load(), requests.Load())
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want call.Class
	}{
		{&httpcall.StatusError{Code: 409, Wait: time.Second}, call.Network},
		{&httpcall.StatusError{Code: 409}, call.Business},
		{&httpcall.StatusError{Code: 503}, call.Network},
		{&httpcall.StatusError{Code: 422, Wait: time.Second}, call.Business},
		{io.ErrUnexpectedEOF, call.Network},
	}
	for _, c := range cases {
		if got := idem.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
