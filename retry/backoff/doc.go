// Package backoff computes when the attempts of one operation start, how long
// each may run, and how long to wait between them. It is the timing half of the
// retry toolkit; package retry/call runs the loop and package retry/budget
// caps how many retries a client sends.
//
// # Attempt and operation (SPEC G1, G2, G5)
//
// An operation is one logical call; an attempt is one RPC sent for it.
// [Settings] is the per-RPC model of the Google Cloud client libraries (seed
// 002): the first attempt runs with InitialRPCTimeout and no delay; before
// attempt k+1 the delay is InitialRetryDelay for the first retry and then
// min(previous delay × RetryDelayMultiplier, MaxRetryDelay); the attempt's RPC
// timeout is min(previous timeout × RPCTimeoutMultiplier, MaxRPCTimeout,
// TotalTimeout − start of the attempt). No attempt starts at or after
// TotalTimeout, and none after MaxAttempts. [Settings.Plan] lays the whole
// operation out with jitter off, every attempt assumed to time out, which is
// how the seed's timing tables are written; the package tests reproduce them.
//
// # Jitter (SPEC G3)
//
// Jitter spreads the retries of many clients over time so that they do not
// hit a recovering server together. It is on by default: an [Iterator] over
// Settings waits a uniform random time in [1 ms, computed delay] (see
// [Jitter]); set Iterator.NoJitter for reproducible schedules. Strategies that
// are random by construction ([Random], [FullJitter], [Decorrelated]) carry
// their own randomness and are not jittered again.
//
// # Strategies (SPEC B1)
//
// [Strategy] is the smaller model of seed 003: a function from the retry
// number to a delay. The package provides [None] (retry at once), [Constant]
// (the seed's "linear": a fixed wait), [Random] (uniform in [Min, Max]),
// [Exponential] (×2 by default, capped), [FullJitter] (uniform in [0,
// exponential]) and [Decorrelated] (AWS "decorrelated jitter"). Every strategy
// is a small value type, safe for concurrent use, and saturates instead of
// overflowing: the delay for retry 64, 1,000 or 10⁶ is the cap, never a
// negative or wrapped value.
//
// # Per-call state
//
// An [Iterator] is the per-call state: a value kept on the caller's stack,
// advanced with [Iterator.Next] using the time elapsed since the operation
// began. It allocates nothing and reads no clock itself (time is passed in, as
// in golang.org/x/time/rate), so tests need no sleeping.
//
// Randomness comes from math/rand/v2's top-level functions, which are safe for
// concurrent use without a lock.
package backoff
