package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestRedisConformance runs the store suite on a real redis-server: 1,000
// goroutines claiming one ID get one winner (SET NX), 1,000 consuming one
// token one success (DEL).
func TestRedisConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idem.Store {
		s, _ := newStore(t, redisstore.Options{})
		return s
	})
}

// TestRedisTTL is real expiry in Redis, in seconds (issue 8): a claim with
// ttl 1 s is set with that expiry, is gone after it, and the key can be
// claimed again; its crashed holder can then neither complete nor release
// the new claim.
func TestRedisTTL(t *testing.T) {
	s, c := newStore(t, redisstore.Options{Prefix: "ttl:"})
	testTTL(t, s, c)
}

// testTTL is TestRedisTTL's body on the store s (prefix "ttl:") over c.
func testTTL(t *testing.T, s *redisstore.Store, c redis.UniversalClient) {
	ctx := context.Background()
	k := []byte("req-1")
	crashed, err := s.Claim(ctx, k, time.Second)
	if err != nil || crashed == 0 {
		t.Fatal(crashed, err)
	}
	pttl, err := c.PTTL(ctx, s.RedisKey(k)).Result()
	if err != nil || pttl <= 0 || pttl > time.Second {
		t.Fatalf("PTTL after SET NX EX 1 = %v, %v", pttl, err)
	}
	if _, _, err := idem.Do(ctx, s, k, idem.TTL{Pending: time.Second}, nil); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("repeat during the claim = %v, want ErrInProgress", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, _, err := s.Lookup(ctx, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st == idem.Absent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("claim with ttl 1s still there after 3s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	f, err := s.Claim(ctx, k, time.Minute)
	if err != nil || f == 0 {
		t.Fatalf("Claim after expiry = %v, %v", f, err)
	}
	if err := s.Complete(ctx, k, crashed, []byte("stale"), time.Minute); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("crashed holder's Complete = %v, want ErrLost", err)
	}
	if err := s.Release(ctx, k, crashed); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("crashed holder's Release = %v, want ErrLost", err)
	}
	// Complete sets the done ttl; sub-second ttls use PX.
	if err := s.Complete(ctx, k, f, []byte("ok"), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := c.PTTL(ctx, s.RedisKey(k)).Result(); pttl <= time.Second || pttl > 1500*time.Millisecond {
		t.Fatalf("PTTL after Complete(1.5s) = %v", pttl)
	}
	if err := s.Issue(ctx, []byte("tok"), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if pttl, _ := c.PTTL(ctx, s.RedisTokenKey([]byte("tok"))).Result(); pttl <= 0 || pttl > 300*time.Millisecond {
		t.Fatalf("token PTTL = %v", pttl)
	}
}

// TestRedisScriptsReload: the Lua scripts are sent by SHA and reloaded
// after SCRIPT FLUSH (a failover to a replica without them, say).
func TestRedisScriptsReload(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, redisstore.Options{})
	for range 2 {
		f, _ := s.Claim(ctx, []byte("k"), time.Minute)
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, []byte("k"), f, []byte("r"), time.Minute); err != nil {
			t.Fatalf("Complete after SCRIPT FLUSH: %v", err)
		}
		c.ScriptFlush(ctx)
		if err := s.Release(ctx, []byte("k"), f); err != nil {
			t.Fatalf("Release after SCRIPT FLUSH: %v", err)
		}
	}
}

func TestRedisForeignValue(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t, redisstore.Options{Prefix: "p:"})
	c.Set(ctx, s.RedisKey([]byte("k")), "not ours", time.Minute)
	if _, _, err := s.Lookup(ctx, []byte("k"), nil); err == nil || !strings.Contains(err.Error(), "did not write") {
		t.Fatalf("Lookup of a foreign value = %v", err)
	}
	if f, _ := s.Claim(ctx, []byte("k"), time.Minute); f != 0 {
		t.Fatal("claimed a key holding a foreign value")
	}
}

func TestRedisOptionsAndErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := redisstore.New(ctx, nil, redisstore.Options{}); !errors.Is(err, redisstore.ErrInvalidConfig) {
		t.Fatalf("nil client: %v", err)
	}
	// A client to a port nothing listens on: New cannot check the
	// eviction policy and says why. No server is needed.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer down.Close()
	if _, err := redisstore.New(ctx, down, redisstore.Options{}); err == nil || errors.Is(err, redisstore.ErrEvictionPolicy) ||
		!strings.Contains(err.Error(), "maxmemory-policy of 127.0.0.1:1") {
		t.Fatalf("New with Redis down = %v", err)
	}
	if _, err := redisstore.New(ctx, down, redisstore.Options{MaxResult: -1}); !errors.Is(err, redisstore.ErrInvalidConfig) {
		t.Fatalf("negative MaxResult: %v", err)
	}
	// A store whose client then fails: errors are wrapped, not
	// swallowed, and never mistaken for a repeat.
	s, c := newStore(t, redisstore.Options{MaxResult: 2})
	if err := s.Complete(ctx, []byte("k"), 1, []byte("123"), time.Second); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over MaxResult = %v", err)
	}
	c.Close()
	if f, err := s.Claim(ctx, []byte("k"), time.Second); err == nil || f != 0 || !strings.Contains(err.Error(), "redisstore: claim") {
		t.Fatalf("Claim with the client closed = %v, %v", f, err)
	}
	if ok, err := s.Consume(ctx, []byte("k")); err == nil || ok {
		t.Fatalf("Consume with the client closed = %v, %v", ok, err)
	}
	if err := s.Extend(ctx, []byte("k"), 1, time.Second); err == nil || errors.Is(err, idem.ErrLost) {
		t.Fatalf("Extend with the client closed = %v", err)
	}
}

// TestRedisEvictionPolicy is issue 17 item 7: a Redis whose
// maxmemory-policy lets it evict keys (volatile-lru, allkeys-lru, …) could
// drop a running request's claim under memory pressure, so New refuses it
// with ErrEvictionPolicy — or, with WarnOnEviction, logs MsgEvictionPolicy
// and goes on. noeviction is accepted.
func TestRedisEvictionPolicy(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if _, err := redisstore.New(ctx, c, redisstore.Options{}); err != nil {
		t.Fatalf("New on noeviction: %v", err)
	}
	for _, policy := range []string{"volatile-lru", "allkeys-lru", "allkeys-random", "volatile-ttl"} {
		if err := c.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.ConfigSet(context.Background(), "maxmemory-policy", "noeviction") })
		_, err := redisstore.New(ctx, c, redisstore.Options{})
		if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), policy) {
			t.Fatalf("New on %s = %v, want ErrEvictionPolicy naming it", policy, err)
		}
		var logged bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logged, nil))
		if _, err := redisstore.New(ctx, c, redisstore.Options{WarnOnEviction: true, Logger: log}); err != nil {
			t.Fatalf("New on %s with WarnOnEviction = %v", policy, err)
		}
		if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, redisstore.MsgEvictionPolicy) ||
			!strings.Contains(out, "policy="+policy) {
			t.Fatalf("warning for %s: %q", policy, out)
		}
	}
}
