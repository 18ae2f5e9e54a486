// Package redisstore is the Redis [idem.Store] (SPEC I1, I3): request
// claims with `SET key value NX PX ttl` (seed 003's "SET UUID EX 3600 NX"),
// completion and release as compare-and-set Lua scripts, and tokens
// consumed with DEL, whose reply says whether this caller deleted the
// token.
//
// It takes a go-redis v9 [redis.UniversalClient], so the same code runs on
// a single server, a failover (Sentinel) client or a Redis Cluster. On a
// cluster, a script whose keys hash to different slots fails with
// CROSSSLOT; every command and script here names exactly one key (KEYS[1]),
// so each runs on the one node that owns that key's slot, and MOVED and
// ASK redirections during a slot migration are followed by go-redis. A
// script that ever needed two keys (a claim and its token, say) would have
// to give both one hash tag, Prefix+"{"+key+"}…", so that they share a
// slot; TestRedisScriptsOneKey checks that none does. It lives in its own
// package so that users of idem's memory store do not link go-redis.
//
// # Eviction and failover
//
// A claim is only as safe as Redis's promise to keep it. With a
// maxmemory-policy other than noeviction, Redis under memory pressure
// deletes keys — a running request's claim among them — and the repeat
// runs the call again. [New] therefore reads maxmemory-policy from every
// node and refuses anything but noeviction (ErrEvictionPolicy), unless
// Options.WarnOnEviction asks for a logged warning instead. With
// noeviction a full Redis refuses writes: claims fail with an OOM error
// (idem.Middleware answers 503) rather than vanish.
//
// Replication is asynchronous: a claim or result acknowledged by a master
// may not have reached its replica when the master fails. After a
// failover (Sentinel or Cluster promoting the replica) the keys written in
// that window — typically the last few milliseconds, at most the
// replication lag — are gone, and a repeat of such a request runs again.
// That window is Redis's, not this package's; a write that must never be
// doubled belongs in the database transaction (sqlstore.InTx).
//
// # Keys and values
//
// A claim of key K is stored at Prefix+"c:"+K, a token at Prefix+"t:"+K.
// A pending claim's value is 'P' followed by the 8-byte fence (big endian);
// a completed one is 'D', the fence, then the result. Completion and
// release compare the fence inside the script, so a caller whose claim
// expired cannot overwrite or delete its successor's (ErrLost). Expiry is
// Redis's own: nothing to reclaim, and a claim outlives a crashed client
// by exactly its ttl.
//
// # Cost
//
// Claim, Complete, Release, Extend, Consume and Issue are one round trip
// each; Lookup is one GET. A repeat in idem.Do or idem.Middleware costs a Claim
// and a Lookup. A script is sent by SHA (EVALSHA) and loaded on first use.
package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/fence"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix of a store built with an empty
// Options.Prefix.
const DefaultPrefix = "idem:"

// DefaultMaxResult is the longest result Complete stores, in bytes, when
// Options.MaxResult is 0 (Redis itself accepts values up to 512 MiB).
const DefaultMaxResult = idem.DefaultMaxResult

// Options configures a [Store]. The zero value is usable.
type Options struct {
	// Prefix namespaces the store's keys; "" means DefaultPrefix. Stores
	// with different prefixes on one Redis are independent.
	Prefix string
	// MaxResult is the longest result Complete accepts, in bytes; 0 means
	// DefaultMaxResult.
	MaxResult int
	// WarnOnEviction makes New log MsgEvictionPolicy at warning level and
	// go on when a node's maxmemory-policy is not noeviction, or cannot be
	// read (managed services that disable CONFIG), instead of failing with
	// ErrEvictionPolicy. Claims may then be evicted under memory pressure
	// (see the package comment).
	WarnOnEviction bool
	// Logger receives that warning; nil means slog.Default().
	Logger *slog.Logger
}

// MsgEvictionPolicy is the message New logs under Options.WarnOnEviction
// for a node whose maxmemory-policy allows eviction (attributes "addr",
// "policy", and "error" when the policy could not be read).
const MsgEvictionPolicy = "redis maxmemory-policy allows evicting idempotency claims"

// ErrEvictionPolicy is wrapped by New when a node's maxmemory-policy is not
// noeviction, or cannot be read, and Options.WarnOnEviction is false.
var ErrEvictionPolicy = errors.New("redisstore: maxmemory-policy must be noeviction")

