package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
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
	b.Run("new", func(b *testing.B) {
		defer serverTime(b, c)()
		storetest.BenchClaims(b, s)
	})
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
	defer serverTime(b, c)()
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
		defer serverTime(b, c)()
		storetest.BenchScopedClaims(b, s)
	})
	b.Run("cluster", func(b *testing.B) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.ClusterAddrs(b), PoolSize: 4 * runtime.GOMAXPROCS(0)})
		defer c.Close()
		s, err := redisstore.New(ctx, c, redisstore.Options{Prefix: "bench:", ScopeQuota: 1 << 30})
		if err != nil {
			b.Fatal(err)
		}
		defer serverTime(b, c)()
		storetest.BenchScopedClaims(b, s)
	})
}

// serverTime resets the command statistics of every master c reaches and
// returns a func that reports, as server-µs/op, the microseconds Redis
// itself spent per script call (EVALSHA and EVAL, from INFO commandstats)
// since then. It is the part of a claim's round trip the scripts decide,
// and it does not move with the client machine's scheduling noise, which
// on a shared 2-core VM spreads the round trip itself by ±50%.
func serverTime(b *testing.B, c redis.UniversalClient) func() {
	ctx := context.Background()
	each := func(fn func(*redis.Client) error) error {
		if cc, ok := c.(*redis.ClusterClient); ok {
			return cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error { return fn(n) })
		}
		return fn(c.(*redis.Client))
	}
	if err := each(func(n *redis.Client) error { return n.ConfigResetStat(ctx).Err() }); err != nil {
		b.Fatal(err)
	}
	return func() {
		var calls, usec float64
		err := each(func(n *redis.Client) error {
			info, err := n.Info(ctx, "commandstats").Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(info, "\n") {
				name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
				if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
					continue
				}
				for _, f := range strings.Split(fields, ",") {
					k, v, _ := strings.Cut(f, "=")
					x, _ := strconv.ParseFloat(v, 64)
					switch k {
					case "calls":
						calls += x
					case "usec":
						usec += x
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if calls > 0 {
			b.ReportMetric(usec/calls, "server-µs/op")
		}
	}
}
