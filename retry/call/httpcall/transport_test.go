package httpcall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/readretry/readretry/retry/backoff"

	"github.com/readretry/readretry/retry/call"
)

func mustRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// trackedBody is a response body that records how much was read and whether
// it was closed.
type trackedBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// fakeRT answers attempt n (1-based) with reply(n, req) and records what it
// was sent.
type fakeRT struct {
	reply func(n int, req *http.Request) (*http.Response, error)

	mu      sync.Mutex
	reqs    []*http.Request
	bodies  []string
	answers []*trackedBody
}

func (f *fakeRT) RoundTrip(req *http.Request) (*http.Response, error) {
	var body string
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		body = string(b)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.bodies = append(f.bodies, body)
	n := len(f.reqs)
	f.mu.Unlock()
	resp, err := f.reply(n, req)
	if resp != nil {
		tb, ok := resp.Body.(*trackedBody)
		if !ok {
			tb = &trackedBody{r: strings.NewReader("")}
			resp.Body = tb
		}
		f.mu.Lock()
		f.answers = append(f.answers, tb)
		f.mu.Unlock()
	}
	return resp, err
}

func (f *fakeRT) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func respond(code int, body string, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &http.Response{
		StatusCode: code,
		Status:     strconv.Itoa(code) + " " + http.StatusText(code),
		Header:     h,
		Body:       &trackedBody{r: strings.NewReader(body)},
	}
}

// failThen answers the first n attempts with status code, then 200.
func failThen(n, code int, header ...string) func(int, *http.Request) (*http.Response, error) {
	return func(i int, _ *http.Request) (*http.Response, error) {
		if i <= n {
			return respond(code, strings.Repeat("e", 100), header...), nil
		}
		return respond(http.StatusOK, "ok"), nil
	}
}

func fastPolicy(t testing.TB, opts ...call.Option) *call.Policy {
	return mustPolicy(t, append([]call.Option{call.WithBackoff(backoff.None{})}, opts...)...)
}

func TestTransportRetries(t *testing.T) {
	f := &fakeRT{reply: failThen(2, http.StatusServiceUnavailable)}
	tr := &Transport{Base: f, Policy: fastPolicy(t)}
	req := mustRequest(t, context.Background(), "GET", "http://svc/items/1", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resp %v, err %v", resp, err)
	}
	if f.count() != 3 {
		t.Fatalf("%d attempts", f.count())
	}
	for i, r := range f.reqs {
		if got := r.Header.Get(call.HeaderAttempt); got != strconv.Itoa(i+1) {
			t.Errorf("attempt %d sent %s=%q", i+1, call.HeaderAttempt, got)
		}
		if r.Header.Get("Accept") != "application/json" || r == req {
			t.Errorf("attempt %d: headers not copied or request reused", i+1)
		}
	}
	if req.Header.Get(call.HeaderAttempt) != "" || len(req.Header) != 1 {
		t.Fatalf("caller's request modified: %v", req.Header)
	}
	// Intermediate bodies drained and closed; the last one left to the caller.
	for i, b := range f.answers[:2] {
		if !b.closed.Load() || b.read.Load() != 100 {
			t.Errorf("intermediate body %d: closed %v, read %d", i+1, b.closed.Load(), b.read.Load())
		}
	}
	if last := f.answers[2]; last.closed.Load() || last.read.Load() != 0 {
		t.Fatal("final body touched")
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
}

func TestTransportGivesUpWithLastResponse(t *testing.T) {
	f := &fakeRT{reply: failThen(100, http.StatusBadGateway)}
	resp, err := (&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil))
	if err != nil || resp.StatusCode != http.StatusBadGateway || f.count() != 3 {
		t.Fatalf("resp %v, err %v, %d attempts", resp, err, f.count())
	}
	if b, _ := io.ReadAll(resp.Body); len(b) != 100 {
		t.Fatalf("last body %d bytes", len(b))
	}
}

func TestTransportDrainLimit(t *testing.T) {
	big := strings.Repeat("x", 1000)
	f := &fakeRT{reply: func(n int, _ *http.Request) (*http.Response, error) {
		if n == 1 {
			return respond(503, big), nil
		}
		return respond(200, ""), nil
	}}
	tr := &Transport{Base: f, Policy: fastPolicy(t), MaxDrain: 10}
	if _, err := tr.RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil)); err != nil {
		t.Fatal(err)
	}
	if b := f.answers[0]; b.read.Load() != 10 || !b.closed.Load() {
		t.Fatalf("read %d bytes of a 1000-byte body with MaxDrain 10, closed %v", b.read.Load(), b.closed.Load())
	}
}

