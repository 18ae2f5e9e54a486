package httpcall

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/readretry/readretry/retry/call"
)

// edgeSetup is issue 17 item 10's setup: a client outside the system calls a
// service S, whose handler calls a downstream D that always fails with
// status code. S's flags come from Handler(opts...); its calls to D go
// through a Transport under policy.
type edgeSetup struct {
	hits     atomic.Int32 // requests D received
	mu       sync.Mutex
	flags    []string // HeaderFlag values D received
	srv, dwn *httptest.Server
	base     *http.Transport
}

func newEdgeSetup(t *testing.T, code int, policy *call.Policy, opts ...call.ServerOption) *edgeSetup {
	t.Helper()
	e := &edgeSetup{}
	e.dwn = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		e.mu.Lock()
		e.flags = append(e.flags, r.Header.Get(call.HeaderFlag))
		e.mu.Unlock()
		w.WriteHeader(code)
	}))
	e.base = &http.Transport{}
	client := &http.Client{Transport: &Transport{Base: e.base, Policy: policy}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		forward(w, r, client, e.dwn.URL)
	})
	mux.HandleFunc("/checkout", func(w http.ResponseWriter, r *http.Request) {
		// The operator's own retry flag for this scenario.
		forward(w, r.WithContext(call.WithRetryFlag(r.Context(), "checkout")), client, e.dwn.URL)
	})
	e.srv = httptest.NewServer(Handler(mux, opts...))
	t.Cleanup(func() {
		e.srv.Close()
		e.dwn.Close()
		e.base.CloseIdleConnections()
	})
	return e
}

// call sends one request from outside with the given headers and returns
// how many requests D received for it.
func (e *edgeSetup) call(t *testing.T, path string, header ...string) int32 {
	t.Helper()
	e.hits.Store(0)
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	user := &http.Transport{}
	defer user.CloseIdleConnections()
	resp, err := (&http.Client{Transport: user}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return e.hits.Load()
}

// TestEdgeRetryFlagFromOutside is issue 17 item 10's first input: a client
// sending X-Retry-Flag turns on retries the operator keeps off (a policy
// with RequireRetryFlag and 5 attempts; D fails with 503). Inside the system
// the header is believed (D is hit 5 times: the documented behaviour of a
// trusted caller); with Edge it is ignored, and D is hit once — what the
// policy says for a request without the operator's flag. The operator's own
// flag still switches retries on, and it is the one D sees.
func TestEdgeRetryFlagFromOutside(t *testing.T) {
	p := fastPolicy(t, call.RequireRetryFlag(), call.WithMaxAttempts(5))
	inside := newEdgeSetup(t, http.StatusServiceUnavailable, p)
	if n := inside.call(t, "/", call.HeaderFlag, "sneaky"); n != 5 {
		t.Fatalf("inside, flag sent: D hit %d times, want 5 (flags believed)", n)
	}
	edge := newEdgeSetup(t, http.StatusServiceUnavailable, p, call.Edge())
	if n := edge.call(t, "/", call.HeaderFlag, "sneaky"); n != 1 {
		t.Fatalf("edge, flag sent: D hit %d times, want 1 (RequireRetryFlag, no operator flag)", n)
	}
	if n := edge.call(t, "/"); n != 1 {
		t.Fatalf("edge, no flag: D hit %d times, want 1", n)
	}
	edge.mu.Lock()
	edge.flags = nil
	edge.mu.Unlock()
	if n := edge.call(t, "/checkout", call.HeaderFlag, "sneaky"); n != 5 {
		t.Fatalf("edge, operator flag: D hit %d times, want 5", n)
	}
	edge.mu.Lock()
	defer edge.mu.Unlock()
	for _, f := range edge.flags {
		if f != "checkout" {
			t.Fatalf("D saw flags %q, want the operator's", edge.flags)
		}
	}
}

// TestEdgeAttemptFromOutside is issue 17 item 10's second input: a client
// sending X-Retry-Attempt: 2 turns the entrance's retries off (the request
// looks like a retry, which is not retried again), and X-Retry-Attempt: 1
// takes away its entrance mark (timeouts are then not retried). With Edge the
// service stays the entrance: D is hit as often as the default policy says,
// 3 times, for a 503 and for a 504 alike.
func TestEdgeAttemptFromOutside(t *testing.T) {
	p := fastPolicy(t) // 3 attempts in all
	for _, c := range []struct {
		code           int
		attempt        string
		inside, atEdge int32
	}{
		{http.StatusServiceUnavailable, "2", 1, 3},
		{http.StatusServiceUnavailable, "7", 1, 3},
		{http.StatusServiceUnavailable, "junk", 1, 3},
		{http.StatusGatewayTimeout, "1", 1, 3},
		{http.StatusGatewayTimeout, "", 3, 3},
	} {
		var header []string
		if c.attempt != "" {
			header = []string{call.HeaderAttempt, c.attempt}
		}
		inside := newEdgeSetup(t, c.code, p)
		if n := inside.call(t, "/", header...); n != c.inside {
			t.Errorf("inside, %d, attempt %q: D hit %d times, want %d", c.code, c.attempt, n, c.inside)
		}
		edge := newEdgeSetup(t, c.code, p, call.Edge())
		if n := edge.call(t, "/", header...); n != c.atEdge {
			t.Errorf("edge, %d, attempt %q: D hit %d times, want %d", c.code, c.attempt, n, c.atEdge)
		}
	}
}

// TestHandlerEdgeNilOption: a nil ServerOption changes nothing.
func TestHandlerEdgeNilOption(t *testing.T) {
	var got call.Flags
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = call.FlagsFrom(r.Context())
	}), nil)
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(call.HeaderAttempt, "2")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != (call.Flags{Attempt: 2}) {
		t.Fatalf("flags %+v", got)
	}
}
