package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/readretry/readretry/retry/call"
	"github.com/readretry/readretry/retry/call/httpcall"
)

// HeaderReplayed is set to "true" on an answer that Middleware replays from
// the store instead of running the handler.
const HeaderReplayed = "Idempotent-Replayed"

// DefaultMaxBody is how much of a response body Middleware stores, in
// bytes, unless WithMaxBody says otherwise.
const DefaultMaxBody = 1 << 20

// DefaultMaxRequestBody is the largest request body, in bytes, that the
// default fingerprint ([FingerprintRequest]) reads: 1 MiB. A keyed unsafe
// request with a longer body is answered 413 Content Too Large before
// anything is claimed or stored (SPEC I5 round 3); raise the limit with
// WithFingerprint(FingerprintBody(n)). The body is held in memory while the
// handler runs, so the limit also bounds that memory per request.
const DefaultMaxRequestBody = 1 << 20

// ErrBodyTooLarge is returned by the fingerprints of FingerprintBody and
// FingerprintRequest for a request body over their limit; Middleware
// answers it with 413 Content Too Large and stores nothing.
var ErrBodyTooLarge = errors.New("idem: request body too large to fingerprint")

// Option configures [Middleware].
type Option func(*middleware) error

// Scope names the party a request acts for — the authenticated account or
// tenant — so that a stored answer is found only by the same party's
// repeat (SPEC I5): Middleware keeps each answer under
// ScopedKey(scope, key), never under the client's key alone. It runs for
// every keyed unsafe request, after the handlers in front of Middleware
// (put authentication there). An error means the party is unknown: the
// request is answered 403 Forbidden and nothing is claimed. The scope may
// be any bytes; with the key and one separator it must fit MaxKeyLen, so
// keep it short (an account ID, or a hash of a long name).
type Scope func(r *http.Request) (string, error)

// GlobalScope is the Scope of a single-tenant service: one namespace for
// all clients. Use it only where every client that can reach the handler
// is one party (one internal caller, or a service with one user): a client
// that learns or guesses another's key is answered with the other's stored
// response (never its cookies, which are not stored).
func GlobalScope(*http.Request) (string, error) { return "", nil }

// Fingerprint identifies a request beyond its key: a repeat whose
// fingerprint differs from the first request's is refused with 422.
// Middleware stores the SHA-256 of what it returns (32 bytes, whatever its
// length), so the record does not grow with the request (SPEC I5). An
// error is answered 400, or 413 for FingerprintBody's size limit.
type Fingerprint func(*http.Request) ([]byte, error)

// WithTTL sets how long a claim stays pending and a stored answer is kept
// (default DefaultTTL). The claim of a running handler is extended every
// third or so of ttl.Pending, so ttl.Pending bounds how long the claim of a
// crashed process blocks repeats, not how long a handler may run; keep it
// well above a store round trip and a GC pause (see the package comment).
//
// ttl.MaxHold (default DefaultTTL.MaxHold) bounds how long a running
// handler keeps its key (see TTL). Zero fields keep the defaults.
func WithTTL(ttl TTL) Option {
	return func(m *middleware) error {
		if ttl.Pending < 0 || ttl.Done < 0 || ttl.MaxHold < 0 {
			return fmt.Errorf("%w: negative TTL %+v", ErrInvalidConfig, ttl)
		}
		if ttl.Pending > 0 {
			m.ttl.Pending = ttl.Pending
		}
		if ttl.Done > 0 {
			m.ttl.Done = ttl.Done
		}
		if ttl.MaxHold > 0 {
			m.ttl.MaxHold = ttl.MaxHold
		}
		return nil
	}
}

// WithMaxBody bounds the response body stored for replay, in bytes (n ≥ 0;
// default DefaultMaxBody). A longer body is sent to the first caller in
// full but not kept: repeats get the status and headers with an empty body.
func WithMaxBody(n int) Option {
	return func(m *middleware) error {
		if n < 0 {
			return fmt.Errorf("%w: negative MaxBody %d", ErrInvalidConfig, n)
		}
		m.maxBody = n
		return nil
	}
}

// WithFingerprint sets how a request is identified beyond its key (default
// [FingerprintRequest]: method, path, query and body; SPEC I5 round 3). A repeat whose fingerprint differs from the
// first request's gets 422 Unprocessable Content (the IETF Idempotency-Key
// draft's answer to a key reused with another payload).
func WithFingerprint(fingerprint Fingerprint) Option {
	return func(m *middleware) error {
		if fingerprint == nil {
			return fmt.Errorf("%w: nil fingerprint", ErrInvalidConfig)
		}
		m.fingerprint = fingerprint
		return nil
	}
}

