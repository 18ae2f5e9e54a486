package idem_test

// Issue 17 items 1–9: the middleware and the memory store tried as an
// attacker or a careless client would. Each test is one item's input with
// the answer SPEC I5 (and the IETF Idempotency-Key draft) asks for.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
)

// serve sends one request through h and returns the recorded answer.
func serve(h http.Handler, method, target, key string, header http.Header, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for name, vs := range header {
		r.Header[name] = vs
	}
	if key != "" {
		idem.SetKey(r, key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// accountScope scopes by the X-Account header (standing in for the
// authenticated account); a request without one has no known party.
func accountScope(r *http.Request) (string, error) {
	if a := r.Header.Get("X-Account"); a != "" {
		return a, nil
	}
	return "", errors.New("no account")
}

func account(a string) http.Header { return http.Header{"X-Account": {a}} }

// TestScopedKeyUnambiguous is item 1: account "1" with key "2abc" and
// account "12" with key "abc" were one store key, so account 12 was
// answered with account 1's response and its own request never ran. Each
// must run its own handler.
func TestScopedKeyUnambiguous(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var runs atomic.Int32
	h := mustMiddleware(t, store, accountScope)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		io.WriteString(w, "for account "+r.Header.Get("X-Account"))
	}))
	w1 := serve(h, "POST", "/pay", "2abc", account("1"), "")
	w2 := serve(h, "POST", "/pay", "abc", account("12"), "")
	if w2.Body.String() != "for account 12" || w2.Header().Get(idem.HeaderReplayed) != "" || runs.Load() != 2 {
		t.Fatalf("account 12 got %q (replayed %q), handler ran %d times; want its own answer, 2 runs",
			w2.Body, w2.Header().Get(idem.HeaderReplayed), runs.Load())
	}
	if w1.Body.String() != "for account 1" {
		t.Fatalf("account 1 got %q", w1.Body)
	}
	// The composite itself: distinct pairs, distinct keys.
	a, _ := idem.ScopedKey(nil, "1", "2abc")
	b, _ := idem.ScopedKey(nil, "12", "abc")
	if bytes.Equal(a, b) {
		t.Fatalf("ScopedKey(1, 2abc) == ScopedKey(12, abc) == %q", a)
	}
	// A key must be printable ASCII: a separator byte (or any control
	// byte) in the header is refused with 400, nothing claimed.
	if w := serve(h, "POST", "/pay", "x\x1fy", account("1"), ""); w.Code != http.StatusBadRequest || runs.Load() != 2 {
		t.Fatalf("key with a control byte = %d", w.Code)
	}
}

// TestScopedKeyLength: the composite counts against MaxKeyLen.
func TestScopedKeyLength(t *testing.T) {
	for _, c := range []struct {
		scope string
		key   int
		ok    bool
	}{
		{"", idem.MaxKeyLen - 1, true},
		{"", idem.MaxKeyLen, false},
		{"acct-42", idem.MaxKeyLen - 8, true},
		{"acct-42", idem.MaxKeyLen - 7, false},
		{strings.Repeat("s", idem.MaxKeyLen), 1, false},
	} {
		key := strings.Repeat("k", c.key)
		got, err := idem.ScopedKey([]byte("dst"), c.scope, key)
		if c.ok != (err == nil) {
			t.Errorf("ScopedKey(%d-byte scope, %d-byte key) = %v, want ok %v", len(c.scope), c.key, err, c.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, idem.ErrKey) || string(got) != "dst" {
				t.Errorf("refused ScopedKey = %q, %v; want dst unchanged, ErrKey", got, err)
			}
			continue
		}
		if want := "dst" + c.scope + "\x1f" + key; string(got) != want || idem.CheckKey(got[3:]) != nil {
			t.Errorf("ScopedKey = %q, want %q", got, want)
		}
	}
	for _, k := range []string{"", "a\x00b", "tab\there", "del\x7f", "é"} {
		if idem.ValidKey(k) {
			t.Errorf("ValidKey(%q) = true", k)
		}
	}
	if !idem.ValidKey("0b3c5e1a-7d4f-4c1e-9a7e-2f1d3c4b5a69") || !idem.ValidKey(idem.NewKey()) || !idem.ValidKey(" ~") {
		t.Error("a UUID, NewKey or printable ASCII refused")
	}
}