func TestTransportMethodsAndBodies(t *testing.T) {
	post := func(key string) *http.Request {
		req := mustRequest(t, context.Background(), "POST", "http://svc/orders", strings.NewReader(`{"sku":42}`))
		if key != "" {
			req.Header.Set(HeaderIdempotencyKey, key)
		}
		return req
	}
	cases := []struct {
		name       string
		req        *http.Request
		replayable func(*http.Request) bool
		want       int
	}{
		{"POST is not idempotent", post(""), nil, 1},
		{"POST with a key, default predicate", post("k-1"), nil, 1},
		{"POST with a key, IdempotentOrKeyed", post("k-1"), IdempotentOrKeyed, 3},
		{"POST without a key, IdempotentOrKeyed", post(""), IdempotentOrKeyed, 1},
		{"PUT with a replayable body", mustRequest(t, context.Background(), "PUT", "http://svc/x", bytes.NewReader([]byte(`{"sku":42}`))), nil, 3},
		{"DELETE", mustRequest(t, context.Background(), "DELETE", "http://svc/x", nil), nil, 3},
	}
	for _, c := range cases {
		f := &fakeRT{reply: failThen(100, http.StatusServiceUnavailable)}
		resp, err := (&Transport{Base: f, Policy: fastPolicy(t), Replayable: c.replayable}).RoundTrip(c.req)
		if err != nil || resp.StatusCode != 503 || f.count() != c.want {
			t.Errorf("%s: resp %v err %v, %d attempts, want %d", c.name, resp, err, f.count(), c.want)
			continue
		}
		for i, b := range f.bodies {
			if c.req.Body != nil && b != `{"sku":42}` {
				t.Errorf("%s: attempt %d sent body %q", c.name, i+1, b)
			}
		}
	}
	// A body that cannot be read twice is sent once.
	req := mustRequest(t, context.Background(), "PUT", "http://svc/x", io.NopCloser(strings.NewReader("once")))
	req.GetBody = nil
	f := &fakeRT{reply: failThen(100, http.StatusServiceUnavailable)}
	(&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(req)
	if f.count() != 1 || f.bodies[0] != "once" {
		t.Fatalf("one-shot body: %d attempts, %q", f.count(), f.bodies)
	}
}

func TestTransportGetBodyFails(t *testing.T) {
	req := mustRequest(t, context.Background(), "PUT", "http://svc/x", strings.NewReader("b"))
	errGone := errors.New("body gone")
	req.GetBody = func() (io.ReadCloser, error) { return nil, errGone }
	f := &fakeRT{reply: failThen(100, http.StatusServiceUnavailable)}
	if _, err := (&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(req); err != errGone || f.count() != 1 {
		t.Fatalf("err %v, %d attempts", err, f.count())
	}
}

func TestTransportStatusClasses(t *testing.T) {
	cases := []struct {
		code int
		opts []call.Option
		want int
	}{
		{http.StatusServiceUnavailable, nil, 3},
		{http.StatusBadGateway, nil, 3},
		{http.StatusGatewayTimeout, nil, 3}, // timeout, retried at the entrance
		{http.StatusRequestTimeout, nil, 3},
		{http.StatusTooManyRequests, nil, 1}, // throttled: never (B2)
		{http.StatusTooManyRequests, []call.Option{call.WithRetryableCodes(429)}, 1},
		{http.StatusNotFound, nil, 1},
		{http.StatusInternalServerError, nil, 1}, // unknown
		{http.StatusInternalServerError, []call.Option{call.WithRetryableCodes(500, 503)}, 3},
		{http.StatusServiceUnavailable, []call.Option{call.WithRetryableCodes(500)}, 1}, // not listed
		{http.StatusOK, nil, 1},
		{http.StatusNotModified, nil, 1},
	}
	for _, c := range cases {
		f := &fakeRT{reply: failThen(100, c.code)}
		resp, err := (&Transport{Base: f, Policy: fastPolicy(t, c.opts...)}).RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil))
		if err != nil || resp.StatusCode != c.code || f.count() != c.want {
			t.Errorf("%d %v: %d attempts (want %d), err %v", c.code, c.opts, f.count(), c.want, err)
		}
	}
}

