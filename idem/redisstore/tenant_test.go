package redisstore_test

// Issue 25 (SPEC I5 round 3) on real servers: per-scope quotas in the
// claim's script, cluster slots the client's key cannot choose, and a
// claim whose reply was lost given up with its fence.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/redis/go-redis/v9"
)

func accountScope(r *http.Request) (string, error) { return r.Header.Get("X-Account"), nil }

func post(h http.Handler, account, key string) int {
	r := httptest.NewRequest("POST", "/pay", strings.NewReader("{}"))
	r.Header.Set("X-Account", account)
	idem.SetKey(r, key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// TestRedisScopeQuotaDefault is S14: with maxmemory 16 MB and noeviction,
// mallory's requests with 64 KiB answers filled Redis and 0 of 20 of
// alice's POSTs succeeded. With the default per-scope quota (8 MiB of
// results), mallory's answers past her quota are stored without their
// bodies (ErrTooLarge), Redis never fills, and all 20 of alice's POSTs
// are served.
func TestRedisScopeQuotaDefault(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, redisstore.Options{})
	if err := c.ConfigSet(ctx, "maxmemory", "16mb").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.ConfigSet(context.Background(), "maxmemory", "0") })
	answer := strings.Repeat("m", 64<<10)
	base := usedMemory(t, c)
	mw, err := idem.Middleware(s, accountScope)
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		if r.Header.Get("X-Account") == "mallory" {
			w.Write([]byte(answer))
		}
	}))
	codes := map[int]int{}
	for i := range 440 {
		codes[post(h, "mallory", "flood-"+strconv.Itoa(i))]++
	}
	if codes[http.StatusServiceUnavailable] != 0 {
		t.Fatalf("mallory's 440 requests answered %v; want never 503 (Redis full): past her quota her answers are stored without their bodies", codes)
	}
	// Mallory holds at most her 8 MiB of results — 10 MiB of Redis
	// memory, as jemalloc keeps a 64 KiB value in an 80 KiB block — plus
	// 440 small records and their ledger: under the 16 MB, with room for
	// everyone else.
	if used := usedMemory(t, c) - base; used > redisstore.DefaultScopeMaxBytes*5/4+1<<20 {
		t.Fatalf("mallory's flood took %d bytes of Redis; want at most 5/4 of her %d bytes of results and 1 MiB of keys", used, redisstore.DefaultScopeMaxBytes)
	}
	ok := 0
	for i := range 20 {
		if post(h, "alice", "pay-"+strconv.Itoa(i)) == http.StatusCreated {
			ok++
		}
	}
	if ok != 20 {
		t.Fatalf("%d of 20 of alice's POSTs succeeded after mallory's flood; want 20", ok)
	}
}

// TestRedisScopeQuota: the ledger counts claims and tokens of a scope,
// pending or done, and bytes of results; release, consume and expiry give
// them back; other scopes and unscoped keys are not affected.
func TestRedisScopeQuota(t *testing.T) {
	s, _ := newStore(t, redisstore.Options{ScopeQuota: 3, ScopeMaxBytes: 100})
	testScopeQuota(t, s)
}

func testScopeQuota(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := func(scope, key string) []byte { return mustScoped(t, scope, key) }
	f1, err := s.Claim(ctx, k("u", "1"), time.Minute)
	if err != nil || f1 == 0 {
		t.Fatal(f1, err)
	}
	if err := s.Issue(ctx, k("u", "tok"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Claim(ctx, k("u", "short"), 300*time.Millisecond); err != nil || f == 0 {
		t.Fatal(f, err)
	}
	if _, err := s.Claim(ctx, k("u", "4"), time.Minute); !errors.Is(err, idem.ErrQuota) {
		t.Fatalf("fourth entry of a quota-3 scope = %v, want ErrQuota", err)
	}
	if err := s.Issue(ctx, k("u", "tok2"), time.Minute); !errors.Is(err, idem.ErrQuota) {
		t.Fatalf("token over the quota = %v, want ErrQuota", err)
	}
	for _, other := range [][]byte{k("v", "1"), []byte("unscoped"), k("", "global")} {
		if f, err := s.Claim(ctx, other, time.Minute); err != nil || f == 0 {
			t.Fatalf("Claim(%q) beside a full scope = %v, %v", other, f, err)
		}
	}
	if ok, err := s.Consume(ctx, k("u", "tok")); !ok || err != nil {
		t.Fatal(ok, err)
	}
	f4, err := s.Claim(ctx, k("u", "4"), time.Minute)
	if err != nil || f4 == 0 {
		t.Fatalf("Claim after a Consume = %v, %v", f4, err)
	}
	time.Sleep(400 * time.Millisecond) // "short" expires
	f5, err := s.Claim(ctx, k("u", "5"), time.Minute)
	if err != nil || f5 == 0 {
		t.Fatalf("Claim after an expiry = %v, %v", f5, err)
	}
	// Bytes: 100 per scope.
	if err := s.Complete(ctx, k("u", "1"), f1, make([]byte, 60), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, k("u", "4"), f4, make([]byte, 60), time.Minute); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete past the scope's bytes = %v, want ErrTooLarge", err)
	}
	if err := s.Complete(ctx, k("u", "4"), f4, make([]byte, 40), time.Minute); err != nil {
		t.Fatalf("Complete within the scope's bytes = %v", err)
	}
	if err := s.Release(ctx, k("u", "1"), f1); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, k("u", "5"), f5, make([]byte, 60), time.Minute); err != nil {
		t.Fatalf("Complete after a Release gave bytes back = %v", err)
	}
}

