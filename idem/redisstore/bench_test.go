package redisstore_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/readretry/readretry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkRedisClaim is the Redis store's claim — one round trip (the
// claim script by SHA) on loopback to a real redis-server started for the run — reported
// beside the memory store's (idem.BenchmarkMemoryClaim). It skips without redis-server outside CI.
func BenchmarkRedisClaim(b *testing.B) {
	ctx := context.Background()
	addr := redistest.Addr(b)
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 4 * runtime.GOMAXPROCS(0)})
	defer c.Close()
	if err := c.FlushDB(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) { storetest.BenchClaims(b, s) })
	b.Run("new-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := storetest.NewKeyGen()
			for pb.Next() {
				f, err := s.Claim(ctx, g.Next(), 10*time.Second)
				if err != nil || f == 0 {
					b.Error(f, err)
					return
				}
			}
		})
	})
}

// BenchmarkRedisClusterClaim is BenchmarkRedisClaim on the three-master
// test cluster: still one round trip, to the key's master.
func BenchmarkRedisClusterClaim(b *testing.B) {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.ClusterAddrs(b), PoolSize: 4 * runtime.GOMAXPROCS(0)})
	defer c.Close()
	s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchClaims(b, s)
}

// BenchmarkRedisScopedClaim is BenchmarkRedisClaim's "new" with keys under
// 64 scopes: the claim script then also prunes and updates the scope's
// quota ledger (SPEC I5 round 3), still one round trip; on a single server
// and on the three-master cluster.
func BenchmarkRedisScopedClaim(b *testing.B) {
	ctx := context.Background()
	b.Run("server", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: redistest.Addr(b), PoolSize: 4 * runtime.GOMAXPROCS(0)})
		defer c.Close()
		if err := c.FlushDB(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:", ScopeQuota: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		storetest.BenchScopedClaims(b, s)
	})
	b.Run("cluster", func(b *testing.B) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.ClusterAddrs(b), PoolSize: 4 * runtime.GOMAXPROCS(0)})
		defer c.Close()
		s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:", ScopeQuota: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		storetest.BenchScopedClaims(b, s)
	})
}
