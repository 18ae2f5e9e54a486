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
// # One read, end to end
//
// Inside the engine a request in flight is a flight (flight.go): a small
// handle naming its zone, sequence number and context, whose methods are
// the steps below, one file per step.
//
//   - send.go — Send classifies the request (SPEC R3, R4), packs it
//     (package wire) into a pooled buffer, admits it under the zone's
//     context cap (SPEC R2), picks a proxy (SPEC R13) and stores a context
//     in the zone's context table (package ctxtable) under the request's
//     sequence number: the fixed-size ctxMeta, a copy of the packed frame
//     and of the user buffer, and scratch bytes with the proxies tried and
//     the kind's progress (a batch read's bitset of answered keys, an
//     index read's next position). It sends the frame and schedules the
//     first deadline on the zone's timing wheel (package timerwheel).
//     Nothing else happens for the request until a packet or a deadline.
//   - recv.go — RecvResponse reads packets from the transport and advances
//     every zone's wheel to now. A packet's sequence number finds its
//     context; none means late or duplicate (dropped, counted).
//   - answer.go — a good answer to a simple read is delivered and ends the
//     request; a listed error code with retries left re-sends at once
//     (SPEC R8). A complex read's packet passes only records not seen
//     before — keys not yet answered, stream positions next in order — and
//     restarts the wait for the next packet (SPEC R10, R11).
//   - resend.go — a deadline with retries left re-sends: the whole request
//     for a simple read, only the missing keys of a batch, the rest of an
//     index stream from the next position wanted, each rebuilt straight
//     from the packed original, to the proxy SPEC R13 chooses.
//   - finish.go — with no retry left the request ends with
//     ResultReadRetryTimeout (SPEC R9). A Response is a view valid until
//     the next RecvResponse; the context of a final response is released
//     then.
//
// Schedules (SPEC R6, R10): with n retries the budget T is cut into n+1
// segments of lengths x, 2x, …, (n+1)x, x = 2T/((n+1)(n+2)). A simple read
// re-sends at x, 3x, 6x, … and gives up at exactly T. For a complex read a
// segment is the longest wait between two packets; each retry raises it by
// x, and the retry count belongs to the whole request.
//
// # Concurrency and ownership
//
// Send is safe from any number of goroutines and takes no lock of its own
// beyond the context table's shard lock and the wheel's lock; zones,
// routes and configurations are read through atomic pointers to immutable
// snapshots. Polling is serialised by a mutex: a PollHand client's one
// RecvResponse goroutine, or a PollSelf client's Do callers and driver.
//
// A context is written by its sender until the first frame is out, and by
// the poller after that. The one exception is the handle of the first
// timer, which the sender schedules after the send — so that a failed send
// can take the context back untouched — and publishes with a
// compare-and-swap from zero that loses to any handle the poller stored.
// Timers are therefore validated, not trusted: a timer's id carries the
// context's timer generation, which the poller bumps whenever it schedules,
// so a timer that is no longer the context's current one fires into
// nothing. The same rule lets complex reads extend their wait lazily: an
// accepted packet only moves the deadline, and the pending timer, when it
// fires early, re-arms at the new deadline instead of ending the segment.
//
// # Memory (SPEC R15)
//
// A context costs the packed request and the user buffer, rounded up to
// the context table's payload size class, plus a fixed overhead: ctxMeta
// (see its size in the README's figures), the table's index cell and slot
// bookkeeping, and a pending timer node. So the footprint of a zone is
// about read qps × budget in seconds × (frame + user buffer + overhead),
// and the cap bounds it per zone. The README gives the measured bytes per
// context.
package retry
