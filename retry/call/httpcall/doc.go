// Package httpcall is package call for net/http (SPEC M1, B5, B7): a
// RoundTripper that retries requests under a call.Policy, and the server
// middleware that reads the retry flags back into each request's context.
// It is to HTTP what package grpccall is to gRPC; package call itself stays
// free of any protocol.
//
// # Client side
//
// [Transport] retries replayable requests ([IdempotentMethod], or
// [IdempotentOrKeyed] for writes that carry an Idempotency-Key) exactly as
// call.Do retries a function: the attempt bound and delays, the budget, the
// non-critical switch, the flags of SPEC B5 and the caller's context. A
// response with status 400 or more is judged as a [*StatusError], whose
// class comes from [StatusClass] (SPEC B2), and its Retry-After
// ([ParseRetryAfter]) is honoured. Each attempt carries call.HeaderAttempt
// and, when the context has one, call.HeaderFlag.
//
// # Server side
//
// [Handler] reads the flags of each incoming request (call.Extract), so
// that a handler serving a retry does not retry its own calls and only the
// entrance retries timeouts. Pass call.Edge() on a service that outsiders
// reach: their X-Retry-* headers are then ignored.
package httpcall
