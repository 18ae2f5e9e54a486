package httpcall

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/readretry/readretry/retry/call"
)

// HeaderIdempotencyKey is the request header that makes a request safe to
// repeat whatever its method (the IETF Idempotency-Key draft); see
// [IdempotentOrKeyed].
const HeaderIdempotencyKey = "Idempotency-Key"

// DefaultMaxDrain is how much of an intermediate response body the
// Transport reads before closing it, in bytes: enough for the usual error
// page, so that the connection goes back to the pool; a larger body is
// abandoned and its connection closed.
const DefaultMaxDrain = 64 << 10

// Transport is an http.RoundTripper that retries requests under a
// call.Policy (SPEC M1) and carries the flags of SPEC B5 in headers:
//
//   - Only replayable requests are retried: by default those with an
//     idempotent method (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) and a body
//     that can be read again (no body, or Request.GetBody set, as
//     http.NewRequest does for in-memory bodies). Other requests are sent
//     once. Set Replayable to widen this, e.g. to [IdempotentOrKeyed].
//   - A transport error is judged by the policy's classifier; a response
//     with status 400 or more becomes a [*StatusError] for the same
//     judgement (408 and 504 are timeouts, 502 and 503 network errors, 429
//     throttling, other 4xx business errors, other 5xx unknown — retried
//     only if listed with call.WithRetryableCodes).
//   - A response that is retried is drained (up to MaxDrain bytes) and
//     closed; the last one is returned to the caller as it is, unread.
//   - Retry-After (seconds or an HTTP date) on a retried response is
//     honoured: the wait is at least that long, capped by the policy's
//     call.WithMaxRetryAfter.
//   - When the request's context ends, or its deadline would pass before
//     the next attempt could start, RoundTrip returns at once with a nil
//     response and a [*call.ContextError] wrapping the context's error and
//     the last attempt's (a [*StatusError] for a response), the last
//     response drained and closed — what [call.Do] returns in the same case
//     (B7).
//   - Every attempt carries call.HeaderAttempt (its number, counting any
//     retry loop around the request, see [call.Attempt]) and call.HeaderFlag
//     when the request's context has a retry flag.
//
// The request passed in is never modified: each attempt sends a shallow copy
// with its own header map. With per-attempt RPC timeouts in the policy, an
// attempt's timeout is released when the returned response's body is
// closed. A Transport is safe for concurrent use; its fields must not change
// after first use.
type Transport struct {
	// Base sends each attempt; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Policy decides the retries; nil means the defaults.
	Policy *call.Policy
	// Replayable reports whether a request may be sent more than once;
	// nil means [IdempotentMethod]. It is the hook for idempotency keys:
	// [IdempotentOrKeyed], or a predicate of an idempotency package.
	Replayable func(*http.Request) bool
	// MaxDrain bounds the bytes read from a retried response's body before
	// it is closed; 0 means DefaultMaxDrain, a negative value means none.
	MaxDrain int64
}

// IdempotentMethod reports whether r's method is idempotent (RFC 9110
// §9.2.2): GET, HEAD, OPTIONS, TRACE, PUT or DELETE. It is the default
// Transport.Replayable.
func IdempotentMethod(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// IdempotentOrKeyed reports whether r's method is idempotent or r carries an
// Idempotency-Key (or X-Idempotency-Key) header, which lets a POST be
// retried when the server deduplicates by key — net/http's own transport
// makes the same exception. The key store itself lives server side.
func IdempotentOrKeyed(r *http.Request) bool {
	return IdempotentMethod(r) || r.Header.Get(HeaderIdempotencyKey) != "" ||
		r.Header.Get("X-Idempotency-Key") != ""
}

// RoundTrip implements http.RoundTripper: it sends req, and again as the
// policy allows, and returns the last attempt's response or error as the
// Transport's doc describes.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	replayable := t.replayable(req)
	var a call.Attempts
	actx, err := a.Begin(ctx, t.Policy)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	outer := call.Attempt(ctx) - 1 // attempts of a retry loop around this request
	for {
		out := outgoing(req, actx, outer+a.Number())
		if a.Number() > 1 && hasBody(req) {
			body, err := req.GetBody()
			if err != nil {
				a.End()
				return nil, err
			}
			out.Body = body
		}
		resp, err := base.RoundTrip(out)
		if !replayable || (err == nil && resp.StatusCode < 400) {
			return finish(&a, resp), err
		}
		failure := err
		if failure == nil {
			failure = newStatusError(resp)
		}
		stop := a.Decide(failure)
		if ce, ok := stop.(*call.ContextError); ok {
			// The context ended, or its deadline would pass before the
			// next attempt: the context's error, wrapping the last one,
			// as from call.Do (B7); the last response is closed.
			if resp != nil {
				t.drain(resp)
			}
			a.End()
			return nil, ce
		}
		if stop != nil {
			// The loop ends before waiting: the caller gets the last
			// response (or transport error) as it is.
			return finish(&a, resp), err
		}
		if resp != nil {
			t.drain(resp)
		}
		if actx, err = a.Next(); err != nil {
			return nil, err
		}
	}
}

