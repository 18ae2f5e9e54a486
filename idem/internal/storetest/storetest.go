// Package storetest is the conformance suite every idem.Store passes: the
// claim, complete, release and lookup contract, tokens, bad input, and the
// concurrency targets of issue 8 (1,000 goroutines claiming one ID: one
// winner, no lost claim; 1,000 consuming one token: one success).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
)

// Goroutines is the number of concurrent callers of the concurrency tests.
const Goroutines = 1000

// TTL is the claim ttl the suite uses: long enough that nothing expires
// during a test on a slow machine under -race.
const TTL = time.Minute

// Run runs the suite. newStore returns the store to test; the suite uses
// keys unique to each subtest, so one store (or one Redis, one table) may
// serve every call.
func Run(t *testing.T, newStore func(t *testing.T) idem.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, idem.Store)
	}{
		{"ClaimCompleteLookup", testClaimCompleteLookup},
		{"Release", testRelease},
		{"Fence", testFence},
		{"Extend", testExtend},
		{"KeysAreBytes", testKeysAreBytes},
		{"Tokens", testTokens},
		{"BadInput", testBadInput},
		{"ConcurrentClaimSameKey", testConcurrentSameKey},
		{"ConcurrentClaimDistinctKeys", testConcurrentDistinct},
		{"ConcurrentConsume", testConcurrentConsume},
		{"DoOnce", testDoOnce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// key returns a key unique to the running (sub)test.
func key(t *testing.T, suffix string) []byte {
	return []byte(t.Name() + "/" + suffix)
}

func testClaimCompleteLookup(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := key(t, "k")
	f, err := s.Claim(ctx, k, TTL)
	if err != nil || f == 0 {
		t.Fatalf("first Claim = %v, %v; want a fence", f, err)
	}
	if f2, err := s.Claim(ctx, k, TTL); err != nil || f2 != 0 {
		t.Fatalf("second Claim = %v, %v; want 0, nil", f2, err)
	}
	if st, res, err := s.Lookup(ctx, k, nil); err != nil || st != idem.Pending || len(res) != 0 {
		t.Fatalf("Lookup of a pending claim = %v, %q, %v", st, res, err)
	}
	if err := s.Complete(ctx, k, f, []byte("answer"), TTL); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if f2, err := s.Claim(ctx, k, TTL); err != nil || f2 != 0 {
		t.Fatalf("Claim after Complete = %v, %v; want 0, nil", f2, err)
	}
	// The holder may complete again (the same contract on every store).
	if err := s.Complete(ctx, k, f, []byte("answer"), TTL); err != nil {
		t.Fatalf("second Complete by the holder: %v", err)
	}
	if err := s.Complete(ctx, k, f+1, []byte("other"), TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Complete with another fence = %v, want ErrLost", err)
	}
	st, res, err := s.Lookup(ctx, k, []byte("prefix:"))
	if err != nil || st != idem.Done || string(res) != "prefix:answer" {
		t.Fatalf("Lookup of a done claim = %v, %q, %v; want done, prefix:answer", st, res, err)
	}
	if st, res, err := s.Lookup(ctx, key(t, "never"), []byte("x")); err != nil || st != idem.Absent || string(res) != "x" {
		t.Fatalf("Lookup of an unknown key = %v, %q, %v", st, res, err)
	}
	// An empty result is a result.
	k2 := key(t, "empty")
	f, _ = s.Claim(ctx, k2, TTL)
	if err := s.Complete(ctx, k2, f, nil, TTL); err != nil {
		t.Fatalf("Complete(nil): %v", err)
	}
	if st, res, err := s.Lookup(ctx, k2, nil); err != nil || st != idem.Done || len(res) != 0 {
		t.Fatalf("Lookup after Complete(nil) = %v, %q, %v", st, res, err)
	}
	// A binary result survives unchanged.
	k3 := key(t, "binary")
	bin := []byte{0, 'P', 0xff, 'D', 0, 1, 2}
	f, _ = s.Claim(ctx, k3, TTL)
	if err := s.Complete(ctx, k3, f, bin, TTL); err != nil {
		t.Fatal(err)
	}
	if _, res, _ := s.Lookup(ctx, k3, nil); !bytes.Equal(res, bin) {
		t.Fatalf("binary result = %x, want %x", res, bin)
	}
}

func testRelease(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := key(t, "k")
	f, _ := s.Claim(ctx, k, TTL)
	if err := s.Release(ctx, k, f); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if st, _, err := s.Lookup(ctx, k, nil); err != nil || st != idem.Absent {
		t.Fatalf("Lookup after Release = %v, %v", st, err)
	}
	if err := s.Complete(ctx, k, f, []byte("late"), TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Complete after Release = %v, want ErrLost", err)
	}
	if err := s.Release(ctx, k, f); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("second Release = %v, want ErrLost", err)
	}
	f2, err := s.Claim(ctx, k, TTL)
	if err != nil || f2 == 0 || f2 == f {
		t.Fatalf("Claim after Release = %v, %v; want a new fence (old %v)", f2, err, f)
	}
	// A done claim can be released by its fence too.
	if err := s.Complete(ctx, k, f2, []byte("r"), TTL); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, k, f2); err != nil {
		t.Fatalf("Release of a done claim: %v", err)
	}
	if st, _, _ := s.Lookup(ctx, k, nil); st != idem.Absent {
		t.Fatalf("Lookup after releasing a done claim = %v", st)
	}
}

