package idem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
)

func newMemory(t testing.TB, c idem.MemoryConfig) *idem.Memory {
	t.Helper()
	m, err := idem.NewMemory(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idem.Store {
		return newMemory(t, idem.MemoryConfig{Capacity: 4 * storetest.Goroutines})
	})
}

// TestMemoryTTL checks expiry on a fake clock (SPEC I1): an entry is live
// until exactly its ttl has passed, then absent at once — whether or not
// the wheel has reclaimed it — and its memory is reclaimed by the next
// call a tick later.
func TestMemoryTTL(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	m := newMemory(t, idem.MemoryConfig{Capacity: 64, Shards: 1, Tick: 10 * time.Millisecond, Clock: clk.Now})
	k := []byte("order-1")
	f, err := m.Claim(ctx, k, 10*time.Second)
	if err != nil || f == 0 {
		t.Fatal(f, err)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if f2, _ := m.Claim(ctx, k, time.Second); f2 != 0 {
		t.Fatal("claim expired 1ns early")
	}
	if st, _, _ := m.Lookup(ctx, k, nil); st != idem.Pending {
		t.Fatalf("state 1ns before expiry = %v", st)
	}
	clk.Advance(time.Nanosecond)
	if st, _, _ := m.Lookup(ctx, k, nil); st != idem.Absent {
		t.Fatalf("state at expiry = %v, want absent", st)
	}
	f2, err := m.Claim(ctx, k, 10*time.Second)
	if err != nil || f2 == 0 || f2 == f {
		t.Fatalf("Claim after expiry = %v, %v", f2, err)
	}
	// Complete moves the expiry to the done ttl.
	if err := m.Complete(ctx, k, f2, []byte("r"), time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(59 * time.Minute)
	if st, res, _ := m.Lookup(ctx, k, nil); st != idem.Done || string(res) != "r" {
		t.Fatalf("done entry before its ttl = %v %q", st, res)
	}
	clk.Advance(time.Minute)
	if st, _, _ := m.Lookup(ctx, k, nil); st != idem.Absent {
		t.Fatalf("done entry after its ttl = %v", st)
	}
	// Tokens expire too.
	if err := m.Issue(ctx, []byte("tok"), time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if ok, _ := m.Consume(ctx, []byte("tok")); ok {
		t.Fatal("an expired token was consumed")
	}
	if err := m.Issue(ctx, []byte("tok"), time.Second); err != nil {
		t.Fatalf("Issue after expiry: %v", err)
	}
	// The wheel reclaims expired entries lazily, a tick after expiry, on
	// any call.
	for i := range 10 {
		if _, err := m.Claim(ctx, []byte("bulk-"+strconv.Itoa(i)), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Len(); n != 11 {
		t.Fatalf("Len = %d, want 11", n)
	}
	clk.Advance(time.Second + 10*time.Millisecond)
	m.Lookup(ctx, []byte("anything"), nil)
	if n := m.Len(); n != 0 {
		t.Fatalf("Len after expiry and one call = %d, want 0", n)
	}
}

// TestMemoryFull checks the bound: ErrFull once Capacity entries are live,
// changing nothing, and room again as soon as entries expire.
func TestMemoryFull(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	m := newMemory(t, idem.MemoryConfig{Capacity: 64, Shards: 1, Clock: clk.Now})
	if m.Cap() != 64 {
		t.Fatalf("Cap = %d", m.Cap())
	}
	for i := range 64 {
		if f, err := m.Claim(ctx, []byte("k"+strconv.Itoa(i)), time.Minute); err != nil || f == 0 {
			t.Fatalf("claim %d: %v %v", i, f, err)
		}
	}
	if _, err := m.Claim(ctx, []byte("one-more"), time.Minute); !errors.Is(err, idem.ErrFull) {
		t.Fatalf("Claim in a full store = %v, want ErrFull", err)
	}
	if err := m.Issue(ctx, []byte("tok"), time.Minute); !errors.Is(err, idem.ErrFull) {
		t.Fatalf("Issue in a full store = %v, want ErrFull", err)
	}
	if st, _, _ := m.Lookup(ctx, []byte("one-more"), nil); st != idem.Absent || m.Len() != 64 {
		t.Fatalf("ErrFull changed the store: %v, Len %d", st, m.Len())
	}
	// A repeat of a live key is still answered in a full store.
	if f, err := m.Claim(ctx, []byte("k0"), time.Minute); err != nil || f != 0 {
		t.Fatalf("repeat in a full store = %v, %v", f, err)
	}
	// The claim that needs room expires what is due first, without any
	// other call having advanced the wheel.
	clk.Advance(time.Minute + idem.DefaultMemoryTick)
	if f, err := m.Claim(ctx, []byte("one-more"), time.Minute); err != nil || f == 0 {
		t.Fatalf("Claim after expiry in a full store = %v, %v", f, err)
	}
}

func TestMemoryTooLarge(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, idem.MemoryConfig{MaxResult: 8})
	k := []byte("k")
	f, _ := m.Claim(ctx, k, time.Minute)
	if err := m.Complete(ctx, k, f, []byte("123456789"), time.Minute); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over MaxResult = %v", err)
	}
	if st, _, _ := m.Lookup(ctx, k, nil); st != idem.Pending {
		t.Fatalf("refused Complete changed the state to %v", st)
	}
	if err := m.Complete(ctx, k, f, []byte("12345678"), time.Minute); err != nil {
		t.Fatal(err)
	}
	// A ttl too far in the future for the clock is refused, not wrapped.
	if _, err := m.Claim(ctx, []byte("forever"), time.Duration(1<<63-1)); !errors.Is(err, idem.ErrTTL) {
		t.Fatalf("Claim with a ttl overflowing the clock = %v, want ErrTTL", err)
	}
}

func TestMemoryConfig(t *testing.T) {
	bad := []idem.MemoryConfig{
		{Capacity: -1},
		{Shards: 3},
		{Shards: 512},
		{Shards: -2},
		{MaxResult: -1},
		{Tick: -time.Second},
		{Capacity: 1 << 30, Shards: 1},
	}
	for _, c := range bad {
		if _, err := idem.NewMemory(c); !errors.Is(err, idem.ErrInvalidConfig) {
			t.Errorf("NewMemory(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
	m, err := idem.NewMemory(idem.MemoryConfig{})
	if err != nil || m.Cap() < idem.DefaultMemoryCapacity {
		t.Fatalf("default config: %v, cap %d", err, m.Cap())
	}
	// Fewer entries than the default shard count: shards shrink to fit.
	m, err = idem.NewMemory(idem.MemoryConfig{Capacity: 3})
	if err != nil || m.Cap() < 3 || m.Cap() > 4 {
		t.Fatalf("Capacity 3: %v, cap %d", err, m.Cap())
	}
	if _, err := idem.NewJanitor(nil, time.Second); err == nil {
		t.Error("NewJanitor(nil) succeeded")
	}
	if _, err := idem.NewJanitor(m, 0); err == nil {
		t.Error("NewJanitor with interval 0 succeeded")
	}
}

// TestMemoryCrashWindow is the crash between claim and completion (issue
// 8): the holder of a claim disappears; repeats are told "in progress"
// until the pending ttl passes, then the next repeat runs the call. The
// crashed holder's late Complete is refused (ErrLost), so its stale result
// never overwrites the new one.
func TestMemoryCrashWindow(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	m := newMemory(t, idem.MemoryConfig{Capacity: 64, Clock: clk.Now})
	k := []byte("transfer-42")
	ttl := idem.TTL{Pending: 30 * time.Second, Done: time.Hour}
	crashed, _ := m.Claim(ctx, k, ttl.Pending) // ... and the process dies here
	runs := 0
	pay := func(context.Context) ([]byte, error) { runs++; return []byte("paid"), nil }
	for _, at := range []time.Duration{0, 10 * time.Second, 29 * time.Second} {
		clk.Advance(at - time.Duration(clk.ns.Load()))
		if _, _, err := idem.Do(ctx, m, k, ttl, pay); !errors.Is(err, idem.ErrInProgress) {
			t.Fatalf("repeat %v after the crash = %v, want ErrInProgress", at, err)
		}
	}
	clk.Advance(time.Second) // 30 s: the claim has expired
	res, replayed, err := idem.Do(ctx, m, k, ttl, pay)
	if err != nil || replayed || string(res) != "paid" || runs != 1 {
		t.Fatalf("repeat after the window = %q %v %v, runs %d", res, replayed, err, runs)
	}
	if err := m.Complete(ctx, k, crashed, []byte("stale"), ttl.Done); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("late Complete of the crashed holder = %v, want ErrLost", err)
	}
	if _, res, _ := m.Lookup(ctx, k, nil); string(res) != "paid" {
		t.Fatalf("stored result = %q", res)
	}
}

// TestMemoryModel drives the store with random operations on a fake clock
// and checks every answer against a plain map: probing, backward-shift
// deletion, arena reuse, expiry and the wheel's reclaiming must never lose
// or invent an entry.
func TestMemoryModel(t *testing.T) {
	type entry struct {
		state   idem.State // Pending or Done for claims; Pending for tokens
		fence   idem.Fence
		result  string
		expires time.Duration
	}
	ctx := context.Background()
	clk := newFakeClock()
	m := newMemory(t, idem.MemoryConfig{Capacity: 512, Shards: 2, Tick: time.Millisecond, Clock: clk.Now})
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 300)
	for i := range keys {
		// Lengths across every arena size class; a shared prefix makes
		// the bytes, not the length, decide equality.
		keys[i] = "k" + strconv.Itoa(i) + strings.Repeat("x", rng.IntN(idem.MaxKeyLen-4))
	}
	claims := map[string]*entry{}
	tokens := map[string]*entry{}
	now := func() time.Duration { return time.Duration(clk.ns.Load()) }
	live := func(mp map[string]*entry, k string) *entry {
		if e := mp[k]; e != nil && e.expires > now() {
			return e
		}
		delete(mp, k)
		return nil
	}
	ops := 20000
	if testing.Short() {
		ops = 5000
	}
	for op := range ops {
		k := keys[rng.IntN(len(keys))]
		ttl := time.Duration(1+rng.IntN(50)) * time.Millisecond
		switch rng.IntN(9) {
		case 0, 1:
			f, err := m.Claim(ctx, []byte(k), ttl)
			e := live(claims, k)
			if errors.Is(err, idem.ErrFull) {
				continue // the model has no room limit; entries still counted
			}
			if err != nil || (f != 0) != (e == nil) {
				t.Fatalf("op %d Claim(%.8s) = %v, %v; model live: %v", op, k, f, err, e != nil)
			}
			if f != 0 {
				claims[k] = &entry{state: idem.Pending, fence: f, expires: now() + ttl}
			}
		case 2:
			e := live(claims, k)
			fence := idem.Fence(1)
			if e != nil && rng.IntN(4) > 0 {
				fence = e.fence
			}
			res := strconv.Itoa(op)
			err := m.Complete(ctx, []byte(k), fence, []byte(res), ttl)
			if e != nil && e.fence == fence {
				if err != nil {
					t.Fatalf("op %d Complete: %v", op, err)
				}
				e.state, e.result, e.expires = idem.Done, res, now()+ttl
			} else if !errors.Is(err, idem.ErrLost) {
				t.Fatalf("op %d Complete with a stale fence = %v", op, err)
			}
		case 3:
			e := live(claims, k)
			fence := idem.Fence(1)
			if e != nil {
				fence = e.fence
			}
			err := m.Release(ctx, []byte(k), fence)
			if e != nil && e.fence == fence {
				if err != nil {
					t.Fatalf("op %d Release: %v", op, err)
				}
				delete(claims, k)
			} else if !errors.Is(err, idem.ErrLost) {
				t.Fatalf("op %d Release with a stale fence = %v", op, err)
			}
		case 4, 5:
			st, res, err := m.Lookup(ctx, []byte(k), nil)
			e := live(claims, k)
			want, wantRes := idem.Absent, ""
			if e != nil {
				want, wantRes = e.state, e.result
			}
			if err != nil || st != want || string(res) != wantRes {
				t.Fatalf("op %d Lookup(%.8s) = %v %q %v; want %v %q", op, k, st, res, err, want, wantRes)
			}
		case 6:
			err := m.Issue(ctx, []byte(k), ttl)
			e := live(tokens, k)
			switch {
			case errors.Is(err, idem.ErrFull):
			case e != nil && !errors.Is(err, idem.ErrExists), e == nil && err != nil:
				t.Fatalf("op %d Issue = %v; model live: %v", op, err, e != nil)
			case e == nil:
				tokens[k] = &entry{expires: now() + ttl}
			}
		case 7:
			ok, err := m.Consume(ctx, []byte(k))
			e := live(tokens, k)
			if err != nil || ok != (e != nil) {
				t.Fatalf("op %d Consume = %v %v; model live: %v", op, ok, err, e != nil)
			}
			delete(tokens, k)
		case 8:
			e := live(claims, k)
			fence := idem.Fence(1)
			if e != nil && rng.IntN(4) > 0 {
				fence = e.fence
			}
			err := m.Extend(ctx, []byte(k), fence, ttl)
			if e != nil && e.fence == fence && e.state == idem.Pending {
				if err != nil {
					t.Fatalf("op %d Extend: %v", op, err)
				}
				e.expires = max(e.expires, now()+ttl)
			} else if !errors.Is(err, idem.ErrLost) {
				t.Fatalf("op %d Extend of a claim not pending under the fence = %v", op, err)
			}
		}
		clk.Advance(time.Duration(rng.IntN(3)) * time.Millisecond)
	}
	// Everything expires; the wheel then reclaims all of it.
	clk.Advance(time.Second)
	m.Expire(clk.Now())
	if n := m.Len(); n != 0 {
		t.Fatalf("Len after everything expired = %d", n)
	}
}

// TestMemoryClaimAllocs is the 0 allocs/op target for a claim with a
// []byte key (fresh keys, repeats, the extension a running call gets, and
// the release that recycles them).
func TestMemoryClaimAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	// Unscoped keys, and scoped ones whose 8 scopes' ledgers the quota
	// keeps (SPEC I5 round 3): neither allocates.
	for _, scoped := range []bool{false, true} {
		testClaimAllocs(t, scoped)
	}
}

func testClaimAllocs(t *testing.T, scoped bool) {
	ctx := context.Background()
	m := newMemory(t, idem.MemoryConfig{Capacity: 1024})
	keys := make([][]byte, 256)
	for i := range keys {
		keys[i] = []byte("00000000-0000-4000-8000-" + strconv.Itoa(100000000000+i))
		if scoped {
			keys[i] = mustScoped(t, "account-"+strconv.Itoa(i%8), string(keys[i]))
		}
	}
	fences := make([]idem.Fence, len(keys))
	var failed error // the last failure inside cycle, checked after AllocsPerRun
	cycle := func() {
		for i, k := range keys {
			f, err := m.Claim(ctx, k, time.Minute)
			if f == 0 || err != nil {
				failed = fmt.Errorf("claim %s: %d, %v", k, f, err)
			}
			fences[i] = f
		}
		for i, k := range keys {
			if f, err := m.Claim(ctx, k, time.Minute); f != 0 || err != nil { // a repeat
				failed = fmt.Errorf("repeat claim %s: %d, %v", k, f, err)
			}
			if err := m.Extend(ctx, k, fences[i], 2*time.Minute); err != nil { // the keeper's tick
				failed = fmt.Errorf("extend %s: %v", k, err)
			}
		}
		for i, k := range keys {
			if err := m.Release(ctx, k, fences[i]); err != nil {
				failed = fmt.Errorf("release %s: %v", k, err)
			}
		}
	}
	cycle() // grow the slabs to the working set
	if n := testing.AllocsPerRun(20, cycle); n != 0 {
		t.Fatalf("claim/repeat/release cycle (scoped keys %v) allocates %.1f times, want 0", scoped, n)
	}
	if failed != nil {
		t.Fatal(failed)
	}
}

// TestMemoryJanitor: an idle store returns expired entries' memory when a
// janitor runs (real clock), and the janitor's goroutine ends with Stop
// (goleak in TestMain).
func TestMemoryJanitor(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, idem.MemoryConfig{Capacity: 64, Tick: time.Millisecond})
	for i := range 10 {
		if f, err := m.Claim(ctx, []byte(strconv.Itoa(i)), 10*time.Millisecond); f == 0 || err != nil {
			t.Fatalf("claim %d: %d, %v", i, f, err)
		}
	}
	if m.Len() != 10 {
		t.Fatalf("Len %d before the janitor, want 10", m.Len())
	}
	j, err := idem.NewJanitor(m, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for m.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("janitor left %d expired entries", m.Len())
		}
		time.Sleep(5 * time.Millisecond)
	}
	j.Stop()
	j.Stop() // idempotent
}

// TestMemoryEvictionQuota checks the bookkeeping behind issue 17 items 4
// and 5 on a fake clock: a full shard evicts its oldest completed entry
// (completion order, not claim order; a second Complete moves an entry to
// the tail), expired entries are reclaimed without counting as evictions,
// pending claims are never evicted, and a scope's quota is given back by
// release, expiry and eviction.
func TestMemoryEvictionQuota(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	m := newMemory(t, idem.MemoryConfig{Capacity: 4, Shards: 1, ScopeQuota: 3, Clock: clk.Now})
	k := func(scope, key string) []byte { return mustScoped(t, scope, key) }
	claim := func(key []byte) idem.Fence {
		t.Helper()
		f, err := m.Claim(ctx, key, time.Minute)
		if err != nil || f == 0 {
			t.Fatalf("Claim(%q) = %v, %v", key, f, err)
		}
		return f
	}
	a, b, c := k("s", "a"), k("s", "b"), k("t", "c")
	fa, fb, fc := claim(a), claim(b), claim(c)
	// Completed in the order b, a, c; then b again: order a, c, b.
	for _, x := range []struct {
		key []byte
		f   idem.Fence
	}{{b, fb}, {a, fa}, {c, fc}, {b, fb}} {
		if err := m.Complete(ctx, x.key, x.f, []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	p := claim(k("t", "pending")) // the store is full: 4 entries
	for i, want := range [][]byte{a, c, b} {
		claim(k("u", strconv.Itoa(i)))
		if st, _, _ := m.Lookup(ctx, want, nil); st != idem.Absent {
			t.Fatalf("eviction %d left %q (%v); want oldest completion first", i, want, st)
		}
	}
	if st := m.Stats(); st.Evictions != 3 || st.Entries != 4 {
		t.Fatalf("stats %+v; want 3 evictions, 4 entries", st)
	}
	// Now four pending claims: nothing may be evicted.
	if _, err := m.Claim(ctx, []byte("more"), time.Minute); !errors.Is(err, idem.ErrFull) {
		t.Fatalf("Claim into a store of pending claims = %v, want ErrFull", err)
	}
	if m.Stats().FullRefusals != 1 {
		t.Fatalf("FullRefusals = %d", m.Stats().FullRefusals)
	}
	_ = p
	// Quota: scope "u" holds 3 → refused; release gives one back.
	m2 := newMemory(t, idem.MemoryConfig{Capacity: 64, Shards: 1, ScopeQuota: 2, Clock: clk.Now})
	f1, _ := m2.Claim(ctx, k("u", "1"), time.Minute)
	m2.Claim(ctx, k("u", "2"), time.Second)
	if _, err := m2.Claim(ctx, k("u", "3"), time.Minute); !errors.Is(err, idem.ErrQuota) {
		t.Fatalf("third claim of a quota-2 scope = %v, want ErrQuota", err)
	}
	if f, err := m2.Claim(ctx, k("v", "3"), time.Minute); err != nil || f == 0 {
		t.Fatalf("another scope = %v, %v", f, err)
	}
	if f, err := m2.Claim(ctx, []byte("unscoped"), time.Minute); err != nil || f == 0 {
		t.Fatalf("unscoped key = %v, %v", f, err)
	}
	if err := m2.Release(ctx, k("u", "1"), f1); err != nil {
		t.Fatal(err)
	}
	if f, err := m2.Claim(ctx, k("u", "3"), time.Minute); err != nil || f == 0 {
		t.Fatalf("claim after a release = %v, %v", f, err)
	}
	clk.Advance(2 * time.Second) // "u/2" expires
	if f, err := m2.Claim(ctx, k("u", "4"), time.Minute); err != nil || f == 0 {
		t.Fatalf("claim after an expiry = %v, %v", f, err)
	}
	if m2.Stats().QuotaRefusals != 1 {
		t.Fatalf("QuotaRefusals = %d", m2.Stats().QuotaRefusals)
	}
}
