// Package retry is readretry's read-retry engine (SPEC §1, seed 000): when
// a read gets no answer in time, or an answer with a listed error code, the
// client quietly re-sends it to another proxy, keeps every in-flight
// request's context, and hands the caller exactly one final result — no
// duplicate, no missing record, the caller's async ID and user buffer
// intact. It also holds the pure pieces of the feature: the directory's
// conf:// configuration (Conf, ParseConf, ConfFromCollectURLList) and the
// k·x schedules (SimpleDeadlines, ComplexWaits).
//
// # Using it
//
// An SDK makes one Client over a Transport, applies each zone's route as
// the directory sends it (ApplyRoute, which also carries the conf://
// element), turns the feature on with SetReadRetryTimeout, and reads with
// Do, which blocks until the final result or the caller's context ends.
// Who drives the engine is chosen once, in Config.Poller: by default
// (PollSelf) the client drives itself; with PollHand the caller sends with
// Send and polls RecvResponse periodically — exactly the seed's sequence —
// and that loop serves Do calls too (poll.go). Read retry applies to a
// read only when its class has a budget, the zone's configuration lists
// its command with MaxRetries > 0, and the zone is under its context cap
// (SPEC R2, R3); everything else is sent once and waits
// Config.WaitTimeout.
//
// # How a read moves through the engine
//
// The path of one read — admission, the k·x schedule of re-sends (SPEC
// R6, R10), which answer wins and what is held (R7, R8), partial re-send
// (R11), proxy choice and health (R13), the storm guard (R19), the finish
// (R9) — is told once, file by file, in docs/design.md ("One read, end to
// end"); the decisions behind it are in docs/requirements.md.
//
// # Concurrency and ownership
//
// Send is safe from any number of goroutines and takes no lock of its own
// beyond the context table's shard lock and the wheel's lock; zones,
// routes and configurations are read through atomic pointers to immutable
// snapshots. Polling is serialised by a mutex: a PollHand client's one
// RecvResponse goroutine, or a PollSelf client's Do callers and driver.
//
// Who writes a context when, and why timers are validated rather than
// trusted, is in docs/design.md ("Ownership rules").
//
// # Memory (SPEC R15)
//
// A context costs the packed request and the user buffer, rounded up to
// the context table's payload size class, plus a fixed overhead: ctxMeta,
// the table's index cell and slot bookkeeping, and a pending timer node.
// So the footprint of a zone is about read qps × budget in seconds ×
// (frame + user buffer + overhead), and the cap bounds it per zone.
// BENCHMARKS.md ("Memory per context") gives the measured overhead and the
// formula with its constants.
package retry
