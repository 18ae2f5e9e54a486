package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
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

// serverTime returns a func that reports, as server-cpu-µs/op, the CPU
// time (user and system, from INFO cpu) every master c reaches spent
// between the two calls, per op of b: the server's side of a claim — the
// command or script and its socket reads and writes — which does not move
// with the client's scheduling noise the way the round trip does on a
// shared 2-core VM (±50% there).
func serverTime(b *testing.B, c redis.UniversalClient) func() {
	ctx := context.Background()
	cpu := func() float64 {
		var sum float64
		read := func(n *redis.Client) error {
			info, err := n.Info(ctx, "cpu").Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(info, "\n") {
				k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
				if k == "used_cpu_sys" || k == "used_cpu_user" {
					x, err := strconv.ParseFloat(v, 64)
					if err != nil {
						return err
					}
					sum += x
				}
			}
			return nil
		}
		var err error
		if cc, ok := c.(*redis.ClusterClient); ok {
			var mu sync.Mutex
			err = cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
				mu.Lock()
				defer mu.Unlock()
				return read(n)
			})
		} else {
			err = read(c.(*redis.Client))
		}
		if err != nil {
			b.Fatal(err)
		}
		return sum
	}
	before := cpu()
	return func() {
		if b.N > 0 {
			b.ReportMetric((cpu()-before)*1e6/float64(b.N), "server-cpu-µs/op")
		}
	}
}