func testFence(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := key(t, "k")
	f, _ := s.Claim(ctx, k, TTL)
	wrong := f + 1
	if err := s.Complete(ctx, k, wrong, []byte("x"), TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Complete with a wrong fence = %v, want ErrLost", err)
	}
	if err := s.Release(ctx, k, wrong); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Release with a wrong fence = %v, want ErrLost", err)
	}
	if st, _, _ := s.Lookup(ctx, k, nil); st != idem.Pending {
		t.Fatalf("a wrong fence changed the claim: %v", st)
	}
	if err := s.Complete(ctx, key(t, "unclaimed"), f, nil, TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Complete of an unclaimed key = %v, want ErrLost", err)
	}
}

func testTokens(t *testing.T, s idem.Store) {
	ctx := context.Background()
	tok := key(t, "tok")
	if err := s.Issue(ctx, tok, TTL); err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if err := s.Issue(ctx, tok, TTL); !errors.Is(err, idem.ErrExists) {
		t.Fatalf("second Issue = %v, want ErrExists", err)
	}
	// Tokens and claims are separate namespaces.
	if st, _, _ := s.Lookup(ctx, tok, nil); st != idem.Absent {
		t.Fatalf("a token is visible as a claim: %v", st)
	}
	if f, err := s.Claim(ctx, tok, TTL); err != nil || f == 0 {
		t.Fatalf("Claim of a key that is also a token = %v, %v", f, err)
	}
	if ok, err := s.Consume(ctx, tok); err != nil || !ok {
		t.Fatalf("first Consume = %v, %v; want true", ok, err)
	}
	// Seed 003: the second delete fails, so the second call is a repeat.
	if ok, err := s.Consume(ctx, tok); err != nil || ok {
		t.Fatalf("second Consume = %v, %v; want false", ok, err)
	}
	if ok, err := s.Consume(ctx, key(t, "never-issued")); err != nil || ok {
		t.Fatalf("Consume of a token never issued = %v, %v", ok, err)
	}
	if st, _, _ := s.Lookup(ctx, tok, nil); st != idem.Pending {
		t.Fatalf("consuming the token touched the claim: %v", st)
	}
	// A consumed token may be issued again.
	if err := s.Issue(ctx, tok, TTL); err != nil {
		t.Fatalf("Issue after Consume: %v", err)
	}
}

