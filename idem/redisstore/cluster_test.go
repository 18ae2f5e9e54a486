package redisstore_test

// The store on a real three-master Redis Cluster (issue 16 section 2),
// started once for the package by internal/redistest.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/redisstore"
	"github.com/redis/go-redis/v9"
)

func newClusterStore(t *testing.T, o redisstore.Options) (*redisstore.Store, *redis.ClusterClient) {
	t.Helper()
	c := newClusterClient(t)
	s, err := redisstore.New(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestClusterConformance runs the store suite on the cluster: the suite's
// keys spread over all three masters, and no script fails with CROSSSLOT.
func TestClusterConformance(t *testing.T) {
	s, c := newClusterStore(t, redisstore.Options{})
	storetest.Run(t, func(*testing.T) idem.Store { return s })
	// The suite's keys did land on every master.
	ctx := context.Background()
	var masters atomic.Int32 // ForEachMaster calls back concurrently
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			masters.Add(1)
		}
		return err
	})
	if err != nil || masters.Load() != 3 {
		t.Fatalf("keys on %d of 3 masters (%v)", masters.Load(), err)
	}
}

// TestClusterTTL is TestRedisTTL on the cluster: real expiry, and a
// crashed holder's stale fence refused.
func TestClusterTTL(t *testing.T) {
	s, c := newClusterStore(t, redisstore.Options{Prefix: "ttl:"})
	testTTL(t, s, c)
}

// TestClusterEvictionPolicy: New reads maxmemory-policy from every node
// and names the one that allows eviction.
func TestClusterEvictionPolicy(t *testing.T) {
	ctx := context.Background()
	c := newClusterClient(t)
	addrs := c.Options().Addrs
	node := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer node.Close()
	if err := node.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	defer node.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	_, err := redisstore.New(ctx, c, redisstore.Options{})
	if !errors.Is(err, redisstore.ErrEvictionPolicy) || !strings.Contains(err.Error(), addrs[1]) {
		t.Fatalf("New with one volatile-lru node = %v, want ErrEvictionPolicy naming %s", err, addrs[1])
	}
}

// TestClusterSlotMigration moves the slot of a held claim to another
// master while the claim is pending (CLUSTER SETSLOT IMPORTING/MIGRATING,
// MIGRATE, SETSLOT NODE). During the move a new claim in that slot is
// answered ASK; after it the client's slot map is stale and gets MOVED.
// go-redis follows both, and no claim or fence is lost: the holders
// complete their claims on the new owner, a repeat still finds them, and a
// stale fence is still refused.
func TestClusterSlotMigration(t *testing.T) {
	ctx := context.Background()
	s, c := newClusterStore(t, redisstore.Options{Prefix: "mig:"})
	// One scope puts both claims in one slot (the client's braces would
	// not: see TestClusterClientKeyNoSlot).
	k1, k2 := mustScoped(t, "order-7", "a"), mustScoped(t, "order-7", "b")
	f1, err := s.Claim(ctx, k1, time.Minute)
	if err != nil || f1 == 0 {
		t.Fatal(f1, err)
	}
	slot, err := c.ClusterKeySlot(ctx, s.RedisKey(k1)).Result()
	if err != nil {
		t.Fatal(err)
	}
	src, dst, all := clusterNodes(t, c, int(slot))
	srcID, dstID := nodeID(t, src), nodeID(t, dst)
	must := func(cl *redis.Client, args ...any) {
		t.Helper()
		if err := cl.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s %v: %v", cl.Options().Addr, args, err)
		}
	}
	must(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	must(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)

	// Mid-migration: k2 is not on the source, which answers ASK; on the
	// target its scope's ledger is missing, so the script (three keys) is
	// answered TRYAGAIN, Redis's transient answer to a multi-key command
	// whose keys are split by a migration (Middleware: 503, retried).
	// Nothing is claimed then; it is claimed after the move.
	f2, err := s.Claim(ctx, k2, time.Minute)
	if err != nil && !strings.Contains(err.Error(), "TRYAGAIN") || err == nil && f2 == 0 {
		t.Fatalf("Claim during the migration = %v, %v; want a claim or TRYAGAIN", f2, err)
	}
	if f, err := s.Claim(ctx, k1, time.Minute); err != nil || f != 0 {
		t.Fatalf("repeat of the held claim during the migration = %v, %v", f, err)
	}

	keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	host, port := splitAddr(t, dst.Options().Addr)
	if len(keys) > 0 {
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src, args...)
	}
	for _, n := range append([]*redis.Client{dst, src}, all...) {
		must(n, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}
	if n, _ := dst.Exists(ctx, s.RedisKey(k1)).Result(); n != 1 {
		t.Fatal("the held claim is not on the new owner")
	}

	if f2 == 0 {
		if f2, err = s.Claim(ctx, k2, time.Minute); err != nil || f2 == 0 {
			t.Fatalf("Claim after the migration = %v, %v", f2, err)
		}
	}
	// The client still thinks src owns the slot: MOVED, followed.
	if err := s.Extend(ctx, k1, f1, time.Minute); err != nil {
		t.Fatalf("Extend after the move: %v", err)
	}
	if err := s.Complete(ctx, k1, f1+1, []byte("stale"), time.Minute); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("stale fence after the move = %v, want ErrLost", err)
	}
	for i, k := range [][]byte{k1, k2} {
		f := []idem.Fence{f1, f2}[i]
		if err := s.Complete(ctx, k, f, []byte(fmt.Sprint("result ", i)), time.Minute); err != nil {
			t.Fatalf("Complete of %s after the move: %v", k, err)
		}
		if st, res, err := s.Lookup(ctx, k, nil); err != nil || st != idem.Done || string(res) != fmt.Sprint("result ", i) {
			t.Fatalf("Lookup of %s after the move = %v %q %v", k, st, res, err)
		}
	}
}

// clusterNodes returns a client to the master owning slot, one to another
// master, and clients to all masters.
func clusterNodes(t *testing.T, c *redis.ClusterClient, slot int) (src, dst *redis.Client, all []*redis.Client) {
	t.Helper()
	ctx := context.Background()
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var srcAddr string
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" {
					srcAddr = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
				}
			}
		}
	}
	for _, addr := range c.Options().Addrs {
		n := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { n.Close() })
		all = append(all, n)
		switch {
		case addr == srcAddr:
			src = n
		case dst == nil:
			dst = n
		}
	}
	if src == nil || dst == nil {
		t.Fatalf("slot %d: no owner among %v (shards %+v)", slot, c.Options().Addrs, shards)
	}
	return src, dst, all
}

func nodeID(t *testing.T, n *redis.Client) string {
	t.Helper()
	id, err := n.Do(context.Background(), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func splitAddr(t *testing.T, addr string) (string, string) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("address %q", addr)
	}
	return addr[:i], addr[i+1:]
}