// WithRelease decides from the handler's status whether the first call was
// not processed, so that its claim is released (nothing is stored) and a
// retry runs the handler again, instead of the answer being stored and
// replayed. The default is [ReleaseNotProcessed]; [ReleaseOnServerError]
// is the behaviour before SPEC I5, which releases every 5xx — a handler
// that commits and then answers 500 then runs again on every retry. A
// handler panic before the first byte of the answer always releases.
func WithRelease(release func(status int) bool) Option {
	return func(m *middleware) error {
		if release == nil {
			return fmt.Errorf("%w: nil release", ErrInvalidConfig)
		}
		m.release = release
		return nil
	}
}

// WithErrorHandler receives the store errors Middleware answers with 503,
// answers that were sent but could not be stored (wrapping ErrNotStored),
// and failed extensions of a running handler's claim (wrapping the store's
// error, or ErrMaxHold), the latter from a keeper goroutine. It must not
// block. The default drops them (ExtendFailures still counts the failed
// extensions).
func WithErrorHandler(h func(*http.Request, error)) Option {
	return func(m *middleware) error {
		if h == nil {
			return fmt.Errorf("%w: nil error handler", ErrInvalidConfig)
		}
		m.onError = h
		return nil
	}
}

// WithRequireKey answers 400 to an unsafe request (not GET, HEAD, OPTIONS
// or TRACE) without an idempotency key, instead of running it unguarded.
func WithRequireKey() Option {
	return func(m *middleware) error {
		m.requireKey = true
		return nil
	}
}

// FingerprintRequestLine is a fingerprint over the request line only: the
// SHA-256 of the method, the escaped URL path and the raw query string. A
// key reused for POST /transfer?amount=1000000 after POST
// /transfer?amount=1 is refused (422), but one reused with another body is
// not: use it (WithFingerprint) only for APIs whose writes carry no body,
// to save reading it. The default is [FingerprintRequest].
//
// SHA-256 rather than a fast 64-bit hash (xxhash): a client chooses the
// payload, and with a hash that is not collision-resistant it could build
// a second payload with the first one's fingerprint and have it answered
// with the first one's response; the cost, about a nanosecond a byte, is
// small beside the request.
func FingerprintRequestLine(r *http.Request) ([]byte, error) {
	h := sha256.New()
	writeRequestLine(h, r)
	return h.Sum(nil), nil
}

// writeRequestLine writes the method, the escaped path and the raw query to
// h, each followed by a NUL (which none of them may contain), so that no
// two requests write the same bytes.
func writeRequestLine(h io.Writer, r *http.Request) {
	io.WriteString(h, r.Method)
	h.Write([]byte{0})
	io.WriteString(h, r.URL.EscapedPath())
	h.Write([]byte{0})
	io.WriteString(h, r.URL.RawQuery)
	h.Write([]byte{0})
}

// FingerprintRequest is the default fingerprint (SPEC I5 round 3): the
// SHA-256 of the method, the escaped path, the raw query and the body, so a
// key reused with another payload — another amount in the body of the same
// POST — is refused with 422 instead of being answered with the first
// request's response. It is FingerprintBody(DefaultMaxRequestBody): a body
// over 1 MiB fails with ErrBodyTooLarge (413, nothing claimed or stored).
func FingerprintRequest(r *http.Request) ([]byte, error) {
	return fingerprintBody(r, DefaultMaxRequestBody)
}

// FingerprintBody returns a fingerprint over the method, the path, the
// query and the whole body (SHA-256, see FingerprintRequest) with another
// body limit than the default's. It reads the body into memory — at most
// max bytes (≥ 0; math.MaxInt64 means no limit); a larger body fails with
// ErrBodyTooLarge, which Middleware answers 413 — and hands the handler a
// copy. Errors: ErrInvalidConfig for a negative max.
func FingerprintBody(max int64) (Fingerprint, error) {
	if max < 0 {
		return nil, fmt.Errorf("%w: negative body limit %d", ErrInvalidConfig, max)
	}
	return func(r *http.Request) ([]byte, error) { return fingerprintBody(r, max) }, nil
}

// fingerprintBody reads r's body (at most max bytes, else ErrBodyTooLarge),
// gives r a copy to read again, and returns the SHA-256 of the request line
// and the body.
func fingerprintBody(r *http.Request, max int64) ([]byte, error) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		// Read max bytes, then probe for one more: max+1 would overflow
		// at math.MaxInt64.
		b, err := io.ReadAll(io.LimitReader(r.Body, max))
		if err == nil && int64(len(b)) == max {
			var one [1]byte
			if n, _ := io.ReadFull(r.Body, one[:]); n > 0 {
				err = ErrBodyTooLarge
			}
		}
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	h := sha256.New()
	writeRequestLine(h, r)
	h.Write(body)
	return h.Sum(nil), nil
}

