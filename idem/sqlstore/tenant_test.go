package sqlstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/sqlstore"
)

// scopeQuota is S14 for the SQL store: no per-tenant bound. The scope's
// live rows (claims and tokens) and result bytes are counted in the
// claim's own INSERT; release, consume and expiry give them back; other
// scopes, unscoped keys and GlobalScope's are not affected.
func scopeQuota(t *testing.T, b backend) {
	ctx := context.Background()
	clk := newFakeClock()
	s := storeOn(t, b.open(t), b.d.Name, sqlstore.Config{ScopeQuota: 3, ScopeMaxBytes: 100, Clock: clk.Now})
	k := func(scope, key string) []byte { return mustScoped(t, scope, key) }
	claim := func(key []byte, ttl time.Duration) idem.Fence {
		t.Helper()
		f, err := s.Claim(ctx, key, ttl)
		if err != nil || f == 0 {
			t.Fatalf("Claim(%q) = %v, %v", key, f, err)
		}
		return f
	}
	f1 := claim(k("u", "1"), time.Minute)
	if err := s.Issue(ctx, k("u", "tok"), time.Minute); err != nil {
		t.Fatal(err)
	}
	claim(k("u", "short"), time.Second)
	if _, err := s.Claim(ctx, k("u", "4"), time.Minute); !errors.Is(err, idem.ErrQuota) {
		t.Fatalf("fourth row of a quota-3 scope = %v, want ErrQuota", err)
	}
	if err := s.Issue(ctx, k("u", "tok2"), time.Minute); !errors.Is(err, idem.ErrQuota) {
		t.Fatalf("token over the quota = %v, want ErrQuota", err)
	}
	for _, other := range [][]byte{k("v", "1"), []byte("unscoped"), k("", "global")} {
		claim(other, time.Minute)
	}
	if ok, err := s.Consume(ctx, k("u", "tok")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	f4 := claim(k("u", "4"), time.Minute)
	clk.Advance(2 * time.Second) // "u/short" expires
	f5 := claim(k("u", "5"), time.Minute)
	// Bytes: 120 of 100 stored, so the next claim is refused even with a
	// row free.
	for _, x := range []struct {
		key string
		f   idem.Fence
	}{{"1", f1}, {"4", f4}} {
		if err := s.Complete(ctx, k("u", x.key), x.f, make([]byte, 60), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Release(ctx, k("u", "5"), f5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, k("u", "6"), time.Minute); !errors.Is(err, idem.ErrQuota) {
		t.Fatalf("claim of a scope over its bytes = %v, want ErrQuota", err)
	}
	if err := s.Release(ctx, k("u", "1"), f1); err != nil {
		t.Fatal(err)
	}
	claim(k("u", "6"), time.Minute)
}

func TestSQLiteScopeQuota(t *testing.T)   { scopeQuota(t, sqliteBackend()) }
func TestPostgresScopeQuota(t *testing.T) { scopeQuota(t, postgresBackend(t)) }
func TestMariaDBScopeQuota(t *testing.T)  { scopeQuota(t, mariadbBackend(t)) }

// TestSQLScopeQuotaDefault: the quota holds by default. Mallory's answers
// of 1 MiB (the default MaxResult) stop at DefaultScopeMaxBytes (8 MiB):
// her ninth claim is refused, and alice's claim goes through.
func TestSQLScopeQuotaDefault(t *testing.T) {
	ctx := context.Background()
	b := sqliteBackend()
	s := storeOn(t, b.open(t), b.d.Name, sqlstore.Config{})
	answer := make([]byte, sqlstore.DefaultMaxResult)
	stored := 0
	for i := range 20 {
		key := mustScoped(t, "mallory", "flood-"+strconv.Itoa(i))
		f, err := s.Claim(ctx, key, time.Minute)
		if errors.Is(err, idem.ErrQuota) {
			break
		}
		if err != nil || f == 0 {
			t.Fatal(f, err)
		}
		if err := s.Complete(ctx, key, f, answer, time.Hour); err != nil {
			t.Fatal(err)
		}
		stored++
	}
	if stored != sqlstore.DefaultScopeMaxBytes/sqlstore.DefaultMaxResult {
		t.Fatalf("mallory stored %d answers of 1 MiB, want %d (8 MiB) before ErrQuota", stored, sqlstore.DefaultScopeMaxBytes/sqlstore.DefaultMaxResult)
	}
	if f, err := s.Claim(ctx, mustScoped(t, "alice", "pay-1"), time.Minute); err != nil || f == 0 {
		t.Fatalf("alice's claim beside mallory's full quota = %v, %v", f, err)
	}
}