// FuzzScopedKey: two different (scope, key) pairs never give one store
// key (SPEC I5: "joined unambiguously").
func FuzzScopedKey(f *testing.F) {
	f.Add("1", "2abc", "12", "abc")
	f.Add("", "a", "a", "")
	f.Add("a\x1f", "b", "a", "\x1fb")
	f.Add("tenant\x1fx", "k", "tenant", "x\x1fk")
	f.Fuzz(func(t *testing.T, s1, k1, s2, k2 string) {
		a, err1 := idem.ScopedKey(nil, s1, k1)
		b, err2 := idem.ScopedKey(nil, s2, k2)
		if err1 != nil || err2 != nil {
			return
		}
		if bytes.Equal(a, b) && (s1 != s2 || k1 != k2) {
			t.Fatalf("(%q, %q) and (%q, %q) share the store key %q", s1, k1, s2, k2, a)
		}
		if idem.CheckKey(a) != nil {
			t.Fatalf("ScopedKey made an invalid store key %q", a)
		}
	})
}

// TestScopeIsolationAndCookies is item 2: alice, then mallory with the same
// key and path. Mallory's request runs as her own; nobody's replay carries
// a Set-Cookie, not even alice's own repeat; a request whose party is
// unknown is refused and stores nothing.
func TestScopeIsolationAndCookies(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var runs atomic.Int32
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		a := r.Header.Get("X-Account")
		http.SetCookie(w, &http.Cookie{Name: "session", Value: a + "-secret"})
		w.Header().Set("Location", "/orders/"+a)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, a+"'s order")
	})
	h := mustMiddleware(t, store, accountScope)(app)
	first := serve(h, "POST", "/orders", "k1", account("alice"), "")
	if first.Header().Get("Set-Cookie") == "" {
		t.Fatal("the first caller did not get its own cookie")
	}
	m := serve(h, "POST", "/orders", "k1", account("mallory"), "")
	if m.Body.String() != "mallory's order" || strings.Contains(m.Header().Get("Set-Cookie"), "alice") || runs.Load() != 2 {
		t.Fatalf("mallory got %q, cookie %q (runs %d); want her own order", m.Body, m.Header().Get("Set-Cookie"), runs.Load())
	}
	again := serve(h, "POST", "/orders", "k1", account("alice"), "")
	if again.Body.String() != "alice's order" || again.Header().Get(idem.HeaderReplayed) != "true" ||
		again.Header().Get("Location") != "/orders/alice" || len(again.Header().Values("Set-Cookie")) != 0 {
		t.Fatalf("alice's repeat = %q %v; want the replay without Set-Cookie", again.Body, again.Header())
	}
	// Stored records hold no cookie at all.
	skey, _ := idem.ScopedKey(nil, "alice", "k1")
	_, rec, _ := store.Lookup(context.Background(), skey, nil)
	resp, err := idem.DecodeResponse(rec)
	if err != nil || resp.Header.Get("Set-Cookie") != "" || bytes.Contains(rec, []byte("secret")) {
		t.Fatalf("stored record %q (%v) keeps the cookie", rec, err)
	}
	// Unknown party: 403, nothing claimed or stored.
	before := store.Len()
	if w := serve(h, "POST", "/orders", "k2", nil, ""); w.Code != http.StatusForbidden || store.Len() != before || runs.Load() != 2 {
		t.Fatalf("request without a party = %d (entries %d → %d)", w.Code, before, store.Len())
	}
	// A single-tenant service says so explicitly; its replays carry no
	// cookie either.
	g := mustMiddleware(t, store, idem.GlobalScope)(app)
	serve(g, "POST", "/orders", "k3", account("alice"), "")
	if w := serve(g, "POST", "/orders", "k3", account("bob"), ""); w.Header().Get(idem.HeaderReplayed) != "true" || len(w.Header().Values("Set-Cookie")) != 0 {
		t.Fatalf("GlobalScope replay = %v", w.Header())
	}
}