func testBadInput(t *testing.T, s idem.Store) {
	ctx := context.Background()
	long := []byte(strings.Repeat("k", idem.MaxKeyLen+1))
	for _, k := range [][]byte{nil, {}, long} {
		if _, err := s.Claim(ctx, k, TTL); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Claim(len %d) = %v, want ErrKey", len(k), err)
		}
		if err := s.Complete(ctx, k, 1, nil, TTL); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Complete(len %d) = %v, want ErrKey", len(k), err)
		}
		if err := s.Release(ctx, k, 1); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Release(len %d) = %v, want ErrKey", len(k), err)
		}
		if err := s.Extend(ctx, k, 1, TTL); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Extend(len %d) = %v, want ErrKey", len(k), err)
		}
		if _, _, err := s.Lookup(ctx, k, nil); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Lookup(len %d) = %v, want ErrKey", len(k), err)
		}
		if err := s.Issue(ctx, k, TTL); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Issue(len %d) = %v, want ErrKey", len(k), err)
		}
		if _, err := s.Consume(ctx, k); !errors.Is(err, idem.ErrKey) {
			t.Errorf("Consume(len %d) = %v, want ErrKey", len(k), err)
		}
	}
	k := key(t, "k")
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := s.Claim(ctx, k, ttl); !errors.Is(err, idem.ErrTTL) {
			t.Errorf("Claim(ttl %v) = %v, want ErrTTL", ttl, err)
		}
		if err := s.Issue(ctx, k, ttl); !errors.Is(err, idem.ErrTTL) {
			t.Errorf("Issue(ttl %v) = %v, want ErrTTL", ttl, err)
		}
	}
	// Nothing was stored by the refused calls.
	if st, _, _ := s.Lookup(ctx, k, nil); st != idem.Absent {
		t.Errorf("a refused Claim stored %v", st)
	}
	if ok, _ := s.Consume(ctx, k); ok {
		t.Errorf("a refused Issue stored a token")
	}
	f, _ := s.Claim(ctx, k, TTL)
	if err := s.Complete(ctx, k, f, nil, 0); !errors.Is(err, idem.ErrTTL) {
		t.Errorf("Complete(ttl 0) = %v, want ErrTTL", err)
	}
	if err := s.Extend(ctx, k, f, -time.Second); !errors.Is(err, idem.ErrTTL) {
		t.Errorf("Extend(ttl -1s) = %v, want ErrTTL", err)
	}
	if st, _, _ := s.Lookup(ctx, k, nil); st != idem.Pending {
		t.Errorf("a refused Complete changed the claim to %v", st)
	}
	// The longest key is accepted.
	max := []byte(strings.Repeat("m", idem.MaxKeyLen))
	if f, err := s.Claim(ctx, max, TTL); err != nil || f == 0 {
		t.Errorf("Claim of a %d-byte key = %v, %v", len(max), f, err)
	}
}

// ShortTTL is the pending ttl of the extension test: the claim would be
// gone after it without the extension.
const ShortTTL = 300 * time.Millisecond

// testExtend: Extend keeps a pending claim past its first ttl (SPEC I5,
// issue 17 item 6), never shortens one, and refuses (ErrLost, nothing
// changed) a wrong fence, a completed, released or absent claim.
func testExtend(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := key(t, "k")
	f, err := s.Claim(ctx, k, ShortTTL)
	if err != nil || f == 0 {
		t.Fatalf("Claim = %v, %v", f, err)
	}
	if err := s.Extend(ctx, k, f+1, TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Extend with another fence = %v, want ErrLost", err)
	}
	if err := s.Extend(ctx, k, f, TTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	// Extending again to a shorter ttl is accepted and shortens nothing.
	if err := s.Extend(ctx, k, f, time.Millisecond); err != nil {
		t.Fatalf("Extend to a shorter ttl: %v", err)
	}
	time.Sleep(ShortTTL + 100*time.Millisecond)
	if st, _, err := s.Lookup(ctx, k, nil); err != nil || st != idem.Pending {
		t.Fatalf("extended claim after its first ttl = %v, %v; want pending", st, err)
	}
	if f2, err := s.Claim(ctx, k, TTL); err != nil || f2 != 0 {
		t.Fatalf("Claim of an extended claim = %v, %v; want 0", f2, err)
	}
	if err := s.Complete(ctx, k, f, []byte("r"), TTL); err != nil {
		t.Fatalf("Complete after Extend: %v", err)
	}
	if err := s.Extend(ctx, k, f, TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Extend of a done claim = %v, want ErrLost", err)
	}
	if st, res, _ := s.Lookup(ctx, k, nil); st != idem.Done || string(res) != "r" {
		t.Fatalf("Extend changed a done claim: %v %q", st, res)
	}
	k2 := key(t, "released")
	f, _ = s.Claim(ctx, k2, TTL)
	if err := s.Release(ctx, k2, f); err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(ctx, k2, f, TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Extend of a released claim = %v, want ErrLost", err)
	}
	if st, _, _ := s.Lookup(ctx, k2, nil); st != idem.Absent {
		t.Fatalf("Extend revived a released claim: %v", st)
	}
	if err := s.Extend(ctx, key(t, "never"), f, TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Extend of an absent key = %v, want ErrLost", err)
	}
	// A token is not a claim.
	tok := key(t, "tok")
	if err := s.Issue(ctx, tok, TTL); err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(ctx, tok, f, TTL); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("Extend of a token = %v, want ErrLost", err)
	}
}