// Store is an idem.Store on Redis. It is safe for concurrent use; its cost
// is the client's (one pooled connection per command in flight).
type Store struct {
	c         redis.UniversalClient
	claim     string // prefix + "c:"
	token     string // prefix + "t:"
	maxResult int

	fences *fence.Source
}

// ErrInvalidConfig is wrapped by New for invalid Options.
var ErrInvalidConfig = errors.New("redisstore: invalid config")

// New returns a store that keeps its entries in c, after checking that
// every node c reaches (every master and replica of a cluster) has
// maxmemory-policy noeviction: one CONFIG GET per node. Errors wrap
// ErrInvalidConfig for bad Options, ErrEvictionPolicy for a node that
// allows eviction or whose policy cannot be read (see
// Options.WarnOnEviction); the client's error if a node cannot be reached.
func New(ctx context.Context, c redis.UniversalClient, o Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	if o.MaxResult < 0 {
		return nil, fmt.Errorf("%w: negative MaxResult %d", ErrInvalidConfig, o.MaxResult)
	}
	if err := checkEviction(ctx, c, o); err != nil {
		return nil, err
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxResult == 0 {
		o.MaxResult = DefaultMaxResult
	}
	return &Store{
		c:         c,
		claim:     o.Prefix + "c:",
		token:     o.Prefix + "t:",
		maxResult: o.MaxResult,
		fences:    fence.New(),
	}, nil
}

// checkEviction reads maxmemory-policy from every node of c.
func checkEviction(ctx context.Context, c redis.UniversalClient, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	var mu sync.Mutex
	var refused []string
	check := func(ctx context.Context, addr string, node redis.Cmdable) error {
		policy, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
		var reply redis.Error
		if err != nil && !errors.As(err, &reply) {
			// Not the server's answer (which would mean CONFIG is
			// disabled): the node cannot be reached.
			return fmt.Errorf("redisstore: read maxmemory-policy of %s: %w", addr, err)
		}
		p := policy["maxmemory-policy"]
		if err == nil && p == "noeviction" {
			return nil
		}
		why := fmt.Sprintf("%s has %q", addr, p)
		if err != nil {
			why = fmt.Sprintf("%s: cannot read it (%v)", addr, err)
		}
		if o.WarnOnEviction {
			log.Warn(MsgEvictionPolicy, "addr", addr, "policy", p, "error", fmt.Sprint(err))
			return nil
		}
		mu.Lock()
		refused = append(refused, why)
		mu.Unlock()
		return nil
	}
	perNode := func(ctx context.Context, n *redis.Client) error { return check(ctx, n.Options().Addr, n) }
	var err error
	switch cc := c.(type) {
	case *redis.ClusterClient:
		err = cc.ForEachShard(ctx, perNode)
	case *redis.Ring:
		err = cc.ForEachShard(ctx, perNode)
	case *redis.Client: // a single server, or a Sentinel failover client
		err = perNode(ctx, cc)
	default:
		err = check(ctx, "redis", c)
	}
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: %s (set CONFIG SET maxmemory-policy noeviction, or Options.WarnOnEviction)", ErrEvictionPolicy, strings.Join(refused, "; "))
	}
	return nil
}

const (
	tagPending = 'P'
	tagDone    = 'D'
	valueHead  = 1 + 8 // tag and fence
)

func pendingValue(f idem.Fence) []byte {
	v := make([]byte, valueHead)
	v[0] = tagPending
	binary.BigEndian.PutUint64(v[1:], uint64(f))
	return v
}

// completeScript replaces the caller's claim — pending or already done,
// with the caller's fence (ARGV[1], 8 bytes) after the tag byte — with the
// done value (ARGV[2]) for ARGV[3] milliseconds; 0 if the claim is not the
// caller's. (A holder may complete twice, as with the other stores.)
var completeScript = redis.NewScript(completeSrc)

const completeSrc = `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 2, 9) == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1
end
return 0
`

// releaseScript deletes the claim if it is still the caller's: pending or
// done with the caller's fence (ARGV[1], 8 bytes) after the tag byte.
var releaseScript = redis.NewScript(releaseSrc)

const releaseSrc = `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 2, 9) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`

// extendScript moves the expiry of the caller's pending claim (tag 'P',
// fence ARGV[1]) to ARGV[2] milliseconds from now unless it is already
// later; 0 if the key holds no pending claim of the caller's.
var extendScript = redis.NewScript(extendSrc)