func TestTransportNetworkError(t *testing.T) {
	f := &fakeRT{reply: func(n int, _ *http.Request) (*http.Response, error) {
		if n < 3 {
			return nil, fmt.Errorf("read: %w", syscall.ECONNRESET)
		}
		return respond(200, "ok"), nil
	}}
	resp, err := (&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil))
	if err != nil || resp.StatusCode != 200 || f.count() != 3 {
		t.Fatalf("resp %v, err %v, %d attempts", resp, err, f.count())
	}
	// All attempts failing: the last transport error comes back.
	f = &fakeRT{reply: func(int, *http.Request) (*http.Response, error) { return nil, syscall.ECONNREFUSED }}
	if _, err := (&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil)); err != syscall.ECONNREFUSED || f.count() != 3 {
		t.Fatalf("err %v, %d attempts", err, f.count())
	}
}

// TestTransportRetryAfter: the Retry-After of a retried response reaches
// the policy as the StatusError's wait, which call honours and caps (its
// own tests: TestRetryAfterHonouredAndCapped).
func TestTransportRetryAfter(t *testing.T) {
	for _, c := range []struct {
		header   string
		min, max time.Duration
	}{
		{"3600", time.Hour, time.Hour},
		{"0", 0, 0},
		{time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), 58 * time.Minute, time.Hour},
		{"soon", 0, 0}, // unparsable: ignored
	} {
		var waits []time.Duration
		p := mustPolicy(t, call.WithBackoff(backoff.None{}), call.WithMaxRetryAfter(time.Nanosecond),
			call.WithClassifier(func(err error) call.Class {
				var se *StatusError
				if errors.As(err, &se) {
					waits = append(waits, se.RetryAfter())
				}
				return call.Classify(err)
			}))
		f := &fakeRT{reply: failThen(1, http.StatusServiceUnavailable, "Retry-After", c.header)}
		resp, err := (&Transport{Base: f, Policy: p}).RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil))
		if err != nil || resp.StatusCode != 200 || f.count() != 2 || len(waits) != 1 || waits[0] < c.min || waits[0] > c.max {
			t.Errorf("Retry-After %q: waits %v, want [%v, %v] (err %v, %d attempts)", c.header, waits, c.min, c.max, err, f.count())
		}
	}
	// A Retry-After past the context's deadline: RoundTrip returns at once
	// with the context's error wrapping the 503, as Do does (B7).
	p := mustPolicy(t, call.WithBackoff(backoff.None{}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := &fakeRT{reply: failThen(1, http.StatusServiceUnavailable, "Retry-After", "20")}
	resp, err := (&Transport{Base: f, Policy: p, MaxDrain: -1}).RoundTrip(mustRequest(t, ctx, "GET", "http://svc/", nil))
	var se *StatusError
	if resp != nil || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &se) || se.Code != 503 || f.count() != 1 {
		t.Fatalf("resp %v, err %v, %d attempts", resp, err, f.count())
	}
	if !f.answers[0].closed.Load() {
		t.Fatal("503 body not closed")
	}
}

// TestTransportDeadlineBeforeBackoff is issue 13's input (SPEC B7): a server
// answering 503, a request context with a 200 ms deadline, a 1 s backoff.
// RoundTrip returns what Do returns: no response, a *ContextError wrapping
// context.DeadlineExceeded and the 503, the 503's body closed, and no sleep
// into the deadline.
func TestTransportDeadlineBeforeBackoff(t *testing.T) {
	p := mustPolicy(t, call.WithBackoff(backoff.Constant{Wait: time.Second}))
	check := func(t *testing.T, resp *http.Response, err error, took time.Duration) {
		t.Helper()
		var ce *call.ContextError
		var se *StatusError
		if resp != nil || !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) ||
			!errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || ce.Attempts != 1 {
			t.Fatalf("resp %v, err %v", resp, err)
		}
		if took >= time.Second {
			t.Fatalf("returned after %v: slept into the backoff", took)
		}
	}
	t.Run("fake transport", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		f := &fakeRT{reply: failThen(100, http.StatusServiceUnavailable)}
		start := time.Now()
		resp, err := (&Transport{Base: f, Policy: p}).RoundTrip(mustRequest(t, ctx, "GET", "http://svc/", nil))
		check(t, resp, err, time.Since(start))
		if f.count() != 1 || !f.answers[0].closed.Load() {
			t.Fatalf("%d attempts, body closed %v", f.count(), f.answers[0].closed.Load())
		}
	})
	t.Run("loopback server", func(t *testing.T) {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy")
		}))
		defer srv.Close()
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		client := &http.Client{Transport: &Transport{Base: base, Policy: p}}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := client.Do(mustRequest(t, ctx, "GET", srv.URL, nil))
		check(t, resp, err, time.Since(start))
		if hits.Load() != 1 {
			t.Fatalf("%d requests", hits.Load())
		}
	})
}

