package idem_test

// Issue 25 (SPEC I5 round 3): tenants cannot harm each other. Each test is
// one input of the issue with the answer SPEC §7 asks for.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
)

// TestDefaultFingerprintCoversBody: same key, same path, another body was
// answered with the first request's 201; SPEC I5 round 3 wants 422 under
// the default fingerprint, and a body over DefaultMaxRequestBody answered
// 413 with nothing claimed or stored.
func TestDefaultFingerprintCoversBody(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var runs atomic.Int32
	h := mustMiddleware(t, store, idem.GlobalScope)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	if w := serve(h, "POST", "/payments", "p-1", nil, `{"amount":1}`); w.Code != http.StatusCreated {
		t.Fatalf("first = %d", w.Code)
	}
	if w := serve(h, "POST", "/payments", "p-1", nil, `{"amount":1000000}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("key reused with another body = %d, want 422", w.Code)
	}
	if w := serve(h, "POST", "/payments", "p-1", nil, `{"amount":1}`); w.Code != http.StatusCreated || w.Header().Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("true repeat = %d %v, want the stored 201", w.Code, w.Header())
	}
	before := store.Len()
	big := strings.Repeat("x", idem.DefaultMaxRequestBody+1)
	if w := serve(h, "POST", "/payments", "p-2", nil, big); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body of DefaultMaxRequestBody+1 bytes = %d, want 413", w.Code)
	}
	if w := serve(h, "POST", "/payments", "p-3", nil, big[:idem.DefaultMaxRequestBody]); w.Code != http.StatusCreated {
		t.Fatalf("body of exactly DefaultMaxRequestBody bytes = %d, want 201", w.Code)
	}
	if got := store.Len(); got != before+1 {
		t.Fatalf("store holds %d entries after the 413 and one more 201, want %d (nothing stored for the 413)", got, before+1)
	}
	if runs.Load() != 2 {
		t.Fatalf("handler ran %d times, want 2", runs.Load())
	}
}

// payments is a handler that counts its runs per account and answers 201
// with size bytes of body for mallory, a short body for anyone else.
func payments(t *testing.T, store idem.Store, size int) (http.Handler, map[string]*atomic.Int32) {
	runs := map[string]*atomic.Int32{"alice": {}, "mallory": {}}
	body := strings.Repeat("m", size)
	h := mustMiddleware(t, store, accountScope)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("X-Account")
		runs[a].Add(1)
		w.WriteHeader(http.StatusCreated)
		if a == "mallory" {
			w.Write([]byte(body))
		} else {
			w.Write([]byte("paid"))
		}
	}))
	return h, runs
}

// TestOneTenantCannotEvictAnother is S12: Memory.Complete evicted the
// shard's oldest done entries whatever their scope, and ScopeQuota counted
// entries only and was off by default, so mallory's answers pushed out
// alice's and alice's retried payments ran twice. Each input of the issue:
// alice pays 10 times, mallory floods, alice retries all 10 — every retry
// must be a replay, and alice's handler must have run 10 times.
func TestOneTenantCannotEvictAnother(t *testing.T) {
	const capacity = 4096 // the default 65,536 shows the same in 16 times the time
	for _, c := range []struct {
		name   string
		config idem.MemoryConfig
		floods int
		size   int
	}{
		{"quota 50, MaxBytes 4 MiB, 60 answers of 100 KB", idem.MemoryConfig{ScopeQuota: 50, MaxBytes: 4 << 20}, 60, 100_000},
		{"quota 1000, 200 answers of 1000 KB", idem.MemoryConfig{ScopeQuota: 1000}, 200, 1_000_000},
		{"default quota, 3 × Capacity cheap answers", idem.MemoryConfig{Capacity: capacity}, 3 * capacity, 0},
		// Quotas off: eviction alone keeps a full store from taking
		// another scope's answers while the flooder has its own.
		{"no quota, 3 × Capacity cheap answers", idem.MemoryConfig{Capacity: capacity, ScopeQuota: -1}, 3 * capacity, 0},
		{"no quota, 60 answers of 100 KB in 4 MiB", idem.MemoryConfig{ScopeQuota: -1, MaxBytes: 4 << 20}, 60, 100_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newMemory(t, c.config)
			h, runs := payments(t, store, c.size)
			for i := range 10 {
				if w := serve(h, "POST", "/pay", "alice-"+strconv.Itoa(i), account("alice"), "{}"); w.Code != http.StatusCreated {
					t.Fatalf("alice's payment %d = %d", i, w.Code)
				}
			}
			for i := range c.floods {
				serve(h, "POST", "/pay", "flood-"+strconv.Itoa(i), account("mallory"), "{}")
			}
			replayed := 0
			for i := range 10 {
				w := serve(h, "POST", "/pay", "alice-"+strconv.Itoa(i), account("alice"), "{}")
				if w.Code == http.StatusCreated && w.Header().Get(idem.HeaderReplayed) == "true" {
					replayed++
				}
			}
			if replayed != 10 || runs["alice"].Load() != 10 {
				t.Fatalf("after mallory's flood %d of alice's 10 retries replayed, her payments ran %d times; want 10 and 10 (stats %+v)",
					replayed, runs["alice"].Load(), store.Stats())
			}
		})
	}
}

// TestTokensCountAgainstQuota is S13: Issue'd tokens were never evicted and
// not counted by the quota, so mallory's 256 tokens (quota 10) filled the
// store and alice's keyed POST got 503. Tokens now count against their
// scope: the 11th is refused with ErrQuota, and alice is served.
func TestTokensCountAgainstQuota(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, idem.MemoryConfig{Capacity: 256, Shards: 1, ScopeQuota: 10})
	refused := 0
	for i := range 256 {
		err := store.Issue(ctx, mustScoped(t, "mallory", "tok-"+strconv.Itoa(i)), time.Hour)
		switch {
		case errors.Is(err, idem.ErrQuota):
			refused++
		case err != nil:
			t.Fatalf("Issue %d = %v", i, err)
		}
	}
	if refused != 256-10 {
		t.Fatalf("%d of mallory's 256 tokens refused, want 246 (quota 10)", refused)
	}
	h, _ := payments(t, store, 0)
	if w := serve(h, "POST", "/pay", "alice-1", account("alice"), "{}"); w.Code != http.StatusCreated {
		t.Fatalf("alice's keyed POST beside mallory's tokens = %d, want 201", w.Code)
	}
	// A consumed token gives its place back.
	if ok, err := store.Consume(ctx, mustScoped(t, "mallory", "tok-0")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := store.Issue(ctx, mustScoped(t, "mallory", "tok-new"), time.Hour); err != nil {
		t.Fatalf("Issue after a Consume = %v", err)
	}
}

// TestScopeByteQuota: a scope's results past ScopeMaxBytes evict that
// scope's oldest answers (in the shard), never another's; a result that
// its own answers cannot make room for is ErrTooLarge with nothing
// changed.
func TestScopeByteQuota(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, idem.MemoryConfig{Capacity: 64, Shards: 1, MaxBytes: 1000, ScopeMaxBytes: 300, MaxResult: 300})
	done := func(scope, key string, n int) error {
		k := mustScoped(t, scope, key)
		f, err := m.Claim(ctx, k, time.Minute)
		if err != nil || f == 0 {
			t.Fatalf("Claim(%s/%s) = %v, %v", scope, key, f, err)
		}
		return m.Complete(ctx, k, f, make([]byte, n), time.Hour)
	}
	state := func(scope, key string) idem.State {
		st, _, _ := m.Lookup(ctx, mustScoped(t, scope, key), nil)
		return st
	}
	for i := range 3 {
		if err := done("a", strconv.Itoa(i), 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := done("b", "0", 100); err != nil {
		t.Fatal(err)
	}
	if err := done("a", "3", 150); err != nil { // a: 300 + 150 > 300: a/0 and a/1 go
		t.Fatal(err)
	}
	for key, want := range map[string]idem.State{"0": idem.Absent, "1": idem.Absent, "2": idem.Done, "3": idem.Done} {
		if got := state("a", key); got != want {
			t.Errorf("a/%s is %v, want %v", key, got, want)
		}
	}
	if state("b", "0") != idem.Done {
		t.Error("b's answer evicted by a's")
	}
	if st := m.Stats(); st.Evictions != 2 || st.Bytes != 350 {
		t.Fatalf("stats %+v, want 2 evictions, 350 bytes", st)
	}
}

// TestScopeConfig: a byte quota below MaxResult could never store a
// result of MaxResult bytes: refused, as is a negative one.
func TestScopeConfig(t *testing.T) {
	for _, c := range []idem.MemoryConfig{
		{MaxResult: 100, ScopeMaxBytes: 10},
		{ScopeMaxBytes: -1},
	} {
		if _, err := idem.NewMemory(c); !errors.Is(err, idem.ErrInvalidConfig) {
			t.Errorf("NewMemory(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := idem.NewMemory(idem.MemoryConfig{ScopeQuota: -1, ScopeMaxBytes: 10, MaxResult: 100}); err != nil {
		t.Errorf("quotas off, ScopeMaxBytes ignored: %v", err)
	}
}
