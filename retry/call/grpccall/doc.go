// Package grpccall is package call for grpc-go (SPEC M2): client
// interceptors that retry unary and streaming RPCs under a call.Policy, and
// server interceptors that read the retry flags of SPEC B5 back into the
// handler's context.
//
// # Client side
//
// [UnaryClientInterceptor] and [StreamClientInterceptor] apply a
// call.Policy exactly as call.Do does: the attempt bound and delays (G1–G3,
// B1, B3), the budget (B4), the non-critical switch (B6), the flags of B5
// and the caller's context (B7). A failed attempt's gRPC status is judged by
// its class ([CodeClass], SPEC B2): Unavailable is a network error, retried;
// DeadlineExceeded a timeout, retried only at the entrance of a call chain;
// ResourceExhausted and Aborted the server shedding load, never retried;
// InvalidArgument, NotFound, PermissionDenied, FailedPrecondition and the
// other caller mistakes business errors, never retried; the rest (Internal,
// Unknown, DataLoss) only when the policy lists the code with
// call.WithRetryableCodes (G4). The server's grpc-retry-pushback-ms trailer
// is honoured as gRPC's retry design says: a non-negative value is the least
// wait before the next attempt (capped by call.WithMaxRetryAfter), and a
// negative or malformed one, or more than one value, means do not retry
// (SPEC M2 round 3).
//
// An attempt is committed — never retried — once the server's response
// headers arrive, as in gRFC A6 and grpc-go: only a trailers-only answer (a
// status with no headers before it, the usual shape of a server that
// refused the call) may be retried. A server that sent headers and then
// failed may have done the work, and a retry could do it twice.
//
// Every attempt carries the attempt number and the retry flag in its
// metadata (x-retry-attempt, x-retry-flag); the entrance mark never leaves
// the process. A policy with a classifier of its own sees the classes of
// this package only if it falls back to call.Classify, as call documents.
//
// A stream is retried only until it is committed: when its response
// headers arrive (the first response message comes after them), or when the
// caller has read them (so the caller never sees two attempts' headers). Until then the messages sent are
// kept and sent again on the next attempt, up to [MaxReplay] of them, after
// which the stream commits. After the commit an error goes to the caller, as
// in gRPC's own retry design.
//
// The interceptors' errors are the gRPC status errors the attempts got,
// unchanged, so status.Code and status.FromError work on them. A call whose
// context ends between attempts, or whose deadline would pass before the
// next attempt could start, returns an error whose status is
// DeadlineExceeded or Canceled and which wraps a *call.ContextError (the
// context's error and the last attempt's).
//
// # Server side
//
// [UnaryServerInterceptor] and [StreamServerInterceptor] read the flags of
// each incoming call into its context (call.Extract), where the policies of
// the calls the handler makes find them: a handler serving a retry does not
// retry its own calls, and only the entrance retries timeouts. gRPC does
// not forward incoming metadata to outgoing calls, so nothing else leaks
// through. The flags are believed as sent: pass call.Edge() on a server
// that outsiders can call (see call.Extract for the trust boundary).
package grpccall
