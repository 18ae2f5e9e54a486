package idem

import (
	"bytes"
	"context"
	"errors"
	"time"
)

// MaxKeyLen is the longest key (request ID or token) any store accepts, in
// bytes: 255, the limit common to idempotency-key APIs and what fits a
// VARCHAR(255) primary key on every SQL database. Keys are compared byte for
// byte; an Idempotency-Key header is usually a UUID (36 bytes).
const MaxKeyLen = 255

// Errors returned by the stores and helpers of this package and its
// sub-packages. Each is returned as is or wrapped (test with errors.Is). A
// call that fails with ErrKey, ErrTTL, ErrTooLarge, ErrFull, ErrLost or
// ErrExists has changed nothing.
var (
	// ErrKey is returned for an empty key or one longer than MaxKeyLen.
	ErrKey = errors.New("idem: key must be 1 to 255 bytes")
	// ErrTTL is returned for a time to live that is not positive: every
	// entry of a store expires, or the store would only grow (SPEC I1).
	ErrTTL = errors.New("idem: ttl must be positive")
	// ErrFull is returned by a bounded store (Memory) that has no room for
	// another entry even after dropping every expired one.
	ErrFull = errors.New("idem: store full")
	// ErrTooLarge is returned by Complete for a result longer than the
	// store's limit.
	ErrTooLarge = errors.New("idem: result too large")
	// ErrLost is returned by Complete and Release when the fence no longer
	// holds the key: the claim expired (and another caller may have claimed
	// the key since), was released, or was never this caller's. It is the
	// observable end of the crash window described in the package comment.
	ErrLost = errors.New("idem: claim lost (expired, released or never held)")
	// ErrExists is returned by Issue for a token that is already issued and
	// not yet consumed or expired.
	ErrExists = errors.New("idem: token already issued")
	// ErrInProgress is returned by Do when another caller holds the claim on
	// the key and has not completed it: the first call is still running (or
	// crashed, until its claim expires). HTTP maps it to 409 Conflict.
	ErrInProgress = errors.New("idem: request with this key is in progress")
	// ErrNotStored is wrapped by Do when fn succeeded but its result could
	// not be stored: the business effect happened once, but a repeat after
	// the claim expires would run fn again. The result is still returned.
	ErrNotStored = errors.New("idem: result not stored")
	// ErrConflict is returned by a versioned update (package sqlstore) that
	// matched no row: the row's version moved on since it was read, or the
	// row does not exist (SPEC I4, seed 003's CAS).
	ErrConflict = errors.New("idem: version conflict")
	// ErrQuota is returned by Claim and Issue of the stores of this module
	// (Memory, redisstore, sqlstore) when the key's scope (see ScopedKey)
	// already holds its quota of live entries, or of result bytes, so that
	// one tenant cannot push every other tenant's stored answers out of a
	// shared store or fill it (SPEC I5 round 3). Middleware maps it to
	// 429 Too Many Requests.
	ErrQuota = errors.New("idem: scope quota reached")
)

// State is what a store knows about a key.
type State uint8

const (
	// Absent: never claimed, released, or expired. A Claim now wins.
	Absent State = iota
	// Pending: claimed and not yet completed. The first call is running
	// (or crashed; the claim then expires after its ttl).
	Pending
	// Done: completed; the first call's result is stored until it expires.
	Done
)

var stateNames = [...]string{"absent", "pending", "done"}

// String returns "absent", "pending" or "done".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(?)"
}

// Fence identifies one successful Claim. Complete and Release take it back,
// so that a caller whose claim expired cannot complete or release the claim
// of the caller who took the key after it (the fencing token of
// distributed locks). A winning Claim never returns 0; 0 means "not first".
type Fence uint64