func (t *Transport) replayable(req *http.Request) bool {
	if hasBody(req) && req.GetBody == nil {
		return false
	}
	if t.Replayable != nil {
		return t.Replayable(req)
	}
	return IdempotentMethod(req)
}

// finish hands resp to the caller, tying the attempt's timeout (if any) to
// its body: the caller reads the body under the attempt's deadline.
func finish(a *call.Attempts, resp *http.Response) *http.Response {
	cancel := a.Detach()
	if cancel == nil {
		return resp
	}
	if resp == nil || resp.Body == nil {
		cancel()
		return resp
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp
}

func (t *Transport) drain(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	limit := t.MaxDrain
	if limit == 0 {
		limit = DefaultMaxDrain
	}
	if limit > 0 {
		_, _ = io.CopyN(io.Discard, resp.Body, limit)
	}
	_ = resp.Body.Close()
}

// outgoing returns the attempt's request: a shallow copy of req under ctx
// with its own header map carrying the flags.
func outgoing(req *http.Request, ctx context.Context, attempt int) *http.Request {
	out := req.WithContext(ctx)
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = make(http.Header, 2)
	}
	call.InjectAttempt(req.Context(), out.Header, attempt)
	return out
}

func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// cancelBody releases an attempt's timeout when the caller closes the body.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// StatusError is an HTTP response with status 400 or more, seen as the
// failure of an attempt. It carries the status code for the policy's
// retryable codes (G4), its class (see [StatusClass]) and the Retry-After
// the server asked for.
type StatusError struct {
	// Code is the response's status code.
	Code int
	// Status is the response's status line text, e.g. "503 Service
	// Unavailable".
	Status string
	// Wait is the Retry-After delay the server asked for; 0 if none.
	Wait time.Duration
}

func newStatusError(resp *http.Response) *StatusError {
	e := &StatusError{Code: resp.StatusCode, Status: resp.Status}
	if e.Status == "" {
		e.Status = http.StatusText(resp.StatusCode)
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		e.Wait, _ = ParseRetryAfter(v, time.Now())
	}
	return e
}

// Error returns "call: http status " and the response's status line.
func (e *StatusError) Error() string { return "call: http status " + e.Status }

// RetryCode returns the status code ([call.Coded]).
func (e *StatusError) RetryCode() int { return e.Code }

// RetryClass returns StatusClass(e.Code) ([call.Classed]).
func (e *StatusError) RetryClass() call.Class { return StatusClass(e.Code) }

// RetryAfter returns the Retry-After delay ([call.RetryAfter]).
func (e *StatusError) RetryAfter() time.Duration { return e.Wait }

// StatusClass is the class of an HTTP status (SPEC B2): 408 Request Timeout
// and 504 Gateway Timeout are Timeout; 502 Bad Gateway and 503 Service
// Unavailable are Network (the server was not reached or not ready); 429
// Too Many Requests is ServiceQuality; any other 4xx is Business; any other
// 5xx, and anything below 400, is Unknown.
func StatusClass(code int) call.Class {
	switch code {
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return call.Timeout
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return call.Network
	case http.StatusTooManyRequests:
		return call.ServiceQuality
	}
	if code >= 400 && code < 500 {
		return call.Business
	}
	return call.Unknown
}

// maxRetryAfterSeconds bounds a delta-seconds Retry-After before it is
// turned into a Duration (about 31 years; the policy caps it far lower).
const maxRetryAfterSeconds = 1 << 30

// ParseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3):
// delta-seconds (a non-negative decimal integer) or an HTTP date, taken
// relative to now. It reports false for anything else. A date in the past
// gives 0; a huge number of seconds saturates at 2^30 s. It never panics.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var n int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if n < maxRetryAfterSeconds {
				n = n*10 + int64(c-'0')
			}
		}
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}
