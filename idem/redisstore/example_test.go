package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/redis/go-redis/v9"
)

// A request ID deduplicated across every process that shares one Redis (or
// Redis Cluster: pass a ClusterClient). This example needs a server, so it
// is compiled but not run; TestRedisConformance runs the same calls
// against a real redis-server.
func Example() {
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	defer client.Close()
	ctx := context.Background()
	// New refuses a Redis whose maxmemory-policy could evict claims.
	store, err := redisstore.New(ctx, client, redisstore.Options{Prefix: "orders:"})
	if err != nil {
		panic(err)
	}
	result, replayed, err := idem.Do(ctx, store, []byte("req-7f3c"), idem.DefaultTTL,
		func(context.Context) ([]byte, error) { return []byte("order 42"), nil })
	fmt.Println(string(result), replayed, err)

	// Tokens: issued before the call, consumed with DEL.
	_ = store.Issue(ctx, []byte("token-1"), 10*time.Minute)
	first, _ := store.Consume(ctx, []byte("token-1"))
	fmt.Println(first)
}
