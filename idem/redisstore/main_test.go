package redisstore_test

import (
	"context"
	"testing"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/readretry/readretry/internal/daemon"
	"github.com/readretry/readretry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestMain stops the shared redis-server after the tests and checks that
// nothing leaked goroutines.
func TestMain(m *testing.M) { daemon.Main(m, redistest.Stop) }

// newClient connects to the shared test server (skipping outside CI when
// redis-server is not installed) and flushes it.
func newClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	addr := redistest.Addr(tb)
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, PoolSize: 64})
	tb.Cleanup(func() { c.Close() })
	if err := c.FlushDB(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
	return c
}

// newClusterClient connects to the shared three-master test cluster
// (skipping outside CI when redis-server is not installed) and flushes
// every master.
func newClusterClient(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.ClusterAddrs(tb), PoolSize: 64})
	tb.Cleanup(func() { c.Close() })
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		return m.FlushDB(ctx).Err()
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func newStore(tb testing.TB, o redisstore.Options) (*redisstore.Store, redis.UniversalClient) {
	tb.Helper()
	c := newClient(tb)
	s, err := redisstore.New(context.Background(), c, o)
	if err != nil {
		tb.Fatal(err)
	}
	return s, c
}

// mustScoped is idem.ScopedKey(nil, scope, key) for a valid pair.
func mustScoped(tb testing.TB, scope, key string) []byte {
	tb.Helper()
	k, err := idem.ScopedKey(nil, scope, key)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}
