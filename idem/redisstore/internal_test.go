package redisstore

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// hashTag returns what Redis Cluster hashes of name: the text between the
// first '{' and the first '}' after it, when that is not empty; else the
// whole name.
func hashTag(name string) string {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '}'); j > 0 {
			return name[i+1 : i+1+j]
		}
	}
	return name
}

// TestScriptKeysShareASlot pins what the package comment promises for
// Redis Cluster: a script names at most three keys — the entry and its
// scope's ledger — and they carry one hash tag, so no script can fail with
// CROSSSLOT; and the tag comes from the scope (or, without one, from a hash
// of the whole key), never from braces in the client's key (S15).
func TestScriptKeysShareASlot(t *testing.T) {
	keyRef := regexp.MustCompile(`KEYS\[(\d+)\]`)
	for name, src := range map[string]string{
		"claim": claimSrc, "complete": completeSrc, "release": releaseSrc,
		"abandon": abandonSrc, "extend": extendSrc, "consume": consumeSrc,
	} {
		for _, r := range keyRef.FindAllStringSubmatch(src, -1) {
			if r[1] != "1" && r[1] != "2" && r[1] != "3" {
				t.Errorf("%s script uses KEYS[%s]", name, r[1])
			}
		}
	}
	s := &Store{prefix: "idem:", quota: 10}
	scoped := func(scope, key string) []byte {
		k, err := idem.ScopedKey(nil, scope, key)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	tags := map[string]bool{}
	for _, k := range [][]byte{scoped("alice", "{pin}-1"), scoped("alice", "x}{y"), scoped("alice", "{}")} {
		for _, ns := range []byte{'c', 't'} {
			e := s.entryOf(ns, k)
			if len(e.keys) != 3 {
				t.Fatalf("scoped key %q has keys %q, want the entry and the ledger's two", k, e.keys)
			}
			for _, name := range e.keys {
				tags[hashTag(name)] = true
			}
		}
	}
	if len(tags) != 1 {
		t.Fatalf("one scope's entries and ledger carry tags %v, want one", tags)
	}
	// Without a scope (or with the empty one), the client's braces choose
	// nothing: "{pin}-1" and "{pin}-2" get different tags.
	for _, pair := range [][2][]byte{
		{[]byte("{pin}-1"), []byte("{pin}-2")},
		{scoped("", "{pin}-1"), scoped("", "{pin}-2")},
	} {
		a, b := s.entryOf('c', pair[0]), s.entryOf('c', pair[1])
		if len(a.keys) != 1 || hashTag(a.keys[0]) == hashTag(b.keys[0]) || hashTag(a.keys[0]) == "pin" {
			t.Fatalf("%q and %q: keys %q and %q; want one key each, different tags, not the client's", pair[0], pair[1], a.keys, b.keys)
		}
	}
}

// TestClaimOverTombstone pins the claim's two paths around a tombstone
// (the 'R' and fence that abandonScript leaves when a claim's reply was
// lost; SPEC I5 round 3): the tombstone of another claim counts as absent,
// so a claim takes the key over; the tombstone of the claim itself (its
// command arriving after it was given up) keeps that claim out. Unscoped
// keys take the SET NX GET path, scoped ones the script, and a scoped
// claim the ledger refuses leaves the key as it found it: absent stays
// absent (the SET NX is taken back), a tombstone stays.
func TestClaimOverTombstone(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, c, Options{ScopeQuota: 1})
	if err != nil {
		t.Fatal(err)
	}
	scoped := func(key string) []byte {
		k, err := idem.ScopedKey(nil, "alice", key)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const mine, other = idem.Fence(0x1111), idem.Fence(0x2222)
	tomb := func(f idem.Fence) string { return "R" + string(fenceBytes(f)) }
	for name, key := range map[string][]byte{"unscoped": []byte("t-1"), "scoped": scoped("t-2")} {
		e := s.entryOf('c', key)
		if err := c.Set(ctx, e.keys[0], tomb(mine), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := s.claim(ctx, e, pendingValue(mine), 60_000); n != 0 || err != nil {
			t.Fatalf("%s: claim over its own tombstone = %d, %v; want 0 (held)", name, n, err)
		}
		if v, _ := c.Get(ctx, e.keys[0]).Result(); v != tomb(mine) {
			t.Fatalf("%s: its own tombstone became %q", name, v)
		}
		if err := c.Set(ctx, e.keys[0], tomb(other), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := s.claim(ctx, e, pendingValue(mine), 60_000); n != 1 || err != nil {
			t.Fatalf("%s: claim over another claim's tombstone = %d, %v; want 1 (taken)", name, n, err)
		}
		if v, _ := c.Get(ctx, e.keys[0]).Result(); v != string(pendingValue(mine)) {
			t.Fatalf("%s: key after the take-over = %q, want the pending claim", name, v)
		}
		if n, err := s.claim(ctx, e, pendingValue(other), 60_000); n != 0 || err != nil {
			t.Fatalf("%s: second claim = %d, %v; want 0 (held)", name, n, err)
		}
	}
	// alice's scope holds t-2 now: at its quota of 1.
	full := s.entryOf('c', scoped("t-3"))
	if n, err := s.claim(ctx, full, pendingValue(mine), 60_000); n != -1 || err != nil {
		t.Fatalf("claim in a full scope = %d, %v; want -1", n, err)
	}
	if x, _ := c.Exists(ctx, full.keys[0]).Result(); x != 0 {
		t.Fatal("a refused claim left its key behind")
	}
	if err := c.Set(ctx, full.keys[0], tomb(other), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.claim(ctx, full, pendingValue(mine), 60_000); n != -1 || err != nil {
		t.Fatalf("claim over a tombstone in a full scope = %d, %v; want -1", n, err)
	}
	if v, _ := c.Get(ctx, full.keys[0]).Result(); v != tomb(other) {
		t.Fatalf("a refused claim changed the tombstone to %q", v)
	}
}

// TestLedgerPruneAndExpiry pins the ledger's upkeep (SPEC I5 round 3):
// results whose entries expired give their bytes back when the scope next
// needs room — the batch prune drops every expired member from the set and
// the byte total at once — and both ledger keys expire no sooner than the
// scope's latest entry, so a quiet scope leaves nothing behind.
func TestLedgerPruneAndExpiry(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { c.Close() })
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, c, Options{ScopeQuota: 1000, ScopeMaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	key := func(k string) []byte {
		b, err := idem.ScopedKey(nil, "bob", k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, k := range []string{"a", "b", "c"} {
		f, err := s.Claim(ctx, key(k), time.Minute)
		if err != nil || f == 0 {
			t.Fatal(f, err)
		}
		if err := s.Complete(ctx, key(k), f, make([]byte, 30), 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	f, err := s.Claim(ctx, key("d"), time.Minute)
	if err != nil || f == 0 {
		t.Fatal(f, err)
	}
	if err := s.Complete(ctx, key("d"), f, make([]byte, 30), time.Minute); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete past 100 bytes (3 × 30 held) = %v, want ErrTooLarge", err)
	}
	time.Sleep(300 * time.Millisecond) // a, b and c expire
	if err := s.Complete(ctx, key("d"), f, make([]byte, 30), time.Minute); err != nil {
		t.Fatalf("Complete after the scope's results expired = %v", err)
	}
	e := s.entryOf('c', key("d"))
	if n, _ := c.ZCard(ctx, e.keys[1]).Result(); n != 1 {
		t.Fatalf("ledger holds %d members after the prune, want 1 (d)", n)
	}
	if total, _ := c.HGet(ctx, e.keys[2], "#").Int(); total != 30 {
		t.Fatalf("ledger's byte total = %d, want 30", total)
	}
	// The ledger's expiry is moved to an entry's expiry plus that
	// entry's ttl (a minute here), so it outlives d but by no more.
	entry, _ := c.PTTL(ctx, e.keys[0]).Result()
	for _, k := range e.keys[1:] {
		if ttl, _ := c.PTTL(ctx, k).Result(); ttl < entry || ttl > entry+time.Minute+time.Second {
			t.Fatalf("ledger key %s expires in %v; want between the scope's entry (%v) and a minute after it", k, ttl, entry)
		}
	}
}