// testKeysAreBytes: keys are compared byte for byte on every store (issue
// 17 items 1 and 13): keys that a case- or accent-insensitive collation, a
// PAD SPACE comparison or a text column would merge are distinct entries,
// and so are the scoped keys of scope "1" + key "2abc" and scope "12" +
// key "abc".
func testKeysAreBytes(t *testing.T, s idem.Store) {
	ctx := context.Background()
	p := key(t, "")
	a, _ := idem.ScopedKey(append([]byte(nil), p...), "1", "2abc")
	b, _ := idem.ScopedKey(append([]byte(nil), p...), "12", "abc")
	keys := [][]byte{
		append(append([]byte(nil), p...), "abc"...),
		append(append([]byte(nil), p...), "ABC"...),
		append(append([]byte(nil), p...), "ábc"...),
		append(append([]byte(nil), p...), "abc "...),
		append(append([]byte(nil), p...), "a\x00c"...),
		append(append([]byte(nil), p...), "\xff\xfe"...),
		a, b,
	}
	for i, k := range keys {
		f, err := s.Claim(ctx, k, TTL)
		if err != nil || f == 0 {
			t.Fatalf("key %d %q: Claim = %v, %v; want a fence (another key shares its entry)", i, k, f, err)
		}
		if err := s.Complete(ctx, k, f, []byte{byte('0' + i)}, TTL); err != nil {
			t.Fatalf("key %d %q: Complete: %v", i, k, err)
		}
	}
	for i, k := range keys {
		if st, res, err := s.Lookup(ctx, k, nil); err != nil || st != idem.Done || string(res) != string(rune('0'+i)) {
			t.Fatalf("key %d %q: Lookup = %v %q %v; want its own result %q", i, k, st, res, err, string(rune('0'+i)))
		}
	}
}

