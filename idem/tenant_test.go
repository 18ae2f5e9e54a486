package idem_test

// Issue 25 (SPEC I5 round 3): tenants cannot harm each other. Each test is
// one input of the issue with the answer SPEC §7 asks for.

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

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