// TestQueryIsPayload is item 3: a key reused for POST /transfer?amount=1
// and then ?amount=1000000 replayed "moved 1" with 200; the IETF draft
// wants 422 for a key reused with another payload, under every built-in
// fingerprint.
func TestQueryIsPayload(t *testing.T) {
	for name, fp := range map[string]idem.Fingerprint{
		"default":      idem.FingerprintRequest,
		"request line": idem.FingerprintRequestLine,
		"body":         mustBodyFingerprint(t, 1<<10),
	} {
		t.Run(name, func(t *testing.T) {
			store := newMemory(t, idem.MemoryConfig{Capacity: 64})
			var moved atomic.Int64
			h := mustMiddleware(t, store, idem.GlobalScope, idem.WithFingerprint(fp))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n, _ := strconv.Atoi(r.URL.Query().Get("amount"))
				moved.Add(int64(n))
				io.WriteString(w, "moved "+strconv.Itoa(n))
			}))
			if w := serve(h, "POST", "/transfer?amount=1", "t-1", nil, "memo"); w.Code != 200 || w.Body.String() != "moved 1" {
				t.Fatalf("first = %d %q", w.Code, w.Body)
			}
			if w := serve(h, "POST", "/transfer?amount=1000000", "t-1", nil, "memo"); w.Code != http.StatusUnprocessableEntity {
				t.Fatalf("key reused with another query = %d %q, want 422", w.Code, w.Body)
			}
			if w := serve(h, "POST", "/transfer?amount=1", "t-1", nil, "memo"); w.Code != 200 || w.Header().Get(idem.HeaderReplayed) != "true" {
				t.Fatalf("true repeat = %d %v", w.Code, w.Header())
			}
			if moved.Load() != 1 {
				t.Fatalf("moved %d, want 1", moved.Load())
			}
		})
	}
}

// TestRecordsBounded is item 4: 48 POSTs with 900 KiB paths added 43 MiB
// (the fingerprint kept the path; router 404s were stored for 24 h). Now a
// 404 or 405 from the router stores nothing, a stored record's fingerprint
// is 32 bytes however long the request, and all results together stay
// within MaxBytes, oldest evicted first.
func TestRecordsBounded(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 1024})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id...}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /report", func(http.ResponseWriter, *http.Request) {})
	h := mustMiddleware(t, store, idem.GlobalScope)(mux)
	long := strings.Repeat("p", 900<<10)
	for i := range 48 {
		key := "junk-" + strconv.Itoa(i)
		if w := serve(h, "POST", "/missing/"+long, key, nil, ""); w.Code != http.StatusNotFound {
			t.Fatalf("missing path = %d", w.Code)
		}
		if w := serve(h, "POST", "/report", key+"-405", nil, ""); w.Code != http.StatusMethodNotAllowed {
			t.Fatalf("wrong method = %d", w.Code)
		}
	}
	if st := store.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("router answers stored: %+v", st)
	}
	for i := range 48 {
		if w := serve(h, "POST", "/orders/"+long, "order-"+strconv.Itoa(i), nil, ""); w.Code != http.StatusCreated {
			t.Fatalf("order = %d", w.Code)
		}
	}
	st := store.Stats()
	if st.Entries != 48 || st.Bytes > 48*64 {
		t.Fatalf("48 orders with 900 KiB paths hold %+v; want 48 entries of under 64 bytes each", st)
	}
	_, rec, _ := store.Lookup(context.Background(), mustScoped(t, "", "order-0"), nil)
	if resp, err := idem.DecodeResponse(rec); err != nil || len(resp.Fingerprint) != 32 {
		t.Fatalf("stored fingerprint: %v, %d bytes; want 32", err, len(resp.Fingerprint))
	}

	// The total-bytes bound: 100 results of 64 KiB in a 1 MiB store.
	ctx := context.Background()
	m := newMemory(t, idem.MemoryConfig{Capacity: 1024, Shards: 1, MaxBytes: 1 << 20})
	result := make([]byte, 64<<10)
	for i := range 100 {
		k := []byte("r" + strconv.Itoa(i))
		f, err := m.Claim(ctx, k, time.Minute)
		if err != nil || f == 0 {
			t.Fatalf("claim %d: %v %v", i, f, err)
		}
		if err := m.Complete(ctx, k, f, result, time.Hour); err != nil {
			t.Fatalf("complete %d: %v", i, err)
		}
		if b := m.Stats().Bytes; b > m.MaxBytes() {
			t.Fatalf("after %d results the store holds %d bytes, over MaxBytes %d", i+1, b, m.MaxBytes())
		}
	}
	if st := m.Stats(); st.Evictions != 100-16 || st.Bytes != 16*len(result) {
		t.Fatalf("stats %+v; want 84 evictions, 16 results kept", st)
	}
	for i, want := range map[int]idem.State{0: idem.Absent, 83: idem.Absent, 84: idem.Done, 99: idem.Done} {
		if st, _, _ := m.Lookup(ctx, []byte("r"+strconv.Itoa(i)), nil); st != want {
			t.Errorf("result %d is %v, want %v (oldest evicted first)", i, st, want)
		}
	}
}

