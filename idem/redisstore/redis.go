// Package redisstore is the Redis [idem.Store] (SPEC I1, I3): request
// claims with `SET key value NX PX ttl` (seed 003's "SET UUID EX 3600 NX"),
// completion and release as compare-and-set Lua scripts, and tokens
// consumed with DEL, whose reply says whether this caller deleted the
// token.
//
// It takes a go-redis v9 [redis.UniversalClient], so the same code runs on
// a single server, a failover (Sentinel) client or a Redis Cluster. On a
// cluster, a script whose keys hash to different slots fails with
// CROSSSLOT; every script here names one entry and, for a scoped key, its
// scope's ledger, all under one hash tag, so each runs on the one node
// that owns that slot, and MOVED and ASK redirections during a slot
// migration are followed by go-redis (a scoped claim whose entry and
// ledger a migration has split is answered TRYAGAIN, which is transient:
// Middleware answers 503 with Retry-After). It lives in its own package so
// that users of idem's memory store do not link go-redis.
// The server must be Redis 7.0 or later (SET with NX and GET, ZRANGE
// BYSCORE).
//
// # Slots and quotas (SPEC I5 round 3)
//
// The hash tag is the hex xxhash64 of the key's scope (idem.ScopedKey), so
// the scope — the integrator's name for the party — chooses the slot: one
// tenant's entries share a slot by design, and its quota (Options
// .ScopeQuota entries, Options.ScopeMaxBytes bytes of results, counted by a
// ledger updated in the same script as each claim, completion, release and
// consume) bounds what it can put there. A key without a scope, or with the
// empty one (idem.GlobalScope: one party), gets the hash of the whole key
// as its tag and no quota. Either way braces in a client's key choose
// nothing: keys "{pin}-1", "{pin}-2", … spread over the cluster.
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
// A claim of key K is stored at Prefix+"c:{"+tag+"}"+K, a token at
// Prefix+"t:{"+tag+"}"+K (Store.RedisKey, Store.RedisTokenKey); a scope's
// ledger at Prefix+"q:{"+tag+"}" (a sorted set: entry → expiry) and that
// name + "b" (a hash: entry → result bytes, "#" → total, "@" → the
// ledger's own expiry), expiring at most one ttl after the scope's last
// entry. A pending claim's value is 'P' followed by the
// 8-byte fence (big endian); a completed one is 'D', the fence, then the
// result; a claim given up after a lost reply leaves 'R' and its fence for
// the pending ttl, which only that claim treats as taken. Completion and
// release compare the fence inside the script, so a caller whose claim
// expired cannot overwrite or delete its successor's (ErrLost). Expiry is
// Redis's own: nothing to reclaim, and a claim outlives a crashed client
// by exactly its ttl.
//
// # Cost
//
// Claim, Complete, Release, Extend, Consume and Issue are one round trip
// each (a script, sent by SHA); Lookup is one GET. A repeat in idem.Do or idem.Middleware costs a Claim
// and a Lookup. A script is sent by SHA (EVALSHA) and loaded on first use.
package redisstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
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
	// with different prefixes on one Redis are independent. It may not
	// hold a brace (ErrInvalidConfig): a hash tag in it would put every key
	// in one cluster slot.
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
	// ScopeQuota is the most live entries (claims, pending or done, and
	// tokens) one scope (idem.ScopedKey) may hold; 0 means
	// DefaultScopeQuota, a negative value no quota (and no ledger). A
	// Claim or Issue over it fails with idem.ErrQuota (Middleware: 429).
	// Keys without a scope or with the empty one (idem.GlobalScope) are
	// one party's and not counted (SPEC I5 round 3).
	ScopeQuota int
	// ScopeMaxBytes is the most bytes of stored results one scope may
	// hold; 0 means DefaultScopeMaxBytes. A Claim while the scope is at
	// it fails with idem.ErrQuota, a Complete that would pass it with
	// idem.ErrTooLarge (Middleware then stores the answer without its
	// body). Ignored when ScopeQuota is negative.
	ScopeMaxBytes int
	// CleanupTimeout bounds how long a Claim whose reply was lost spends
	// giving the claim up (see Store.Claim); 0 means
	// DefaultCleanupTimeout.
	CleanupTimeout time.Duration
}