// ReleaseNotProcessed is the default of WithRelease (SPEC I5): it releases
// the claim — stores nothing — for the answers that say the request was
// not processed: 429 Too Many Requests and 503 Service Unavailable (the
// server did not do the work; a retry must run it), and the refusals that
// come before any business logic: 400, 404 and 405 from a router, 401 and
// 403 from authentication, 413, 414, 415 and 431 for the request's form.
// Every other answer — 2xx, 3xx, other 4xx and 5xx such as a 500 after a
// commit — is stored and replayed, as the largest public payment API does.
func ReleaseNotProcessed(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable,
		http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusUnauthorized, http.StatusForbidden,
		http.StatusRequestEntityTooLarge, http.StatusRequestURITooLong,
		http.StatusUnsupportedMediaType, http.StatusRequestHeaderFieldsTooLarge:
		return true
	}
	return false
}

// ReleaseOnServerError releases the claim of a 429 or any 5xx answer and
// stores everything else, 404 included: the default before SPEC I5, kept
// for handlers that answer 5xx only before any side effect.
func ReleaseOnServerError(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

type middleware struct {
	store       Store
	ttl         TTL
	maxBody     int
	scope       Scope
	fingerprint Fingerprint
	release     func(int) bool
	onError     func(*http.Request, error)
	requireKey  bool
	next        http.Handler
}

// Middleware returns server middleware that runs a handler at most once per
// idempotency key and scope (SPEC I1, I5; the server side of the
// Idempotency-Key header that httpcall.Transport retries with): it claims
// ScopedKey(scope(r), key) of each unsafe request carrying an
// Idempotency-Key (or X-Idempotency-Key) header in store, runs the handler
// once — extending the claim while it runs — stores its status, headers
// (never Set-Cookie) and body, and answers:
//
//   - a repeat after the first completed: the stored answer, with
//     Idempotent-Replayed: true;
//   - a repeat while the first runs: 409 Conflict with Retry-After: 1;
//   - a repeat with another fingerprint (by default another method, path,
//     query or body; see WithFingerprint): 422;
//   - a body over the fingerprint's limit (DefaultMaxRequestBody): 413,
//     nothing claimed;
//   - a key that is not printable ASCII, or too long with its scope
//     (ValidKey, ScopedKey): 400;
//   - a request whose scope fails: 403;
//   - a scope over its quota (ErrQuota, Memory's ScopeQuota): 429;
//   - a store that fails or is full: 503 with Retry-After: 1, which
//     httpcall.Transport retries as a network error.
//
// scope is required: pass a Scope that names the authenticated party, or
// GlobalScope in a single-tenant service. The first caller's answer is
// streamed as the handler writes it; only a copy is kept. A first call
// that was not processed (ReleaseNotProcessed: 429, 503, a router's
// 404/405/400, …; see WithRelease), or whose handler panicked before
// sending anything, stores nothing and releases the key so that a retry
// runs the handler again; a handler that panics after sending its status
// is stored as 500, since its effect is unknown. GET, HEAD, OPTIONS and
// TRACE pass through untouched, as do requests without a key (unless
// WithRequireKey). Errors wrap ErrInvalidConfig.
func Middleware(store Store, scope Scope, opts ...Option) (func(http.Handler) http.Handler, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	if scope == nil {
		return nil, fmt.Errorf("%w: nil scope (pass idem.GlobalScope for a single-tenant service)", ErrInvalidConfig)
	}
	cfg := middleware{
		store:       store,
		ttl:         DefaultTTL,
		maxBody:     DefaultMaxBody,
		scope:       scope,
		fingerprint: FingerprintRequest,
		release:     ReleaseNotProcessed,
		onError:     func(*http.Request, error) {},
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return func(next http.Handler) http.Handler {
		m := cfg
		m.next = next
		return &m
	}, nil
}

func safeMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// Key returns r's idempotency key: the Idempotency-Key header, or
// X-Idempotency-Key (the older name that net/http also honours).
func Key(r *http.Request) string {
	if k := r.Header.Get(httpcall.HeaderIdempotencyKey); k != "" {
		return k
	}
	return r.Header.Get("X-Idempotency-Key")
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := Key(r)
	if safeMethod(r.Method) || key == "" {
		if key == "" && m.requireKey && !safeMethod(r.Method) {
			http.Error(w, "idempotency key required", http.StatusBadRequest)
			return
		}
		m.next.ServeHTTP(w, r)
		return
	}
	if !ValidKey(key) {
		http.Error(w, "idempotency key must be 1 to 255 printable ASCII characters", http.StatusBadRequest)
		return
	}
	scope, err := m.scope(r)
	if err != nil {
		http.Error(w, "idempotency scope: "+err.Error(), http.StatusForbidden)
		return
	}
	skey, err := ScopedKey(make([]byte, 0, len(scope)+1+len(key)), scope, key)
	if err != nil {
		http.Error(w, "idempotency key too long for its scope", http.StatusBadRequest)
		return
	}
	raw, err := m.fingerprint(r)
	if err != nil {
		if errors.Is(err, ErrBodyTooLarge) {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "idempotency fingerprint: "+err.Error(), http.StatusBadRequest)
		}
		return
	}
	sum := sha256.Sum256(raw)
	fp := sum[:]
	taken := time.Now()
	fence, state, record, err := claimOrState(r.Context(), m.store, skey, m.ttl.Pending)
	switch {
	case errors.Is(err, ErrQuota):
		http.Error(w, "too many stored requests for this client", http.StatusTooManyRequests)
	case err != nil:
		m.unavailable(w, r, err)
	case state == Pending:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "a request with this idempotency key is in progress", http.StatusConflict)
	case state == Done:
		m.replay(w, r, record, fp)
	default:
		m.first(w, r, skey, fence, taken, fp)
	}
}