// Store deduplicates requests by key (SPEC I1) and keeps one-shot tokens
// (SPEC I3). It has the semantics of Redis `SET key value NX EX ttl`: the
// first Claim of a key wins until the claim expires, is released or its
// result expires. All methods are safe for concurrent use, take the key as
// a []byte that is not retained after the call (1 to MaxKeyLen bytes), and
// return ErrKey or ErrTTL for bad input without changing anything. Claims
// and tokens live in separate namespaces: a token and a claim with the
// same bytes are different entries.
//
// Implementations: [Memory] (this package), redisstore.Store and
// sqlstore.Store.
type Store interface {
	// Claim claims key for ttl (> 0). It returns a non-zero Fence if this
	// call was first — the key was absent or expired — and 0 if another
	// claim holds it (pending or done; see Lookup). Errors: ErrKey, ErrTTL,
	// ErrFull, or the backend's error; on error the caller must not assume
	// it was first.
	Claim(ctx context.Context, key []byte, ttl time.Duration) (Fence, error)
	// Complete stores result (copied; may be nil) as the answer for
	// repeats of key and keeps the key for ttl (> 0) from now, so that a
	// repeat within ttl gets result back from Lookup instead of running
	// again. fence must be the one Claim returned. Errors: ErrLost if the
	// claim is no longer held by fence (nothing stored), ErrTooLarge,
	// ErrKey, ErrTTL, or the backend's error.
	Complete(ctx context.Context, key []byte, fence Fence, result []byte, ttl time.Duration) error
	// Release drops the claim held by fence, pending or done, so that a
	// retry may run (call it when the first call failed without effect).
	// Errors: ErrLost if fence does not hold the key (nothing changed),
	// ErrKey, or the backend's error.
	Release(ctx context.Context, key []byte, fence Fence) error
	// Extend keeps the pending claim held by fence alive until at least
	// ttl (> 0) from now, so that a call running longer than its first
	// pending ttl is not run a second time (SPEC I5). It never shortens a
	// claim. Do and Middleware call it on a ticker while the call runs.
	// Errors: ErrLost if fence does not hold a pending claim on key (it
	// expired, was released or completed, or was never this caller's;
	// nothing changed), ErrKey, ErrTTL, or the backend's error.
	Extend(ctx context.Context, key []byte, fence Fence, ttl time.Duration) error
	// Lookup reports the key's state. For Done it appends the stored result
	// to dst and returns the extended slice (owned by the caller); for
	// Absent and Pending it returns dst unchanged. An expired entry is
	// Absent.
	Lookup(ctx context.Context, key []byte, dst []byte) (State, []byte, error)
	// Issue stores token for ttl (> 0) before the call that will carry it
	// (SPEC I3, seed 003). Errors: ErrExists if the token is already issued
	// and live, ErrFull, ErrKey, ErrTTL, or the backend's error.
	Issue(ctx context.Context, token []byte, ttl time.Duration) error
	// Consume deletes token and reports whether this call deleted it: true
	// exactly once per issued token, false for a repeat, an expired token
	// or one never issued (seed 003: a failed delete means a repeat).
	Consume(ctx context.Context, token []byte) (bool, error)
}

// TTL says how long a key is kept: Pending bounds a claim whose call has
// not completed and is no longer extended (its process crashed; see the
// package comment), Done how long a completed call's result answers
// repeats, and MaxHold how long a claim is held at most, extensions
// included, however long its call runs (SPEC I5 round 3). A zero field
// means DefaultTTL's.
type TTL struct {
	Pending time.Duration
	Done    time.Duration
	// MaxHold bounds how long a running call keeps its key: extensions
	// stop once the claim has been held this long (the error callback
	// gets ErrMaxHold), and the claim expires at most Pending later, so a
	// handler that hangs after its client left does not answer 409 to
	// every repeat for ever. A repeat after that runs the call again,
	// alongside the hung one: choose it well above the longest call that
	// can still finish. Less than Pending means Pending: no extension.
	MaxHold time.Duration
}

// DefaultTTL is 1 minute pending, 24 hours done (the retention most public
// idempotency-key APIs document), held at most 10 minutes.
var DefaultTTL = TTL{Pending: time.Minute, Done: 24 * time.Hour, MaxHold: 10 * time.Minute}

// withDefaults returns t with its zero fields taken from DefaultTTL.
func (t TTL) withDefaults() TTL {
	if t.Pending == 0 {
		t.Pending = DefaultTTL.Pending
	}
	if t.Done == 0 {
		t.Done = DefaultTTL.Done
	}
	if t.MaxHold == 0 {
		t.MaxHold = DefaultTTL.MaxHold
	}
	return t
}

// CheckKey returns ErrKey unless key is 1 to MaxKeyLen bytes. Stores call
// it first; callers may use it to reject a bad key early.
func CheckKey(key []byte) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return ErrKey
	}
	return nil
}

// ScopeSeparator is the byte ScopedKey puts between a scope and a client's
// key: the ASCII unit separator, a control character no valid key contains
// (ValidKey) and net/http refuses in any header value.
const ScopeSeparator = 0x1F

// ValidKey reports whether key can be a client's idempotency key: 1 to
// MaxKeyLen bytes of printable ASCII (0x20 to 0x7E), the characters of the
// structured-field string the IETF Idempotency-Key header carries. A UUID
// or NewKey's base32 text qualifies.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// ScopedKey appends to dst the store key under which key (a client's
// idempotency key) is kept for scope (the integrator's name for the
// client: an account, a tenant; SPEC I5) and returns the extended slice:
// the scope's bytes, ScopeSeparator, then key. The key contains no
// separator (ValidKey), so splitting at the last separator gives scope and
// key back: two different (scope, key) pairs never share a store key —
// scope "1" with key "2abc" and scope "12" with key "abc" are two entries.
// The scope may hold any bytes. The whole composite counts against
// MaxKeyLen. Errors: ErrKey (dst unchanged) when key is not ValidKey or the
// composite is longer than MaxKeyLen.
func ScopedKey(dst []byte, scope, key string) ([]byte, error) {
	if !ValidKey(key) || len(scope)+1+len(key) > MaxKeyLen {
		return dst, ErrKey
	}
	dst = append(dst, scope...)
	dst = append(dst, ScopeSeparator)
	return append(dst, key...), nil
}