func mustScoped(t testing.TB, scope, key string) []byte {
	t.Helper()
	k, err := idem.ScopedKey(nil, scope, key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFullStoreGivesWay is item 5: junk POSTs with fresh keys filled the
// memory store, and then 100 of 100 legitimate keys got 503 for 24 h. Junk
// to a missing path now stores nothing; junk that a real endpoint answered
// (and so is stored) gives way oldest first to new claims, counted as
// evictions; and a scope quota keeps one client from pushing out the
// others. (The issue used the default 65,536 entries; a 4,096-entry store
// shows the same mechanism in a fraction of the time under -race.)
func TestFullStoreGivesWay(t *testing.T) {
	const capacity = 4096
	store := newMemory(t, idem.MemoryConfig{Capacity: capacity})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "order for "+r.Header.Get("X-Account"))
	})
	h := mustMiddleware(t, store, accountScope)(mux)
	junk := account("mallory")
	for i := range capacity + 1000 {
		serve(h, "POST", "/nowhere", "junk-"+strconv.Itoa(i), junk, "")
	}
	if n := store.Len(); n != 0 {
		t.Fatalf("%d junk 404s stored", n)
	}
	// Junk from 64 accounts (under the default quota each, capacity/16)
	// fills the store; new claims evict the oldest junk.
	for i := range capacity + 1000 {
		if w := serve(h, "POST", "/orders", "junk-"+strconv.Itoa(i), account("mallory-"+strconv.Itoa(i%64)), ""); w.Code != http.StatusCreated {
			t.Fatalf("junk order %d = %d", i, w.Code)
		}
	}
	ok := 0
	for i := range 100 {
		w := serve(h, "POST", "/orders", "legit-"+strconv.Itoa(i), account("alice"), "")
		if w.Code == http.StatusCreated && w.Body.String() == "order for alice" {
			ok++
		}
	}
	st := store.Stats()
	if ok != 100 || st.Evictions < 1000+100 || st.FullRefusals != 0 {
		t.Fatalf("%d of 100 legitimate keys served after the flood; stats %+v", ok, st)
	}

	// One account alone stops at the default quota, capacity/16 (429).
	d := newMemory(t, idem.MemoryConfig{Capacity: capacity})
	h = mustMiddleware(t, d, accountScope)(mux)
	codes := map[int]int{}
	for i := range capacity + 1000 {
		codes[serve(h, "POST", "/orders", "junk-"+strconv.Itoa(i), junk, "").Code]++
	}
	if codes[http.StatusCreated] != capacity/16 || codes[http.StatusTooManyRequests] != capacity+1000-capacity/16 {
		t.Fatalf("one account's %d orders answered %v; want %d served, the rest 429", capacity+1000, codes, capacity/16)
	}

	// With a quota, mallory's flood stops at her quota (429) and alice's
	// stored answers stay.
	q := newMemory(t, idem.MemoryConfig{Capacity: 256, ScopeQuota: 100})
	h = mustMiddleware(t, q, accountScope)(mux)
	for i := range 5 {
		serve(h, "POST", "/orders", "alice-"+strconv.Itoa(i), account("alice"), "")
	}
	refused := 0
	for i := range 300 {
		if w := serve(h, "POST", "/orders", "junk-"+strconv.Itoa(i), junk, ""); w.Code == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused != 200 || q.Stats().QuotaRefusals != 200 || q.Stats().Evictions != 0 {
		t.Fatalf("quota 100: %d of 300 refused, stats %+v; want 200 refused, nothing evicted", refused, q.Stats())
	}
	for i := range 5 {
		if w := serve(h, "POST", "/orders", "alice-"+strconv.Itoa(i), account("alice"), ""); w.Header().Get(idem.HeaderReplayed) != "true" {
			t.Fatalf("alice's answer %d lost to the flood", i)
		}
	}
}