const extendSrc = `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'P' and string.sub(v, 2, 9) == ARGV[1] then
	if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
	end
	return 1
end
return 0
`

// fenceBytes is a fence as stored after a value's tag byte.
func fenceBytes(f idem.Fence) []byte { return binary.BigEndian.AppendUint64(nil, uint64(f)) }

// Claim implements idem.Store.Claim with SET key 'P'+fence NX PX ttl.
func (s *Store) Claim(ctx context.Context, key []byte, ttl time.Duration) (idem.Fence, error) {
	if err := idem.CheckKey(key); err != nil {
		return 0, err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return 0, err
	}
	f := s.fences.Next()
	ok, err := s.c.SetNX(ctx, s.claim+string(key), pendingValue(f), time.Duration(ms)*time.Millisecond).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstore: claim: %w", err)
	}
	if !ok {
		return 0, nil
	}
	return f, nil
}

// Complete implements idem.Store.Complete with a compare-and-set script.
func (s *Store) Complete(ctx context.Context, key []byte, fence idem.Fence, result []byte, ttl time.Duration) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return err
	}
	if len(result) > s.maxResult {
		return idem.ErrTooLarge
	}
	done := make([]byte, valueHead, valueHead+len(result))
	done[0] = tagDone
	binary.BigEndian.PutUint64(done[1:], uint64(fence))
	done = append(done, result...)
	n, err := completeScript.Run(ctx, s.c, []string{s.claim + string(key)}, fenceBytes(fence), done, ms).Int()
	if err != nil {
		return fmt.Errorf("redisstore: complete: %w", err)
	}
	if n == 0 {
		return idem.ErrLost
	}
	return nil
}

// Release implements idem.Store.Release with a compare-and-delete script.
func (s *Store) Release(ctx context.Context, key []byte, fence idem.Fence) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	n, err := releaseScript.Run(ctx, s.c, []string{s.claim + string(key)}, fenceBytes(fence)).Int()
	if err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	if n == 0 {
		return idem.ErrLost
	}
	return nil
}

// Extend implements idem.Store.Extend with a compare-and-expire script.
func (s *Store) Extend(ctx context.Context, key []byte, fence idem.Fence, ttl time.Duration) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return err
	}
	n, err := extendScript.Run(ctx, s.c, []string{s.claim + string(key)}, fenceBytes(fence), ms).Int()
	if err != nil {
		return fmt.Errorf("redisstore: extend: %w", err)
	}
	if n == 0 {
		return idem.ErrLost
	}
	return nil
}

// Lookup implements idem.Store.Lookup with one GET.
func (s *Store) Lookup(ctx context.Context, key []byte, dst []byte) (idem.State, []byte, error) {
	if err := idem.CheckKey(key); err != nil {
		return idem.Absent, dst, err
	}
	v, err := s.c.Get(ctx, s.claim+string(key)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return idem.Absent, dst, nil
	case err != nil:
		return idem.Absent, dst, fmt.Errorf("redisstore: lookup: %w", err)
	case len(v) >= valueHead && v[0] == tagPending:
		return idem.Pending, dst, nil
	case len(v) >= valueHead && v[0] == tagDone:
		return idem.Done, append(dst, v[valueHead:]...), nil
	}
	return idem.Absent, dst, fmt.Errorf("redisstore: lookup: key %q holds a value this store did not write", s.claim+string(key))
}

// Issue implements idem.Store.Issue with SET NX PX.
func (s *Store) Issue(ctx context.Context, token []byte, ttl time.Duration) error {
	if err := idem.CheckKey(token); err != nil {
		return err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return err
	}
	ok, err := s.c.SetNX(ctx, s.token+string(token), "1", time.Duration(ms)*time.Millisecond).Result()
	if err != nil {
		return fmt.Errorf("redisstore: issue: %w", err)
	}
	if !ok {
		return idem.ErrExists
	}
	return nil
}

// Consume implements idem.Store.Consume with DEL: Redis runs commands one
// at a time, so of any number of concurrent consumers exactly one sees 1.
func (s *Store) Consume(ctx context.Context, token []byte) (bool, error) {
	if err := idem.CheckKey(token); err != nil {
		return false, err
	}
	n, err := s.c.Del(ctx, s.token+string(token)).Result()
	if err != nil {
		return false, fmt.Errorf("redisstore: consume: %w", err)
	}
	return n == 1, nil
}

var _ idem.Store = (*Store)(nil)
