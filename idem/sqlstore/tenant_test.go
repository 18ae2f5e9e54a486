package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
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

// scopeCounterChurn: after every step of a random churn of claims,
// completions, releases, tokens, expiry and purges over three scopes, the
// counter table <table>_scopes equals what the dedup rows add up to per
// scope (rows, sum of size), and each call's outcome is the one a model of
// the live rows predicts: ErrQuota when the scope's live rows or bytes are
// at a quota, else the usual claim rules (SPEC I5 round 3).
func scopeCounterChurn(t *testing.T, b backend) {
	ctx := context.Background()
	clk := newFakeClock()
	db := b.open(t)
	const quota, maxBytes = 5, 300
	s := storeOn(t, db, b.d.Name, sqlstore.Config{ScopeQuota: quota, ScopeMaxBytes: maxBytes, Clock: clk.Now})
	type row struct {
		scope   string
		size    int
		expires time.Time
		fence   idem.Fence
		token   bool
	}
	model := map[string]*row{} // live or expired; expired ones count for nothing
	live := func(k string) *row {
		if r := model[k]; r != nil && r.expires.After(clk.Now()) {
			return r
		}
		return nil
	}
	full := func(scope string) bool {
		n, size := 0, 0
		for k := range model {
			if r := live(k); r != nil && r.scope == scope {
				n++
				size += r.size
			}
		}
		return n >= quota || size >= maxBytes
	}
	rng := rand.New(rand.NewPCG(25, 3))
	scopes := []string{"alice", "bob", "mallory"}
	ttls := []time.Duration{time.Second, time.Minute}
	refused, claimed := 0, 0
	for step := range 600 {
		scope := scopes[rng.IntN(len(scopes))]
		name := strconv.Itoa(rng.IntN(8))
		key := mustScoped(t, scope, name)
		tok := mustScoped(t, scope, "tok"+name)
		switch op := rng.IntN(10); op {
		case 0, 1, 2:
			ttl := ttls[rng.IntN(2)]
			f, err := s.Claim(ctx, key, ttl)
			switch {
			case full(scope):
				if !errors.Is(err, idem.ErrQuota) {
					t.Fatalf("step %d: Claim(%q) in a full scope = %v, %v; want ErrQuota", step, key, f, err)
				}
				refused++
			case live(string(key)) != nil:
				if f != 0 || err != nil {
					t.Fatalf("step %d: Claim(%q) of a held key = %v, %v; want 0, nil", step, key, f, err)
				}
			default:
				if f == 0 || err != nil {
					t.Fatalf("step %d: Claim(%q) = %v, %v; want a fence", step, key, f, err)
				}
				model[string(key)] = &row{scope: scope, expires: clk.Now().Add(ttl), fence: f}
				claimed++
			}
		case 3, 4:
			r := model[string(key)]
			if r == nil {
				continue
			}
			size, ttl := rng.IntN(121), ttls[rng.IntN(2)]
			err := s.Complete(ctx, key, r.fence, make([]byte, size), ttl)
			if live(string(key)) != nil {
				if err != nil {
					t.Fatalf("step %d: Complete(%q) = %v", step, key, err)
				}
				r.size, r.expires = size, clk.Now().Add(ttl)
			} else if !errors.Is(err, idem.ErrLost) {
				t.Fatalf("step %d: Complete(%q) of an expired claim = %v, want ErrLost", step, key, err)
			}
		case 5:
			r := model[string(key)]
			if r == nil {
				continue
			}
			err := s.Release(ctx, key, r.fence)
			if live(string(key)) != nil {
				if err != nil {
					t.Fatalf("step %d: Release(%q) = %v", step, key, err)
				}
				delete(model, string(key))
			} else if !errors.Is(err, idem.ErrLost) {
				t.Fatalf("step %d: Release(%q) of an expired claim = %v, want ErrLost", step, key, err)
			}
		case 6:
			ttl := ttls[rng.IntN(2)]
			err := s.Issue(ctx, tok, ttl)
			switch {
			case full(scope):
				if !errors.Is(err, idem.ErrQuota) {
					t.Fatalf("step %d: Issue(%q) in a full scope = %v, want ErrQuota", step, tok, err)
				}
			case live(string(tok)) != nil:
				if !errors.Is(err, idem.ErrExists) {
					t.Fatalf("step %d: Issue(%q) of a live token = %v, want ErrExists", step, tok, err)
				}
			case err != nil:
				t.Fatalf("step %d: Issue(%q) = %v", step, tok, err)
			default:
				model[string(tok)] = &row{scope: scope, expires: clk.Now().Add(ttl), token: true}
			}
		case 7:
			ok, err := s.Consume(ctx, tok)
			if want := live(string(tok)) != nil; ok != want || err != nil {
				t.Fatalf("step %d: Consume(%q) = %v, %v; want %v", step, tok, ok, err, want)
			}
			if ok {
				delete(model, string(tok))
			}
		case 8:
			clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		case 9:
			if rng.IntN(4) == 0 {
				if _, err := s.Purge(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if got, want := scopeCounters(t, db, "idem_dedup_scopes WHERE entries <> 0 OR bytes <> 0", "entries, bytes"),
			scopeCounters(t, db, "idem_dedup WHERE scope IS NOT NULL GROUP BY scope", "COUNT(*), COALESCE(SUM(size), 0)"); !maps.Equal(got, want) {
			t.Fatalf("step %d: counters %v, rows add up to %v", step, got, want)
		}
	}
	if refused < 10 || claimed < 50 {
		t.Fatalf("the churn refused %d claims and granted %d: too few to test the quota", refused, claimed)
	}
}

// scopeCounters returns scope → "entries/bytes" selected as cols from
// the table expression from.
func scopeCounters(t *testing.T, db *sql.DB, from, cols string) map[string]string {
	t.Helper()
	rows, err := db.Query("SELECT scope, " + cols + " FROM " + from)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var scope []byte
		var n, size int64
		if err := rows.Scan(&scope, &n, &size); err != nil {
			t.Fatal(err)
		}
		m[string(scope)] = fmt.Sprint(n, "/", size)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSQLiteScopeCounterChurn(t *testing.T)   { scopeCounterChurn(t, sqliteBackend()) }
func TestPostgresScopeCounterChurn(t *testing.T) { scopeCounterChurn(t, postgresBackend(t)) }
func TestMariaDBScopeCounterChurn(t *testing.T)  { scopeCounterChurn(t, mariadbBackend(t)) }

// scopeQuotaConcurrent: 64 claims of one scope at once, quota 10: exactly
// 10 win, whatever their interleaving — the counter row serialises a
// scope's claims (SPEC I5 round 3) — and the counter says 10.
func scopeQuotaConcurrent(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	const quota, n = 10, 64
	s := storeOn(t, db, b.d.Name, sqlstore.Config{ScopeQuota: quota})
	if f, err := s.Claim(ctx, mustScoped(t, "t", "warm"), time.Minute); err != nil || f == 0 {
		t.Fatal(f, err) // the scope's counter row exists: the race is on it
	}
	var won, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f, err := s.Claim(ctx, mustScopedNoT("t", strconv.Itoa(i)), time.Minute)
			switch {
			case err == nil && f != 0:
				won.Add(1)
			case errors.Is(err, idem.ErrQuota):
				refused.Add(1)
			default:
				t.Errorf("Claim %d = %v, %v", i, f, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if won.Load() != quota-1 || refused.Load() != n-quota+1 {
		t.Fatalf("%d claims won and %d refused in a scope with 1 row and quota %d; want %d and %d",
			won.Load(), refused.Load(), quota, quota-1, n-quota+1)
	}
	if got := scopeCounters(t, db, "idem_dedup_scopes", "entries, bytes"); got["t"] != "10/0" {
		t.Fatalf("counters %v, want t: 10/0", got)
	}
}

// mustScopedNoT is mustScoped for goroutines (no t.Fatal off the test's
// goroutine); the keys it is given are always valid.
func mustScopedNoT(scope, key string) []byte {
	k, err := idem.ScopedKey(nil, scope, key)
	if err != nil {
		panic(err)
	}
	return k
}

func TestSQLiteScopeQuotaConcurrent(t *testing.T)   { scopeQuotaConcurrent(t, sqliteBackend()) }
func TestPostgresScopeQuotaConcurrent(t *testing.T) { scopeQuotaConcurrent(t, postgresBackend(t)) }
func TestMariaDBScopeQuotaConcurrent(t *testing.T)  { scopeQuotaConcurrent(t, mariadbBackend(t)) }
