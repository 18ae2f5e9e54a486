// Package idem makes retried writes safe: the server tells a repeat from a
// first call and runs the business logic once (SPEC I1–I5; seeds 001 and
// 003). A retry toolkit such as retry/call may resend a write only when
// this holds, because a timed-out call may have been processed with only
// its answer lost.
//
// # The store
//
// A [Store] answers "claim this request ID for ttl — was I first?" with the
// semantics of Redis `SET key value NX EX ttl`, keeps the first call's
// result so that a repeat gets the same answer back, releases a claim whose
// call failed so that a retry may run, extends a claim whose call is still
// running, and keeps one-shot tokens (issue
// before the call, consume by delete: a failed delete is a repeat). Three
// implementations, in three import graphs so that a user of one does not
// link the others' drivers:
//
//   - [Memory], here: the embedded default. Sharded, pointer-free slots,
//     expiry through a timerwheel with no goroutine per key, bounded in
//     entries and in result bytes, per-scope quotas in entries and bytes
//     on by default, completed entries evicted oldest first — the
//     claimant's own scope's first — before a claim is refused (ErrFull);
//     a claim does not allocate. Deduplicates within one process.
//   - redisstore: on go-redis v9's UniversalClient (a single server,
//     Sentinel or Cluster alike): a claim is one SET NX PX, or for a
//     scoped key a Lua script that keeps the scope's quota ledger with it;
//     completion and release compare-and-set on the fence in a script;
//     DEL for tokens.
//     Deduplicates across every process sharing the Redis.
//   - sqlstore: over database/sql, a dedup table with a unique index on the
//     request ID (an insert that hits the index is a repeat), plus the
//     local-transaction event log of seed 001 (InTx) and the versioned
//     update of seed 003 (CAS on a version column). Deduplicates with the
//     durability of the database, and — with InTx — atomically with the
//     business write itself.
//
// [Do] runs a function once per key over any store; [Middleware] does the
// same for net/http handlers, keyed by [ScopedKey] under the [Scope] the
// integrator names (SPEC I5), and [NewTransport] / [KeyTransport] /
// [SetKey] are the client side: a request carrying an Idempotency-Key is
// one that httpcall.Transport (with Replayable set to httpcall.IdempotentOrKeyed)
// may retry even when it is a POST.
//
// # The crash window
//
// A claim is held for a pending ttl, and Do and Middleware extend it
// (Store.Extend, about three times per pending ttl, by a shared keeper
// that extends the claims concurrently, soonest-expiring first, each under
// a deadline of its own) for as long as the call runs, up to TTL.MaxHold.
// If the process that holds it crashes before completing, the extensions
// stop and repeats are answered "in progress" (ErrInProgress, HTTP 409)
// until the claim expires; then the next repeat claims the key and runs
// the call. An extension that cannot reach the store for a whole pending
// ttl (a store outage, a process stalled that long) lets the claim expire
// under a live call too, and its Complete then fails with ErrLost; failed
// extensions are counted (ExtendFailures) and passed to the error
// callback. A call that runs past TTL.MaxHold loses its claim the same
// way (ErrMaxHold), so a hung handler cannot hold its key for ever. So a business write
// that must never happen twice whatever the timing belongs inside the
// database transaction — the event log of sqlstore.InTx — where the unique
// index, not a clock, decides.
// The same holds for a result that could not be stored (ErrNotStored):
// once its claim expires, a repeat runs again.
//
// Ttl bounds the guarantee in the other direction too: a repeat arriving
// after the stored result expired (TTL.Done) is a new call (seed 003: the
// expiry is how long the interface promises idempotency).
package idem