func (m *middleware) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	m.onError(r, err)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "idempotency store unavailable", http.StatusServiceUnavailable)
}

// first runs the handler for the caller that won the claim, extending the
// claim while it runs, then stores its answer or releases the claim.
func (m *middleware) first(w http.ResponseWriter, r *http.Request, key []byte, fence Fence, taken time.Time, fp []byte) {
	cleanup := context.WithoutCancel(r.Context())
	rec := &recorder{w: w, max: m.maxBody}
	h := holdClaim(m.store, key, fence, taken, m.ttl.Pending, m.ttl.MaxHold, func(err error) { m.onError(r, err) })
	done := false
	defer func() {
		if done {
			return
		}
		// The handler panicked (http.ErrAbortHandler included); the panic
		// goes on to net/http after this.
		h.drop()
		if rec.status == 0 {
			// Nothing was sent: not processed as far as anyone knows,
			// so a retry may run it.
			_ = m.store.Release(cleanup, key, fence)
			return
		}
		// The status went out, so the handler got as far as answering:
		// its effect is unknown. Keep a 500 for repeats rather than run
		// it again (unless the release policy releases a 500).
		m.settle(r, key, fence, &Response{Status: http.StatusInternalServerError, Fingerprint: fp, Header: http.Header{}})
	}()
	m.next.ServeHTTP(rec, r)
	done = true
	rec.finish()
	h.drop()
	m.settle(r, key, fence, &Response{Status: rec.status, Fingerprint: fp, Header: rec.header, Body: rec.body, BodyOmitted: rec.omitted})
}

// settle stores resp as the answer for key's repeats, or releases the
// claim if the release policy says resp was not processed.
func (m *middleware) settle(r *http.Request, key []byte, fence Fence, resp *Response) {
	cleanup := context.WithoutCancel(r.Context())
	if m.release(resp.Status) {
		if err := m.store.Release(cleanup, key, fence); err != nil && !errors.Is(err, ErrLost) {
			m.onError(r, err)
		}
		return
	}
	err := m.store.Complete(cleanup, key, fence, AppendResponse(nil, resp), m.ttl.Done)
	if errors.Is(err, ErrTooLarge) {
		// The store keeps less than MaxBody: keep the outcome at least.
		resp.Body, resp.BodyOmitted = nil, true
		err = m.store.Complete(cleanup, key, fence, AppendResponse(nil, resp), m.ttl.Done)
	}
	if err != nil {
		m.onError(r, errors.Join(ErrNotStored, err))
	}
}