func TestTransportCancelDuringBackoff(t *testing.T) {
	p := mustPolicy(t, call.WithBackoff(backoff.Constant{Wait: time.Hour}))
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeRT{reply: func(int, *http.Request) (*http.Response, error) {
		time.AfterFunc(10*time.Millisecond, cancel)
		return respond(503, "busy"), nil
	}}
	resp, err := (&Transport{Base: f, Policy: p}).RoundTrip(mustRequest(t, ctx, "GET", "http://svc/", nil))
	var se *StatusError
	if resp != nil || !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.Code != 503 {
		t.Fatalf("resp %v, err %v", resp, err)
	}
	if !f.answers[0].closed.Load() {
		t.Fatal("503 body not closed")
	}
}

func TestTransportFlags(t *testing.T) {
	f := &fakeRT{reply: failThen(1, http.StatusServiceUnavailable)}
	ctx := call.WithEntrance(call.WithRetryFlag(context.Background(), "checkout"))
	if _, err := (&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(mustRequest(t, ctx, "GET", "http://svc/", nil)); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.reqs {
		if r.Header.Get(call.HeaderFlag) != "checkout" {
			t.Fatalf("flag not propagated: %v", r.Header)
		}
		for k := range r.Header {
			if strings.Contains(strings.ToLower(k), "entrance") {
				t.Fatalf("entrance propagated: %v", r.Header)
			}
		}
	}
	// Inside a Do loop, the header counts the outer attempts too.
	f = &fakeRT{reply: failThen(0, 0)}
	n := 0
	call.Do(context.Background(), fastPolicy(t), func(ctx context.Context) error {
		n++
		(&Transport{Base: f, Policy: fastPolicy(t)}).RoundTrip(mustRequest(t, ctx, "GET", "http://svc/", nil))
		if n < 3 {
			return call.Mark(errors.New("connection reset"), call.Network)
		}
		return nil
	})
	var got []string
	for _, r := range f.reqs {
		got = append(got, r.Header.Get(call.HeaderAttempt))
	}
	if strings.Join(got, ",") != "1,2,3" {
		t.Fatalf("attempt headers %v", got)
	}
}

// TestTransportPerAttemptTimeout: the attempt's timeout lives until the
// caller closes the body.
func TestTransportPerAttemptTimeout(t *testing.T) {
	var sent context.Context
	f := &fakeRT{reply: func(_ int, req *http.Request) (*http.Response, error) {
		sent = req.Context()
		return respond(200, "ok"), nil
	}}
	p := mustPolicy(t, call.WithSettings(backoff.Settings{InitialRPCTimeout: time.Minute, MaxAttempts: 2}))
	resp, err := (&Transport{Base: f, Policy: p}).RoundTrip(mustRequest(t, context.Background(), "GET", "http://svc/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sent.Deadline(); !ok || sent.Err() != nil {
		t.Fatal("attempt context without a live deadline")
	}
	resp.Body.Close()
	if sent.Err() == nil {
		t.Fatal("attempt context not released when the body was closed")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 120 * time.Second, true},
		{"0", 0, true},
		{"007", 7 * time.Second, true},
		{"99999999999999999999999", (1 << 30) * time.Second, true},
		{"Wed, 01 May 2024 12:00:30 GMT", 30 * time.Second, true},
		{"Wed, 01 May 2024 11:00:00 GMT", 0, true}, // in the past
		{"Wednesday, 01-May-24 12:01:00 GMT", time.Minute, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"12a", 0, false},
		{"tomorrow", 0, false},
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "", "-1", "Wed, 01 May 2024 12:00:30 GMT", "Sun Nov  6 08:49:37 1994", "99999999999999999999", "1e3"} {
		f.Add(s)
	}
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

// chainHop is one service of the seed 001 chain: it counts the requests it
// gets and the attempt headers they carry.
type chainHop struct {
	mu       sync.Mutex
	attempts []string
}

func (h *chainHop) seen(r *http.Request) {
	h.mu.Lock()
	h.attempts = append(h.attempts, r.Header.Get(call.HeaderAttempt))
	h.mu.Unlock()
}

func (h *chainHop) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.attempts)
}

// forward calls url with client and answers 504 if the call timed out, 502
// for another transport error, else the downstream's status.
func forward(w http.ResponseWriter, r *http.Request, client *http.Client, url string) {
	req, _ := http.NewRequestWithContext(r.Context(), "GET", url, nil)
	resp, err := client.Do(req)
	switch {
	case err != nil && call.Classify(err) == call.Timeout:
		w.WriteHeader(http.StatusGatewayTimeout)
	case err != nil:
		w.WriteHeader(http.StatusBadGateway)
	default:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}
}

