// Package redisstore is the Redis [idem.Store] (SPEC I1, I3): request
// claims with `SET key value NX PX ttl` (seed 003's "SET UUID EX 3600 NX"),
// completion and release as compare-and-set Lua scripts, and tokens
// consumed with DEL, whose reply says whether this caller deleted the
// token.
//
// It takes a go-redis v9 [redis.UniversalClient], so the same code runs on
// a single server, a failover (Sentinel) client or a Redis Cluster: every
// command and script touches exactly one key, so no hash tags are needed.
// It lives in its own package so that users of idem's memory store do not
// link go-redis.
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
// Claim, Complete, Release, Consume and Issue are one round trip each;
// Lookup is one GET. A repeat in idem.Do or idem.Middleware costs a Claim
// and a Lookup. A script is sent by SHA (EVALSHA) and loaded on first use.
package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
}

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

// New returns a store that keeps its entries in c. Errors wrap ErrInvalidConfig.
func New(c redis.UniversalClient, o Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidConfig)
	}
	if o.MaxResult < 0 {
		return nil, fmt.Errorf("%w: negative MaxResult %d", ErrInvalidConfig, o.MaxResult)
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
var completeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 2, 9) == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1
end
return 0
`)

// releaseScript deletes the claim if it is still the caller's: pending or
// done with the caller's fence (ARGV[1], 8 bytes) after the tag byte.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 2, 9) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

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
