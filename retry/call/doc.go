// Package call retries calls to other services: the loop, the decision, and
// the metadata that keeps retries from multiplying along a call chain
// (SPEC M1, B2, B3, B5, B6, B7; seeds 001 and 003). It is usable on its own,
// without the read-retry engine of package retry.
//
// # The call API
//
// [Do] runs func(context.Context) error, [DoValue] a function that also
// returns a value, and [Wrap] decorates any func(context.Context, Req)
// (Resp, error) — the typed replacement for the reflection decorator of seed
// 001. [Retry] is the same as an [Endpoint] [Middleware] for RPC frameworks.
// The protocol glue lives in packages of its own, built on [Attempts], the
// same loop run step by step: httpcall holds the net/http RoundTripper and
// server middleware, grpccall the gRPC interceptors (SPEC M2). This package
// imports neither net/http nor gRPC. Besides errors, DoValue, Wrap and Retry can retry on the value
// returned: [RetryIf] takes a predicate over it, such as a business code in
// the response (SPEC M3).
//
// # The decision
//
// A [Policy] holds everything per RPC and is shared by all its calls: the
// attempt bound and delays (backoff.Settings, SPEC G1/G2, or a
// backoff.Strategy, B1), the [Classifier], the retryable codes (G4), an
// optional budget.Budget (B4), and the non-critical and retry-flag switches.
// After a failed attempt the call stops, in this order, if the caller's
// context is done (B7); the policy is non-critical (B6); the request being
// served is itself a retry, or carries no retry flag under
// [RequireRetryFlag] (B5); the error is a business or service-quality
// error (B2) or a code not listed (G4); it is a timeout and this service is
// not the entrance (B5); the attempts or total timeout are used up (B3,
// G2); the context's deadline would pass during the delay (B7); or the
// budget refuses (B4). Otherwise it sleeps the delay and tries again. By
// default a policy makes 3 attempts in all and retries network errors and
// timeouts; errors it does not recognise are not retried, so mark your own
// with [Mark] or a [Classed] type.
//
// # Flags along a call chain (SPEC B5, seed 001)
//
// Three pieces of metadata travel with a request. The attempt number
// ([HeaderAttempt]) says whether a request is a retry: a service serving a
// retry does not retry its own calls. Its presence says the request came
// from a service using this toolkit; a request without it makes its service
// the entrance, and only the entrance retries timeouts — a timeout at the
// bottom of A→B→C is seen by every level, and retrying it everywhere would
// turn one slow call into MaxAttempts^depth. The entrance mark itself is
// never propagated. The retry flag ([HeaderFlag], [WithRetryFlag]) is seed
// 001's scenario switch, set at the entrance and propagated to the whole
// chain. [Extract] and [Receive] read the flags on the server side, [Inject]
// and [Propagate] write them on the client side, through any [Carrier] (an
// http.Header is one as it is).
//
// The flags are trusted only from inside the system: a caller who can set
// them can switch retries on (a retry flag) or off (an attempt number).
// Services that outsiders reach read them with the [Edge] option, which
// ignores incoming flags and makes every request the entrance (SPEC B5).
//
// # Cost
//
// The first attempt of Do, DoValue or a wrapped function, when it succeeds,
// costs a context check and the call: no allocation, no clock read. A call
// that retries allocates one small context for all its retries, and sleeps
// on a pooled timer; per-attempt timeouts add what context.WithTimeout
// costs. See bench/call_test.go for the comparison with other libraries.
package call