// TestChainTimeoutOnlyEntranceRetries is the seed 001 scenario (SPEC B5):
// A→B→C over three HTTP services on 127.0.0.1, C too slow for B's per-attempt
// timeout. Every level sees the timeout; only A, the entrance, retries, so C
// gets at most MaxAttempts requests per original call instead of
// MaxAttempts².
func TestChainTimeoutOnlyEntranceRetries(t *testing.T) {
	const maxAttempts = 3
	var a, b, c chainHop

	svcC := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.seen(r)
		select { // far slower than B's timeout; ends when B gives up
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusOK)
	})))
	defer svcC.Close()

	baseB := &http.Transport{}
	defer baseB.CloseIdleConnections()
	clientB := &http.Client{Transport: &Transport{Base: baseB, Policy: mustPolicy(t,
		call.WithSettings(backoff.Settings{InitialRPCTimeout: 100 * time.Millisecond, InitialRetryDelay: time.Millisecond, MaxAttempts: maxAttempts}))}}
	svcB := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.seen(r)
		forward(w, r, clientB, svcC.URL)
	})))
	defer svcB.Close()

	baseA := &http.Transport{}
	defer baseA.CloseIdleConnections()
	clientA := &http.Client{Transport: &Transport{Base: baseA, Policy: mustPolicy(t,
		call.WithSettings(backoff.Settings{InitialRPCTimeout: 5 * time.Second, InitialRetryDelay: time.Millisecond, MaxAttempts: maxAttempts}))}}
	svcA := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.seen(r)
		forward(w, r, clientA, svcB.URL)
	})))
	defer svcA.Close()

	user := &http.Transport{}
	defer user.CloseIdleConnections()
	const calls = 2
	for i := range calls {
		resp, err := (&http.Client{Transport: user}).Get(svcA.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("call %d: status %d", i, resp.StatusCode)
		}
		if c.count() > maxAttempts*(i+1) {
			t.Fatalf("call %d: C saw %d requests, more than MaxAttempts per call", i, c.count())
		}
	}
	if a.count() != calls || b.count() != calls*maxAttempts || c.count() != calls*maxAttempts {
		t.Fatalf("A %d, B %d, C %d requests", a.count(), b.count(), c.count())
	}
	if fmt.Sprint(a.attempts) != "[ ]" {
		t.Errorf("A got attempt headers %q: it is the entrance", a.attempts)
	}
	if fmt.Sprint(b.attempts) != "[1 2 3 1 2 3]" || fmt.Sprint(c.attempts) != "[1 1 1 1 1 1]" {
		t.Errorf("attempt headers: B %q, C %q", b.attempts, c.attempts)
	}
}

// TestRetryRequestNotRetriedDownstream (B5, seed 003): a service serving a
// request marked as a retry does not retry its own calls, even on errors it
// would otherwise retry.
func TestRetryRequestNotRetriedDownstream(t *testing.T) {
	var down atomic.Int32
	svcDown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer svcDown.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &Transport{Base: base, Policy: fastPolicy(t)}}
	svc := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forward(w, r, client, svcDown.URL)
	})))
	defer svc.Close()

	user := &http.Transport{}
	defer user.CloseIdleConnections()
	for _, c := range []struct {
		attempt string
		want    int32
	}{{"", 3}, {"1", 3}, {"2", 1}, {"3", 1}} {
		down.Store(0)
		req, _ := http.NewRequest("GET", svc.URL, nil)
		if c.attempt != "" {
			req.Header.Set(call.HeaderAttempt, c.attempt)
		}
		resp, err := (&http.Client{Transport: user}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if down.Load() != c.want {
			t.Errorf("incoming attempt %q: downstream saw %d requests, want %d", c.attempt, down.Load(), c.want)
		}
	}
}

// TestStatusErrorClassify: call.Classify sees a StatusError's class through
// its RetryClass (SPEC B2), as the Transport's policy does.
func TestStatusErrorClassify(t *testing.T) {
	for _, c := range []struct {
		code int
		want call.Class
	}{
		{503, call.Network}, {502, call.Network}, {504, call.Timeout}, {408, call.Timeout},
		{429, call.ServiceQuality}, {400, call.Business}, {404, call.Business}, {500, call.Unknown},
	} {
		err := fmt.Errorf("wrapped: %w", &StatusError{Code: c.code})
		if got := call.Classify(err); got != c.want {
			t.Errorf("Classify(status %d) = %v, want %v", c.code, got, c.want)
		}
	}
}