// Defaults of Options (SPEC I5 round 3). With them, one scope holds at
// most 10,000 entries and 8 MiB of results: about 8 MiB plus 10,000 ×
// (its key twice, ~100 bytes of Redis overhead per key and ~100 per
// ledger entry) — about 12 MiB with 36-byte keys. Size maxmemory for the
// number of scopes that may be at their quota at once, and raise the
// quota for a scope whose rate × TTL.Done is higher.
const (
	DefaultScopeQuota     = 10_000
	DefaultScopeMaxBytes  = 8 << 20
	DefaultCleanupTimeout = 5 * time.Second
)

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
	prefix    string
	maxResult int
	quota     int // entries per scope; < 0: no quota, no ledger
	maxBytes  int // result bytes per scope
	cleanup   time.Duration

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
	if o.ScopeMaxBytes < 0 || o.CleanupTimeout < 0 {
		return nil, fmt.Errorf("%w: negative ScopeMaxBytes %d or CleanupTimeout %v", ErrInvalidConfig, o.ScopeMaxBytes, o.CleanupTimeout)
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return nil, fmt.Errorf("%w: Prefix %q holds a brace, which would choose the cluster slot of every key", ErrInvalidConfig, o.Prefix)
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
	if o.ScopeQuota == 0 {
		o.ScopeQuota = DefaultScopeQuota
	}
	if o.ScopeMaxBytes == 0 {
		o.ScopeMaxBytes = DefaultScopeMaxBytes
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = DefaultCleanupTimeout
	}
	return &Store{
		c:         c,
		prefix:    o.Prefix,
		maxResult: o.MaxResult,
		quota:     o.ScopeQuota,
		maxBytes:  o.ScopeMaxBytes,
		cleanup:   o.CleanupTimeout,
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
	tagToken   = 'T'
	valueHead  = 1 + 8 // tag and fence
)

func pendingValue(f idem.Fence) []byte {
	v := make([]byte, valueHead)
	v[0] = tagPending
	binary.BigEndian.PutUint64(v[1:], uint64(f))
	return v
}

// ledgerLua is the part every script shares: the scope's ledger. A script
// called with three keys has KEYS[2], a sorted set of the scope's entries
// (member → expiry, Unix ms), and KEYS[3], a hash of their stored bytes
// (member → bytes, for completed entries only; "#" → the total; "@" → the
// Unix ms at which both ledger keys expire); all three keys carry the
// scope's hash tag, so they share a slot. Called with one key (an unscoped
// key), a script keeps no ledger.
//
// The ledger is kept cheap on the claim's path (SPEC I5 round 3 wants a
// claim's cost near round 2's single SET NX PX): a claim adds its member
// and reads the counts (HMGET, ZCARD, ZADD: three calls beside the entry's
// SET NX GET and the clock's TIME).
// Expired members are pruned in batches — when a scope reaches its quota,
// and whenever the ledger's expiry is pushed out — so a scope's ledger may
// hold up to its quota of members whose entries Redis already expired; the
// quota bounds it either way. The ledger keys' expiry is moved (PEXPIREAT)
// only when an entry would outlive it, and then a ttl beyond that entry's
// expiry, so a steady scope moves it about once per ttl, not per claim.
const ledgerLua = `
local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function unbytes(member)
	local s = redis.call('HGET', KEYS[3], member)
	if s then
		redis.call('HDEL', KEYS[3], member)
		if tonumber(s) ~= 0 then
			redis.call('HINCRBY', KEYS[3], '#', -tonumber(s))
		end
	end
end
local function forget(member)
	if redis.call('ZREM', KEYS[2], member) == 1 then
		unbytes(member)
	end
end
local function prune(now)
	local old = redis.call('ZRANGE', KEYS[2], '-inf', now, 'BYSCORE', 'LIMIT', 0, 1024)
	if #old == 0 then return end
	redis.call('ZREM', KEYS[2], unpack(old))
	local sizes = redis.call('HMGET', KEYS[3], unpack(old))
	local sum = 0
	for i = 1, #sizes do
		if sizes[i] then sum = sum + tonumber(sizes[i]) end
	end
	redis.call('HDEL', KEYS[3], unpack(old))
	if sum ~= 0 then
		redis.call('HINCRBY', KEYS[3], '#', -sum)
	end
end
local function keep(now, exp, at)
	if at and tonumber(at) >= exp then return end
	prune(now)
	local till = exp + (exp - now)
	redis.call('HSET', KEYS[3], '@', till)
	redis.call('PEXPIREAT', KEYS[2], till)
	redis.call('PEXPIREAT', KEYS[3], till)
end
local function mine(v, fence)
	return v and string.sub(v, 1, 1) ~= 'R' and string.sub(v, 2, 9) == fence
end
`

// claimScript claims KEYS[1] with the value ARGV[1] ('P' and the fence, or
// 'T' for a token) for ARGV[2] ms, unless a live entry holds it: 1 claimed,
// 0 held, -1 the scope is at its quota of ARGV[3] entries or ARGV[4] bytes
// (ARGV[5] is the entry's ledger member). A tombstone ('R' and a fence,
// left by abandonScript) counts as absent, except for the claim whose
// fence it carries: that claim's reply was lost and it was given up.
//
// The entry is taken first, with SET NX GET (one call where a GET and a
// SET were), and taken back with DEL when the ledger refuses it; a
// tombstone's key is overwritten after the ledger's check.
var claimScript = redis.NewScript(claimSrc)

const claimSrc = ledgerLua + `
local r = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX', 'GET')
if r and (string.sub(r, 1, 1) ~= 'R' or string.sub(r, 2, 9) == string.sub(ARGV[1], 2, 9)) then
	return 0
end
if #KEYS == 3 then
	local now = now_ms()
	local exp = now + tonumber(ARGV[2])
	local h = redis.call('HMGET', KEYS[3], '#', '@')
	if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) or tonumber(h[1] or '0') >= tonumber(ARGV[4]) then
		prune(now)
		forget(ARGV[5])
		if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) or
			tonumber(redis.call('HGET', KEYS[3], '#') or '0') >= tonumber(ARGV[4]) then
			if not r then
				redis.call('DEL', KEYS[1])
			end
			return -1
		end
	end
	if redis.call('ZADD', KEYS[2], exp, ARGV[5]) == 0 then
		-- the member outlived its entry in the ledger (not yet pruned):
		-- its bytes are no longer stored
		unbytes(ARGV[5])
	end
	keep(now, exp, h[2])
end
if r then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
`

// completeScript replaces the caller's claim — pending or already done,
// with the caller's fence (ARGV[1], 8 bytes) after the tag byte — with the
// done value (ARGV[2]) for ARGV[3] milliseconds: 1; 0 if the claim is not
// the caller's; -2 if the result's ARGV[6] bytes would take the scope past
// ARGV[4] bytes (ARGV[5] is the ledger member). (A holder may complete
// twice, as with the other stores.)
var completeScript = redis.NewScript(completeSrc)

const completeSrc = ledgerLua + `
local v = redis.call('GET', KEYS[1])
if not mine(v, ARGV[1]) then
	return 0
end
if #KEYS == 3 then
	local now = now_ms()
	local h = redis.call('HMGET', KEYS[3], '#', '@', ARGV[5])
	local old = tonumber(h[3] or '0')
	local size = tonumber(ARGV[6])
	if tonumber(h[1] or '0') - old + size > tonumber(ARGV[4]) then
		prune(now)
		if tonumber(redis.call('HGET', KEYS[3], '#') or '0') - old + size > tonumber(ARGV[4]) then
			return -2
		end
	end
	local exp = now + tonumber(ARGV[3])
	if size ~= old then
		redis.call('HSET', KEYS[3], ARGV[5], size)
		redis.call('HINCRBY', KEYS[3], '#', size - old)
	end
	redis.call('ZADD', KEYS[2], exp, ARGV[5])
	keep(now, exp, h[2])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`

// releaseScript deletes the claim if it is still the caller's: pending or
// done with the caller's fence (ARGV[1], 8 bytes) after the tag byte, and
// its ledger entry (member ARGV[2]).
var releaseScript = redis.NewScript(releaseSrc)

const releaseSrc = ledgerLua + `
local v = redis.call('GET', KEYS[1])
if mine(v, ARGV[1]) then
	redis.call('DEL', KEYS[1])
	if #KEYS == 3 then forget(ARGV[2]) end
	return 1
end
return 0
`

// abandonScript gives up a claim whose reply was lost (the caller does not
// know whether claimScript ran): if the key holds the caller's claim (fence
// ARGV[1]) it is released as by releaseScript (1); if the key is absent, a
// tombstone 'R'+fence is left for ARGV[3] ms so that the claim, should it
// still arrive, does not take the key (2); a key held by another is left
// alone (0).
var abandonScript = redis.NewScript(abandonSrc)

const abandonSrc = ledgerLua + `
local v = redis.call('GET', KEYS[1])
if v then
	if mine(v, ARGV[1]) then
		redis.call('DEL', KEYS[1])
		if #KEYS == 3 then forget(ARGV[2]) end
		return 1
	end
	return 0
end
redis.call('SET', KEYS[1], 'R' .. ARGV[1], 'PX', ARGV[3])
return 2
`

// extendScript moves the expiry of the caller's pending claim (tag 'P',
// fence ARGV[1]) to ARGV[2] milliseconds from now unless it is already
// later, and its ledger entry (member ARGV[3]) with it; 0 if the key holds
// no pending claim of the caller's.
var extendScript = redis.NewScript(extendSrc)

const extendSrc = ledgerLua + `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'P' and string.sub(v, 2, 9) == ARGV[1] then
	if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
		if #KEYS == 3 then
			local now = now_ms()
			local exp = now + tonumber(ARGV[2])
			redis.call('ZADD', KEYS[2], 'XX', 'GT', exp, ARGV[3])
			keep(now, exp, redis.call('HGET', KEYS[3], '@'))
		end
	end
	return 1
end
return 0
`

// consumeScript deletes the token KEYS[1] and its ledger entry (member
// ARGV[1]); 1 if this call deleted it.
var consumeScript = redis.NewScript(consumeSrc)

const consumeSrc = ledgerLua + `
local n = redis.call('DEL', KEYS[1])
if n == 1 and #KEYS == 3 then forget(ARGV[1]) end
return n
`

// fenceBytes is a fence as stored after a value's tag byte.
func fenceBytes(f idem.Fence) []byte { return binary.BigEndian.AppendUint64(nil, uint64(f)) }

// entry names the Redis keys of one store key: the entry itself and, for a
// scoped key, the scope's ledger; member names the entry in the ledger.
type entry struct {
	keys   []string // the entry, then the ledger's set and hash (scoped keys only)
	member string
}

// entryOf returns the Redis keys of key in namespace ns ('c' claims, 't'
// tokens). The hash tag — the part of a key Redis Cluster hashes to pick a
// slot — is the hex xxhash64 of key's scope (idem.ScopedKey), or of the
// whole key when it has none or an empty one (idem.GlobalScope): a client's
// key never chooses the slot, whatever braces it holds; a scope's entries
// and ledger share one slot.
func (s *Store) entryOf(ns byte, key []byte) entry {
	scope, scoped := scopeOf(key)
	var tag uint64
	if scoped {
		tag = xxhash.Sum64(scope)
	} else {
		tag = xxhash.Sum64(key)
	}
	var h [16]byte
	hex.Encode(h[:], binary.BigEndian.AppendUint64(nil, tag))
	name := s.prefix + string(ns) + ":{" + string(h[:]) + "}" + string(key)
	if !scoped || s.quota < 0 {
		return entry{keys: []string{name}}
	}
	ledger := s.prefix + "q:{" + string(h[:]) + "}"
	return entry{keys: []string{name, ledger, ledger + "b"}, member: string(ns) + string(key)}
}

// scopeOf returns the scope of a key made by idem.ScopedKey, and false for
// a key without a separator or with an empty scope (idem.GlobalScope: one
// party, no quota).
func scopeOf(key []byte) ([]byte, bool) {
	i := bytes.LastIndexByte(key, idem.ScopeSeparator)
	if i <= 0 {
		return nil, false
	}
	return key[:i], true
}

// RedisKey returns the name of the Redis key that holds key's claim, for
// operators and tests: Prefix, "c:", the hash tag, then key (see the
// package comment). It does not touch Redis.
func (s *Store) RedisKey(key []byte) string { return s.entryOf('c', key).keys[0] }

// RedisTokenKey is RedisKey for a token: Prefix, "t:", the hash tag, then
// token.
func (s *Store) RedisTokenKey(token []byte) string { return s.entryOf('t', token).keys[0] }

// Claim implements idem.Store.Claim: SET of 'P'+fence with PX ttl, NX,
// unless a live entry holds the key — for an unscoped key that one command
// (and the claim script after it when the key was taken), for a scoped key
// the claim script, which checks and updates the scope's ledger with it (idem.ErrQuota when the scope is at
// Options.ScopeQuota entries or Options.ScopeMaxBytes bytes). It needs
// Redis 7.0 or later (SET with both NX and GET).
// If the reply is lost — the caller's context ends or the connection fails
// after the command was sent — the claim may have been applied: it is
// given up with its fence (abandonScript) under a context detached from
// the caller's and bounded by Options.CleanupTimeout, and the error wraps
// the caller's context error when there is one.
func (s *Store) Claim(ctx context.Context, key []byte, ttl time.Duration) (idem.Fence, error) {
	if err := idem.CheckKey(key); err != nil {
		return 0, err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return 0, err
	}
	f := s.fences.Next()
	e := s.entryOf('c', key)
	n, err := s.claim(ctx, e, pendingValue(f), ms)
	if err != nil {
		return 0, s.lostReply(ctx, "claim", e, f, ms, err)
	}
	switch n {
	case 1:
		return f, nil
	case -1:
		return 0, idem.ErrQuota
	}
	return 0, nil
}

// claim takes e's entry with the value v for ms milliseconds: 1 taken, 0
// held, -1 the scope is at its quota. An entry without a ledger (an
// unscoped key, or no quota) is taken with one SET NX PX — round 2's
// claim, at its cost — and only when that finds the key taken does the
// claim script run, to tell a live entry (held) from another claim's
// tombstone (a key given up after a lost reply, which counts as absent
// and is taken over). A scoped entry is the claim script's, which checks
// and updates the ledger with it.
func (s *Store) claim(ctx context.Context, e entry, v []byte, ms int64) (int, error) {
	if len(e.keys) == 1 {
		ok, err := s.c.SetNX(ctx, e.keys[0], v, time.Duration(ms)*time.Millisecond).Result()
		switch {
		case err != nil:
			return 0, err
		case ok:
			return 1, nil
		}
	}
	return claimScript.Run(ctx, s.c, e.keys, v, ms, s.quota, s.maxBytes, e.member).Int()
}

// lostReply handles a failed claim: unless Redis itself refused the
// command (then nothing was applied), the claim is given up with its fence
// under a detached, bounded context. The error wraps ctx's error, if ctx
// ended, and err.
func (s *Store) lostReply(ctx context.Context, op string, e entry, f idem.Fence, ms int64, err error) error {
	var reply redis.Error
	if !errors.As(err, &reply) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cleanup)
		if aerr := abandonScript.Run(cctx, s.c, e.keys, fenceBytes(f), e.member, ms).Err(); aerr != nil {
			err = fmt.Errorf("%w; giving the claim up failed too: %w", err, aerr)
		}
		cancel()
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("redisstore: %s: %w: %w", op, cerr, err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

// Complete implements idem.Store.Complete with a compare-and-set script
// that also counts the result's bytes against the scope's quota
// (idem.ErrTooLarge when it would pass Options.ScopeMaxBytes; nothing
// stored, the claim still held).
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
	e := s.entryOf('c', key)
	n, err := completeScript.Run(ctx, s.c, e.keys, fenceBytes(fence), done, ms, s.maxBytes, e.member, len(result)).Int()
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: complete: %w", err)
	case n == 0:
		return idem.ErrLost
	case n == -2:
		return idem.ErrTooLarge
	}
	return nil
}