// parallel runs fn(i) on n goroutines released together.
func parallel(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

func testConcurrentSameKey(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := key(t, "k")
	var winners, losers, failures atomic.Int64
	var winner atomic.Uint64
	parallel(Goroutines, func(int) {
		f, err := s.Claim(ctx, k, TTL)
		switch {
		case err != nil:
			failures.Add(1)
			t.Errorf("Claim: %v", err)
		case f != 0:
			winners.Add(1)
			winner.Store(uint64(f))
		default:
			losers.Add(1)
		}
	})
	if winners.Load() != 1 || losers.Load() != Goroutines-1 || failures.Load() != 0 {
		t.Fatalf("%d goroutines claiming one key: %d winners, %d losers, %d errors; want 1, %d, 0",
			Goroutines, winners.Load(), losers.Load(), failures.Load(), Goroutines-1)
	}
	if err := s.Complete(ctx, k, idem.Fence(winner.Load()), []byte("first"), TTL); err != nil {
		t.Fatalf("winner's Complete: %v", err)
	}
	var replays atomic.Int64
	parallel(Goroutines, func(int) {
		f, err := s.Claim(ctx, k, TTL)
		if err != nil || f != 0 {
			t.Errorf("Claim after completion = %v, %v", f, err)
			return
		}
		if st, res, err := s.Lookup(ctx, k, nil); err == nil && st == idem.Done && string(res) == "first" {
			replays.Add(1)
		}
	})
	if replays.Load() != Goroutines {
		t.Fatalf("%d of %d repeats got the first result", replays.Load(), Goroutines)
	}
}

func testConcurrentDistinct(t *testing.T, s idem.Store) {
	ctx := context.Background()
	var won atomic.Int64
	parallel(Goroutines, func(i int) {
		f, err := s.Claim(ctx, key(t, strconv.Itoa(i)), TTL)
		if err != nil || f == 0 {
			t.Errorf("Claim of key %d = %v, %v", i, f, err)
			return
		}
		won.Add(1)
	})
	if won.Load() != Goroutines {
		t.Fatalf("%d goroutines claiming distinct keys: %d won; a claim was lost", Goroutines, won.Load())
	}
}

func testConcurrentConsume(t *testing.T, s idem.Store) {
	ctx := context.Background()
	tok := key(t, "tok")
	if err := s.Issue(ctx, tok, TTL); err != nil {
		t.Fatal(err)
	}
	var consumed atomic.Int64
	parallel(Goroutines, func(int) {
		ok, err := s.Consume(ctx, tok)
		if err != nil {
			t.Errorf("Consume: %v", err)
		}
		if ok {
			consumed.Add(1)
		}
	})
	if consumed.Load() != 1 {
		t.Fatalf("%d goroutines consuming one token: %d succeeded, want 1", Goroutines, consumed.Load())
	}
}

// testDoOnce is the business view: 1,000 concurrent duplicates of one
// request through idem.Do run the business function exactly once; the
// rest are told it is in progress or get its result.
func testDoOnce(t *testing.T, s idem.Store) {
	ctx := context.Background()
	k := key(t, "k")
	var runs, inProgress, replayed, firsts atomic.Int64
	release := make(chan struct{})
	go func() {
		// Hold the business function a moment so that duplicates find
		// it in progress; the outcome must be the same either way.
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	ttl := idem.TTL{Pending: TTL, Done: TTL}
	parallel(Goroutines, func(int) {
		res, rep, err := idem.Do(ctx, s, k, ttl, func(context.Context) ([]byte, error) {
			runs.Add(1)
			<-release
			return []byte("paid"), nil
		})
		switch {
		case errors.Is(err, idem.ErrInProgress):
			inProgress.Add(1)
		case err != nil:
			t.Errorf("Do: %v", err)
		case rep && string(res) == "paid":
			replayed.Add(1)
		case !rep && string(res) == "paid":
			firsts.Add(1)
		default:
			t.Errorf("Do = %q, %v", res, rep)
		}
	})
	if runs.Load() != 1 || firsts.Load() != 1 || inProgress.Load()+replayed.Load() != Goroutines-1 {
		t.Fatalf("Do under %d duplicates: fn ran %d times, %d firsts, %d in progress, %d replayed",
			Goroutines, runs.Load(), firsts.Load(), inProgress.Load(), replayed.Load())
	}
	// After completion every duplicate is a replay.
	res, rep, err := idem.Do(ctx, s, k, ttl, func(context.Context) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	})
	if err != nil || !rep || string(res) != "paid" || runs.Load() != 1 {
		t.Fatalf("Do after completion = %q, %v, %v (runs %d)", res, rep, err, runs.Load())
	}
	// A failing first call releases the key: the retry runs.
	k2 := key(t, "fails")
	boom := errors.New("downstream failed")
	if _, _, err := idem.Do(ctx, s, k2, ttl, func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("failing Do = %v, want %v", err, boom)
	}
	res, rep, err = idem.Do(ctx, s, k2, ttl, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || rep || string(res) != "ok" {
		t.Fatalf("retry after a failure = %q, %v, %v; want a first run", res, rep, err)
	}
}