// TestClaimExtendedWhileRunning is item 6: a handler of 150 ms with
// TTL.Pending 50 ms, repeated at 80 ms, ran twice. The claim is now
// extended while the handler (or Do's function) runs: the repeat is told
// "in progress", and later gets the stored answer.
func TestClaimExtendedWhileRunning(t *testing.T) {
	ttl := idem.TTL{Pending: 50 * time.Millisecond, Done: time.Minute}
	t.Run("Middleware", func(t *testing.T) {
		store := newMemory(t, idem.MemoryConfig{Capacity: 64})
		var runs atomic.Int32
		h := mustMiddleware(t, store, idem.GlobalScope, idem.WithTTL(ttl))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			time.Sleep(150 * time.Millisecond)
			io.WriteString(w, "charged")
		}))
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- serve(h, "POST", "/charge", "slow", nil, "") }()
		time.Sleep(80 * time.Millisecond)
		if w := serve(h, "POST", "/charge", "slow", nil, ""); w.Code != http.StatusConflict {
			t.Errorf("repeat at 80 ms = %d %q, want 409 (runs %d)", w.Code, w.Body, runs.Load())
		}
		if w := <-done; w.Code != 200 || w.Body.String() != "charged" {
			t.Fatalf("first = %d %q", w.Code, w.Body)
		}
		if w := serve(h, "POST", "/charge", "slow", nil, ""); w.Header().Get(idem.HeaderReplayed) != "true" || runs.Load() != 1 {
			t.Fatalf("repeat after = %d, runs %d", w.Code, runs.Load())
		}
	})
	t.Run("Do", func(t *testing.T) {
		store := newMemory(t, idem.MemoryConfig{Capacity: 64})
		ctx := context.Background()
		var runs atomic.Int32
		charge := func(context.Context) ([]byte, error) {
			runs.Add(1)
			time.Sleep(150 * time.Millisecond)
			return []byte("charged"), nil
		}
		done := make(chan error)
		go func() { _, _, err := idem.Do(ctx, store, []byte("slow"), ttl, charge); done <- err }()
		time.Sleep(80 * time.Millisecond)
		if _, _, err := idem.Do(ctx, store, []byte("slow"), ttl, charge); !errors.Is(err, idem.ErrInProgress) {
			t.Errorf("repeat at 80 ms = %v, want ErrInProgress", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if res, rep, err := idem.Do(ctx, store, []byte("slow"), ttl, charge); err != nil || !rep || string(res) != "charged" || runs.Load() != 1 {
			t.Fatalf("repeat after = %q %v %v, runs %d", res, rep, err, runs.Load())
		}
	})
}

// TestServerErrorsStored is item 8: a handler that commits and then
// answers 500 was run again by each retry (three tries, three charges).
// By default a 500 is stored and replayed; only 429, 503 and a panic
// before the first byte release the claim. ReleaseOnServerError is the
// old behaviour.
func TestServerErrorsStored(t *testing.T) {
	try3 := func(t *testing.T, status int, opts ...idem.Option) (charges int32, last *httptest.ResponseRecorder) {
		store := newMemory(t, idem.MemoryConfig{Capacity: 64})
		var n atomic.Int32
		h := mustMiddleware(t, store, idem.GlobalScope, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1) // the commit
			http.Error(w, "failed after commit", status)
		}))
		for range 3 {
			last = serve(h, "POST", "/charge", "k", nil, "")
		}
		return n.Load(), last
	}
	if n, w := try3(t, http.StatusInternalServerError); n != 1 || w.Code != 500 || w.Header().Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("500 after commit: %d charges, last %d %v; want 1 charge, the 500 replayed", n, w.Code, w.Header())
	}
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		if n, _ := try3(t, status); n != 3 {
			t.Fatalf("%d: %d runs, want 3 (released: not processed)", status, n)
		}
	}
	if n, _ := try3(t, http.StatusInternalServerError, idem.WithRelease(idem.ReleaseOnServerError)); n != 3 {
		t.Fatalf("ReleaseOnServerError: %d runs of a 500, want 3", n)
	}
	for _, c := range []struct {
		status  int
		release bool
	}{{200, false}, {201, false}, {302, false}, {409, false}, {422, false}, {500, false}, {502, false}, {504, false},
		{400, true}, {401, true}, {403, true}, {404, true}, {405, true}, {413, true}, {414, true}, {415, true}, {429, true}, {431, true}, {503, true}} {
		if got := idem.ReleaseNotProcessed(c.status); got != c.release {
			t.Errorf("ReleaseNotProcessed(%d) = %v, want %v", c.status, got, c.release)
		}
	}

	// Panics: before the first byte the claim is released (a retry runs);
	// after it, the effect is unknown, so a 500 is stored.
	for _, c := range []struct {
		name      string
		wrote     bool
		wantRuns  int32
		wantState idem.State
	}{{"before", false, 2, idem.Done}, {"after", true, 1, idem.Done}} {
		t.Run("panic-"+c.name, func(t *testing.T) {
			store := newMemory(t, idem.MemoryConfig{Capacity: 64})
			var n atomic.Int32
			h := mustMiddleware(t, store, idem.GlobalScope)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					if c.wrote {
						w.WriteHeader(http.StatusOK)
					}
					panic(http.ErrAbortHandler)
				}
				io.WriteString(w, "ok")
			}))
			func() {
				defer func() { _ = recover() }()
				serve(h, "POST", "/x", "k", nil, "")
			}()
			w := serve(h, "POST", "/x", "k", nil, "")
			if n.Load() != c.wantRuns {
				t.Fatalf("handler ran %d times, want %d", n.Load(), c.wantRuns)
			}
			if c.wrote && (w.Code != 500 || w.Header().Get(idem.HeaderReplayed) != "true") {
				t.Fatalf("repeat after a panic past the first byte = %d %v, want the stored 500", w.Code, w.Header())
			}
		})
	}
}