// keyScope returns the scope part of a store key made by ScopedKey, and
// false for a key without a separator (not scoped).
func keyScope(key []byte) ([]byte, bool) {
	i := bytes.LastIndexByte(key, ScopeSeparator)
	if i < 0 {
		return nil, false
	}
	return key[:i], true
}

// TTLMillis returns ttl in whole milliseconds, rounded up so that an entry
// never expires before its ttl (Redis PX, SQL expiry columns), for Store
// implementations. It returns ErrTTL for a ttl that is not positive.
func TTLMillis(ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, ErrTTL
	}
	return int64((ttl + time.Millisecond - 1) / time.Millisecond), nil
}

// maxDoAttempts bounds Do's claim/lookup loop: a key that keeps vanishing
// between Claim and Lookup (released or expiring at that very moment) is
// reported in progress rather than looped on.
const maxDoAttempts = 3

// Do runs fn at most once per key among all callers sharing s (SPEC I1,
// seed 003's "check whether the request was processed"):
//
//   - the first caller claims key for ttl.Pending and runs fn; on success
//     the result is stored for ttl.Done and returned with replayed false;
//     on error (or panic) the claim is released so that a retry may run,
//     and fn's error is returned;
//   - a repeat while the first runs gets ErrInProgress;
//   - a repeat after the first completed gets the stored result and
//     replayed true, without running fn.
//
// While fn runs, its claim is extended (Store.Extend) every third or so of
// ttl.Pending by a shared background keeper, for at most ttl.MaxHold, so a
// slow fn is not run twice; only a crashed process (or a call running past
// MaxHold) leaves a claim to expire (see the package comment). Failed
// extensions are counted (ExtendFailures); DoWith also passes them to a
// callback. If the result cannot be stored, Do returns it with an error
// wrapping ErrNotStored (see there). Release and Complete run under
// context.WithoutCancel(ctx), so a caller that went away does not leave its
// claim behind. A zero ttl field means DefaultTTL's. fn must not retain the
// key.
func Do(ctx context.Context, s Store, key []byte, ttl TTL, fn func(context.Context) ([]byte, error)) (result []byte, replayed bool, err error) {
	return DoWith(ctx, s, key, DoConfig{TTL: ttl}, fn)
}

// DoConfig configures DoWith.
type DoConfig struct {
	// TTL: see TTL; zero fields mean DefaultTTL's.
	TTL TTL
	// OnError, if not nil, receives the errors of extending the claim
	// while fn runs (wrapping the store's error, ErrLost among them, or
	// ErrMaxHold), from a keeper goroutine; it must not block. They are
	// counted in ExtendFailures either way.
	OnError func(error)
}

// DoWith is Do with a DoConfig: the same contract, plus c.OnError.
func DoWith(ctx context.Context, s Store, key []byte, c DoConfig, fn func(context.Context) ([]byte, error)) (result []byte, replayed bool, err error) {
	ttl := c.TTL.withDefaults()
	taken := time.Now()
	fence, state, result, err := claimOrState(ctx, s, key, ttl.Pending)
	switch {
	case err != nil:
		return nil, false, err
	case state == Done:
		return result, true, nil
	case state == Pending:
		return nil, false, ErrInProgress
	}
	h := holdClaim(s, key, fence, taken, ttl.Pending, ttl.MaxHold, c.OnError)
	result, err = run(ctx, s, key, fence, h, fn)
	if err != nil {
		return nil, false, err
	}
	h.drop()
	if err := s.Complete(context.WithoutCancel(ctx), key, fence, result, ttl.Done); err != nil {
		return result, false, errors.Join(ErrNotStored, err)
	}
	return result, false, nil
}

// claimOrState claims key, or says why not: fence != 0 means this caller
// won; otherwise state is Pending (another call holds it) or Done (result is
// its stored result). A key released or expired between Claim and Lookup
// is claimed again, up to maxDoAttempts times, then reported Pending.
// Errors are the store's.
func claimOrState(ctx context.Context, s Store, key []byte, pending time.Duration) (Fence, State, []byte, error) {
	for range maxDoAttempts {
		fence, err := s.Claim(ctx, key, pending)
		if err != nil || fence != 0 {
			return fence, Absent, nil, err
		}
		state, result, err := s.Lookup(ctx, key, nil)
		if err != nil || state != Absent {
			return 0, state, result, err
		}
	}
	return 0, Pending, nil, nil
}

// run calls fn and, if fn fails or panics, stops extending the claim and
// releases it.
func run(ctx context.Context, s Store, key []byte, fence Fence, h *hold, fn func(context.Context) ([]byte, error)) (result []byte, err error) {
	ok := false
	defer func() {
		if !ok {
			// fn failed or panicked: the call had no effect we vouch for,
			// so let a retry run. A panic propagates after this.
			h.drop()
			_ = s.Release(context.WithoutCancel(ctx), key, fence)
		}
	}()
	result, err = fn(ctx)
	ok = err == nil
	return result, err
}
