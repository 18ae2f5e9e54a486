package call

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
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

func newEdgeSetup(t *testing.T, code int, policy *Policy, opts ...ServerOption) *edgeSetup {
	t.Helper()
	e := &edgeSetup{}
	e.dwn = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		e.mu.Lock()
		e.flags = append(e.flags, r.Header.Get(HeaderFlag))
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
		forward(w, r.WithContext(WithRetryFlag(r.Context(), "checkout")), client, e.dwn.URL)
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
	p := fastPolicy(t, RequireRetryFlag(), WithMaxAttempts(5))
	inside := newEdgeSetup(t, http.StatusServiceUnavailable, p)
	if n := inside.call(t, "/", HeaderFlag, "sneaky"); n != 5 {
		t.Fatalf("inside, flag sent: D hit %d times, want 5 (flags believed)", n)
	}
	edge := newEdgeSetup(t, http.StatusServiceUnavailable, p, Edge())
	if n := edge.call(t, "/", HeaderFlag, "sneaky"); n != 1 {
		t.Fatalf("edge, flag sent: D hit %d times, want 1 (RequireRetryFlag, no operator flag)", n)
	}
	if n := edge.call(t, "/"); n != 1 {
		t.Fatalf("edge, no flag: D hit %d times, want 1", n)
	}
	edge.mu.Lock()
	edge.flags = nil
	edge.mu.Unlock()
	if n := edge.call(t, "/checkout", HeaderFlag, "sneaky"); n != 5 {
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
			header = []string{HeaderAttempt, c.attempt}
		}
		inside := newEdgeSetup(t, c.code, p)
		if n := inside.call(t, "/", header...); n != c.inside {
			t.Errorf("inside, %d, attempt %q: D hit %d times, want %d", c.code, c.attempt, n, c.inside)
		}
		edge := newEdgeSetup(t, c.code, p, Edge())
		if n := edge.call(t, "/", header...); n != c.atEdge {
			t.Errorf("edge, %d, attempt %q: D hit %d times, want %d", c.code, c.attempt, n, c.atEdge)
		}
	}
}

// TestExtractEdge: Edge ignores the carrier whatever it holds.
func TestExtractEdge(t *testing.T) {
	for _, c := range []mapCarrier{
		{},
		{HeaderAttempt: "2", HeaderFlag: "x"},
		{HeaderAttempt: "1"},
		{HeaderAttempt: "junk", HeaderFlag: "y"},
	} {
		f, ok := FlagsFrom(Extract(context.Background(), c, Edge()))
		if !ok || f != (Flags{Entrance: true}) {
			t.Errorf("Extract(%v, Edge()) = %+v", c, f)
		}
		// A nil option is ignored: the carrier is read.
		g, _ := FlagsFrom(Extract(context.Background(), c, nil))
		h, _ := FlagsFrom(Extract(context.Background(), c))
		if g != h {
			t.Errorf("Extract(%v, nil) = %+v, want %+v", c, g, h)
		}
	}
}

// TestReceive: the server-side endpoint middleware puts the flags read from
// the request's metadata into the handler's context, and under Propagate on
// the client side the metadata carries what Receive needs.
func TestReceive(t *testing.T) {
	type req struct{ meta mapCarrier }
	carrier := func(_ context.Context, r *req) Carrier {
		if r.meta == nil {
			return nil
		}
		return r.meta
	}
	var got Flags
	var ok bool
	handler := func(ctx context.Context, _ *req) (string, error) {
		got, ok = FlagsFrom(ctx)
		return "done", nil
	}
	cases := []struct {
		meta mapCarrier
		opts []ServerOption
		want Flags
	}{
		{nil, nil, Flags{Entrance: true}},
		{mapCarrier{}, nil, Flags{Entrance: true}},
		{mapCarrier{HeaderAttempt: "1"}, nil, Flags{Attempt: 1}},
		{mapCarrier{HeaderAttempt: "3", HeaderFlag: "checkout"}, nil, Flags{Attempt: 3, Flag: "checkout"}},
		{mapCarrier{HeaderAttempt: "-1"}, nil, Flags{Attempt: 2}},
		{mapCarrier{HeaderAttempt: "3", HeaderFlag: "checkout"}, []ServerOption{Edge()}, Flags{Entrance: true}},
		{nil, []ServerOption{Edge()}, Flags{Entrance: true}},
	}
	for _, c := range cases {
		ep := Receive[*req, string](carrier, c.opts...)(handler)
		v, err := ep(context.Background(), &req{meta: c.meta})
		if v != "done" || err != nil || !ok || got != c.want {
			t.Errorf("meta %v, %d opts: %q %v, flags %+v (%v), want %+v", c.meta, len(c.opts), v, err, got, ok, c.want)
		}
	}

	// Client to server: Retry(Propagate(...)) on one side, Receive on the
	// other; the server's flags follow the attempts.
	var seen []Flags
	server := Receive[*req, string](carrier)(func(ctx context.Context, _ *req) (string, error) {
		f, _ := FlagsFrom(ctx)
		seen = append(seen, f)
		if len(seen) < 3 {
			return "", errNet
		}
		return "ok", nil
	})
	client := Chain(
		Retry[*req, string](fastPolicy(t)),
		Propagate[*req, string](carrier),
	)(func(ctx context.Context, r *req) (string, error) {
		// The wire: a fresh request whose metadata is what was injected.
		return server(context.Background(), &req{meta: mapCarrier{HeaderAttempt: r.meta[HeaderAttempt], HeaderFlag: r.meta[HeaderFlag]}})
	})
	ctx := WithRetryFlag(context.Background(), "checkout")
	if v, err := client(ctx, &req{meta: mapCarrier{}}); v != "ok" || err != nil {
		t.Fatalf("%q %v", v, err)
	}
	want := []Flags{{Attempt: 1, Flag: "checkout"}, {Attempt: 2, Flag: "checkout"}, {Attempt: 3, Flag: "checkout"}}
	if len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("server saw %+v, want %+v", seen, want)
	}
	// The server serving attempt 2 or 3 would not retry its own calls.
	if !seen[1].IsRetry() || seen[0].IsRetry() {
		t.Fatal("IsRetry wrong")
	}
}

// TestHandlerEdgeNilOption: a nil ServerOption changes nothing.
func TestHandlerEdgeNilOption(t *testing.T) {
	var got Flags
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = FlagsFrom(r.Context())
	}), nil)
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(HeaderAttempt, "2")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != (Flags{Attempt: 2}) {
		t.Fatalf("flags %+v", got)
	}
}