// replay answers a repeat with the stored answer.
func (m *middleware) replay(w http.ResponseWriter, r *http.Request, record, fp []byte) {
	resp, err := DecodeResponse(record)
	if err != nil {
		m.onError(r, err)
		http.Error(w, "idempotency record unreadable", http.StatusInternalServerError)
		return
	}
	if !bytes.Equal(resp.Fingerprint, fp) {
		http.Error(w, "idempotency key reused for a different request", http.StatusUnprocessableEntity)
		return
	}
	h := w.Header()
	for name, vs := range resp.Header {
		if !replayable(name) {
			continue // a record from elsewhere may hold one; never replay it
		}
		h[name] = vs
	}
	if resp.BodyOmitted {
		h.Del("Content-Length")
	}
	h.Set(HeaderReplayed, "true")
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// recorder passes the handler's answer through to the client and keeps a
// copy: the status, the headers as they were when the status was sent, and
// up to max bytes of body.
type recorder struct {
	w       http.ResponseWriter
	max     int
	status  int
	header  http.Header
	body    []byte
	omitted bool
}

// Header implements http.ResponseWriter.
func (r *recorder) Header() http.Header { return r.w.Header() }

// WriteHeader implements http.ResponseWriter.
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status = code
		r.header = storedHeader(r.w.Header())
	}
	r.w.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !r.omitted {
		if len(r.body)+len(p) > r.max {
			r.body, r.omitted = nil, true
		} else {
			r.body = append(r.body, p...)
		}
	}
	return r.w.Write(p)
}

// Flush implements http.Flusher when the underlying writer does.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// finish records the implicit 200 of a handler that wrote nothing.
func (r *recorder) finish() {
	if r.status == 0 {
		r.status = http.StatusOK
		r.header = storedHeader(r.w.Header())
	}
}

// storedHeader copies the headers worth replaying (see replayable).
func storedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for name, vs := range h {
		if replayable(name) {
			out[name] = append([]string(nil), vs...)
		}
	}
	return out
}

// replayable reports whether a response header (canonical name) may be
// stored and replayed: not Date (a replay gets its own), not the hop-by-hop
// ones, and never a cookie — a cookie set for the first caller's session
// must not reach whoever repeats the key (SPEC I5).
func replayable(name string) bool {
	switch name {
	case "Set-Cookie", "Set-Cookie2",
		"Date", "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding",
		"Te", "Trailer", "Upgrade", "Proxy-Authenticate", "Proxy-Authorization":
		return false
	}
	return !strings.HasPrefix(name, http.TrailerPrefix)
}

// NewKey returns a fresh idempotency key: 128 random bits as 26 base32
// characters (crypto/rand.Text).
func NewKey() string { return rand.Text() }

// SetKey sets r's Idempotency-Key header to key, creating the header map if
// needed. Set it once per logical operation, before the first attempt, and
// keep it across the caller's own retries: the key is what makes them
// repeats rather than new requests.
func SetKey(r *http.Request, key string) {
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set(httpcall.HeaderIdempotencyKey, key)
}

// KeyTransport gives every unsafe request that has no idempotency key a
// fresh one (NewKey) before handing it to Next, so that Next — a
// httpcall.Transport with Replayable set to httpcall.IdempotentOrKeyed — retries it
// with the same key on every attempt. The request passed in is not
// modified: a keyed copy is sent. Requests with a key or a safe method go
// through as they are.
type KeyTransport struct {
	// Next sends the request; nil means http.DefaultTransport.
	Next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *KeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	if safeMethod(r.Method) || Key(r) != "" {
		return next.RoundTrip(r)
	}
	keyed := r.Clone(r.Context())
	SetKey(keyed, NewKey())
	return next.RoundTrip(keyed)
}

// Classify is call.Classify, except that the middleware's "in progress"
// answer — 409 Conflict with a Retry-After — is a network error, so that a
// client whose first attempt timed out while the server was still running
// it waits the Retry-After and retries, and then gets the stored answer,
// instead of failing with a conflict (SPEC B2: the request is not wrong, its
// first copy is unfinished). A 409 without Retry-After stays a business
// error. Use it with call.WithClassifier(idem.Classify).
func Classify(err error) call.Class {
	var se *httpcall.StatusError
	if errors.As(err, &se) && se.Code == http.StatusConflict && se.Wait > 0 {
		return call.Network
	}
	return call.Classify(err)
}

// NewTransport returns the client side of idempotent retries for net/http:
// a KeyTransport over a httpcall.Transport that retries under p (nil: the
// defaults) and replays requests that have an idempotent method or an
// idempotency key (httpcall.IdempotentOrKeyed). base sends each attempt (nil:
// http.DefaultTransport). A POST is thus retried on network errors and
// timeouts, always with one key, and the server's Middleware runs it once.
// Build p with call.WithClassifier(Classify) to also wait out a first
// attempt the server is still running.
func NewTransport(base http.RoundTripper, p *call.Policy) http.RoundTripper {
	return &KeyTransport{Next: &httpcall.Transport{Base: base, Policy: p, Replayable: httpcall.IdempotentOrKeyed}}
}