// Release implements idem.Store.Release with a compare-and-delete script.
func (s *Store) Release(ctx context.Context, key []byte, fence idem.Fence) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	e := s.entryOf('c', key)
	n, err := releaseScript.Run(ctx, s.c, e.keys, fenceBytes(fence), e.member).Int()
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
	e := s.entryOf('c', key)
	n, err := extendScript.Run(ctx, s.c, e.keys, fenceBytes(fence), ms, e.member).Int()
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
	name := s.entryOf('c', key).keys[0]
	v, err := s.c.Get(ctx, name).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return idem.Absent, dst, nil
	case err != nil:
		return idem.Absent, dst, fmt.Errorf("redisstore: lookup: %w", err)
	case len(v) >= valueHead && v[0] == tagPending:
		return idem.Pending, dst, nil
	case len(v) >= valueHead && v[0] == tagDone:
		return idem.Done, append(dst, v[valueHead:]...), nil
	case len(v) == valueHead && v[0] == 'R':
		return idem.Absent, dst, nil // a given-up claim's tombstone
	}
	return idem.Absent, dst, fmt.Errorf("redisstore: lookup: key %q holds a value this store did not write", name)
}

// Issue implements idem.Store.Issue with the claim script (a token counts
// against its scope's quota like a claim: idem.ErrQuota).
func (s *Store) Issue(ctx context.Context, token []byte, ttl time.Duration) error {
	if err := idem.CheckKey(token); err != nil {
		return err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return err
	}
	e := s.entryOf('t', token)
	n, err := s.claim(ctx, e, []byte{tagToken}, ms)
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: issue: %w", err)
	case n == -1:
		return idem.ErrQuota
	case n == 0:
		return idem.ErrExists
	}
	return nil
}

// Consume implements idem.Store.Consume with DEL (in a script that also
// drops the token's ledger entry, for a scoped token): Redis runs commands
// one at a time, so of any number of concurrent consumers exactly one sees
// 1.
func (s *Store) Consume(ctx context.Context, token []byte) (bool, error) {
	if err := idem.CheckKey(token); err != nil {
		return false, err
	}
	e := s.entryOf('t', token)
	var n int
	var err error
	if len(e.keys) == 1 {
		var n64 int64
		n64, err = s.c.Del(ctx, e.keys[0]).Result()
		n = int(n64)
	} else {
		n, err = consumeScript.Run(ctx, s.c, e.keys, e.member).Int()
	}
	if err != nil {
		return false, fmt.Errorf("redisstore: consume: %w", err)
	}
	return n == 1, nil
}

var _ idem.Store = (*Store)(nil)