// TestClusterClientKeyNoSlot is S15: the store key embedded the client's
// key, so keys "{pin}-N" put 300 of 300 claims on one master. The slot now
// comes from the scope (or a hash of the whole key without one): 300 such
// keys without a scope, and 300 under GlobalScope, spread over all three
// masters.
func TestClusterClientKeyNoSlot(t *testing.T) {
	ctx := context.Background()
	s, c := newClusterStore(t, redisstore.Options{})
	for name, mk := range map[string]func(i int) []byte{
		"unscoped": func(i int) []byte { return []byte("{pin}-" + strconv.Itoa(i)) },
		"global":   func(i int) []byte { return mustScoped(t, "", "{pin}-"+strconv.Itoa(i)) },
	} {
		perMaster := map[string]int{}
		for i := range 300 {
			k := mk(i)
			if f, err := s.Claim(ctx, k, time.Minute); err != nil || f == 0 {
				t.Fatal(f, err)
			}
			slot, err := c.ClusterKeySlot(ctx, s.RedisKey(k)).Result()
			if err != nil {
				t.Fatal(err)
			}
			src, _, _ := clusterNodes(t, c, int(slot))
			perMaster[src.Options().Addr]++
		}
		if len(perMaster) != 3 {
			t.Fatalf("%s: 300 claims with keys {pin}-N on %d masters (%v), want 3", name, len(perMaster), perMaster)
		}
	}
}

// TestRedisLostClaimReply is the go-redis#2556 kind: the caller's context
// ended after Redis had received the claim, so the claim was applied with
// nobody to run it, and every retry got "in progress" for the pending ttl;
// the error was the driver's, not the context's. The server is stalled
// (DEBUG SLEEP) while the claim is in flight; the claim's context ends;
// Claim gives the claim up with its fence. A retry then claims the key at
// once, and the error wraps context.DeadlineExceeded.
func TestRedisLostClaimReply(t *testing.T) {
	ctx := context.Background()
	newClient(t) // flush the shared server
	c := redis.NewClient(&redis.Options{Addr: newClient(t).(*redis.Client).Options().Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(ctx, c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string][]byte{"unscoped": []byte("lost-1"), "scoped": mustScoped(t, "alice", "lost-2")} {
		// Load the scripts first, so that the claim is one EVALSHA.
		if f, err := s.Claim(ctx, []byte("warm"), time.Millisecond); err != nil || f == 0 {
			t.Fatal(f, err)
		}
		sleeper := redis.NewClient(&redis.Options{Addr: c.Options().Addr})
		var slept atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			sleeper.Do(ctx, "DEBUG", "SLEEP", "0.4")
			slept.Store(true)
		}()
		time.Sleep(50 * time.Millisecond) // the server is asleep
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		f, err := s.Claim(cctx, key, time.Minute)
		cancel()
		<-done
		sleeper.Close()
		if !slept.Load() || f != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: Claim across a stalled server = %v, %v; want 0 and an error wrapping context.DeadlineExceeded", name, f, err)
		}
		f, err = s.Claim(ctx, key, time.Minute)
		if err != nil || f == 0 {
			st, _, _ := s.Lookup(ctx, key, nil)
			t.Fatalf("%s: retry after the lost reply = %v, %v (key %v); want a claim", name, f, err, st)
		}
	}
}

// usedMemory returns Redis's used_memory, in bytes.
func usedMemory(t *testing.T, c redis.UniversalClient) int {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in %q", info)
	return 0
}