// TestFingerprintBodyLimits is item 9: FingerprintBody(math.MaxInt64)
// overflowed max+1, so the handler saw an empty body and nothing was
// fingerprinted. Now any limit up to math.MaxInt64 reads the body, and a
// negative one is refused at construction.
func TestFingerprintBodyLimits(t *testing.T) {
	if _, err := idem.FingerprintBody(-1); !errors.Is(err, idem.ErrInvalidConfig) {
		t.Fatalf("FingerprintBody(-1) = %v, want ErrInvalidConfig", err)
	}
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var seen []string
	h := mustMiddleware(t, store, idem.GlobalScope, idem.WithFingerprint(mustBodyFingerprint(t, math.MaxInt64)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			seen = append(seen, string(b))
		}))
	if w := serve(h, "POST", "/pay", "k", nil, "amount=5"); w.Code != 200 || len(seen) != 1 || seen[0] != "amount=5" {
		t.Fatalf("handler saw %q (status %d), want the body", seen, w.Code)
	}
	if w := serve(h, "POST", "/pay", "k", nil, "amount=500"); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("key reused with another body under MaxInt64 = %d, want 422", w.Code)
	}
	for _, c := range []struct {
		max  int64
		body string
		want int
	}{{0, "", 200}, {0, "x", 413}, {4, "1234", 200}, {4, "12345", 413}} {
		h := mustMiddleware(t, newMemory(t, idem.MemoryConfig{Capacity: 8}), idem.GlobalScope,
			idem.WithFingerprint(mustBodyFingerprint(t, c.max)))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if b, _ := io.ReadAll(r.Body); string(b) != c.body {
				t.Errorf("max %d: handler saw %q, want %q", c.max, b, c.body)
			}
		}))
		if w := serve(h, "POST", "/", "k", nil, c.body); w.Code != c.want {
			t.Errorf("max %d, body %q = %d, want %d", c.max, c.body, w.Code, c.want)
		}
	}
}

// TestExtendErrorsReported: an extension that fails reaches the error
// handler, so an operator sees a claim lost under a live handler (and then
// the answer that could not be stored).
func TestExtendErrorsReported(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	s := lossyStore{newMemory(t, idem.MemoryConfig{Capacity: 8})}
	h := mustMiddleware(t, s, idem.GlobalScope, idem.WithTTL(idem.TTL{Pending: 30 * time.Millisecond}),
		idem.WithErrorHandler(func(_ *http.Request, err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(60 * time.Millisecond) }))
	serve(h, "POST", "/", "k", nil, "")
	mu.Lock()
	defer mu.Unlock()
	var extend, notStored bool
	for _, err := range errs {
		extend = extend || errors.Is(err, idem.ErrLost) && strings.Contains(err.Error(), "extend claim")
		notStored = notStored || errors.Is(err, idem.ErrNotStored)
	}
	if !extend || !notStored {
		t.Fatalf("error handler got %v; want the lost extension and ErrNotStored", errs)
	}
}

// lossyStore loses every claim it is asked to extend.
type lossyStore struct{ *idem.Memory }

func (lossyStore) Extend(context.Context, []byte, idem.Fence, time.Duration) error {
	return idem.ErrLost
}
