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

	"github.com/readretry/readretry/retry/call"
)

// HeaderReplayed is set to "true" on an answer that Middleware replays from
// the store instead of running the handler.
const HeaderReplayed = "Idempotent-Replayed"

// DefaultMaxBody is how much of a response body Middleware stores, in
// bytes, unless WithMaxBody says otherwise.
const DefaultMaxBody = 1 << 20

// errBodyTooLarge is returned by FingerprintBody's fingerprint for a body
// over its limit; Middleware answers 413.
var errBodyTooLarge = errors.New("idem: request body too large to fingerprint")

// Option configures [Middleware].
type Option func(*middleware) error

// WithTTL sets how long a claim stays pending and a stored answer is kept
// (default DefaultTTL). ttl.Pending must exceed the slowest handler: a
// handler still running when its claim expires may run a second time (see
// the package comment).
func WithTTL(ttl TTL) Option {
	return func(m *middleware) error {
		if ttl.Pending < 0 || ttl.Done < 0 {
			return fmt.Errorf("%w: negative TTL %+v", ErrInvalidConfig, ttl)
		}
		if ttl.Pending > 0 {
			m.ttl.Pending = ttl.Pending
		}
		if ttl.Done > 0 {
			m.ttl.Done = ttl.Done
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

// WithScope prefixes every key with scope(r), e.g. the authenticated
// account, so that one client cannot replay another's answer by guessing
// its key. The scope and the key together must fit MaxKeyLen. The default
// scope is empty: keys are global to the store.
func WithScope(scope func(*http.Request) string) Option {
	return func(m *middleware) error {
		if scope == nil {
			return fmt.Errorf("%w: nil scope", ErrInvalidConfig)
		}
		m.scope = scope
		return nil
	}
}

// WithFingerprint sets how a request is identified beyond its key (default
// [FingerprintMethodPath]). A repeat whose fingerprint differs from the
// first request's gets 422 Unprocessable Content (the IETF draft's answer
// to a key reused for another request). An error from fingerprint is
// answered with 400, or 413 for FingerprintBody's size limit.
func WithFingerprint(fingerprint func(*http.Request) ([]byte, error)) Option {
	return func(m *middleware) error {
		if fingerprint == nil {
			return fmt.Errorf("%w: nil fingerprint", ErrInvalidConfig)
		}
		m.fingerprint = fingerprint
		return nil
	}
}

// WithRelease decides from the handler's status whether the first call
// failed without effect, so that its claim is released and a retry runs the
// handler again, instead of the answer being stored and replayed. The
// default releases 429 and every 5xx: the server did not do the work (or
// says so), and a client retrying a 503 must not be handed the same 503
// until the key expires. A handler that fails after a side effect should
// answer 4xx, or be idempotent itself.
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
// and answers that were sent but could not be stored (wrapping
// ErrNotStored). The default drops them.
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

// FingerprintMethodPath is the default fingerprint: the method and the
// escaped URL path. It reads no body.
func FingerprintMethodPath(r *http.Request) ([]byte, error) {
	return []byte(r.Method + " " + r.URL.EscapedPath()), nil
}

// FingerprintBody returns a fingerprint over the method, the path and the
// whole body (SHA-256), for APIs where a key reused with another payload
// must be refused. It reads the body into memory — at most max bytes, a
// larger one is answered 413 — and hands the handler a copy.
func FingerprintBody(max int64) func(*http.Request) ([]byte, error) {
	return func(r *http.Request) ([]byte, error) {
		var body []byte
		if r.Body != nil && r.Body != http.NoBody {
			b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
			_ = r.Body.Close()
			if err != nil {
				return nil, err
			}
			if int64(len(b)) > max {
				return nil, errBodyTooLarge
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h := sha256.New()
		h.Write([]byte(r.Method + " " + r.URL.EscapedPath() + "\n"))
		h.Write(body)
		return h.Sum(nil), nil
	}
}

// defaultRelease releases the claim of a 429 or 5xx answer.
func defaultRelease(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

type middleware struct {
	store       Store
	ttl         TTL
	maxBody     int
	scope       func(*http.Request) string
	fingerprint func(*http.Request) ([]byte, error)
	release     func(int) bool
	onError     func(*http.Request, error)
	requireKey  bool
	next        http.Handler
}

// Middleware returns server middleware that runs a handler at most once per
// idempotency key (SPEC I1, the server side of the Idempotency-Key header
// that call.Transport retries with): it claims the key of each unsafe
// request carrying an Idempotency-Key (or X-Idempotency-Key) header in
// store, runs the handler once, stores its status, headers and body, and
// answers:
//
//   - a repeat after the first completed: the stored answer, with
//     Idempotent-Replayed: true;
//   - a repeat while the first runs: 409 Conflict with Retry-After: 1;
//   - a repeat with another fingerprint (see WithFingerprint): 422;
//   - a key longer than MaxKeyLen (scope included): 400;
//   - a store that fails: 503 with Retry-After: 1, which call.Transport
//     retries as a network error.
//
// The first caller's answer is streamed as the handler writes it; only a
// copy is kept. A first call answered 429 or 5xx (see WithRelease), or
// whose handler panicked, releases the key so that a retry runs it again.
// GET, HEAD, OPTIONS and TRACE pass through untouched, as do requests
// without a key (unless WithRequireKey). Errors wrap ErrInvalidConfig.
func Middleware(store Store, opts ...Option) (func(http.Handler) http.Handler, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	cfg := middleware{
		store:       store,
		ttl:         DefaultTTL,
		maxBody:     DefaultMaxBody,
		scope:       func(*http.Request) string { return "" },
		fingerprint: FingerprintMethodPath,
		release:     defaultRelease,
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
	if k := r.Header.Get(call.HeaderIdempotencyKey); k != "" {
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
	skey := []byte(m.scope(r) + key)
	if CheckKey(skey) != nil {
		http.Error(w, "idempotency key too long", http.StatusBadRequest)
		return
	}
	fp, err := m.fingerprint(r)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "idempotency fingerprint: "+err.Error(), http.StatusBadRequest)
		}
		return
	}
	fence, state, record, err := claimOrState(r.Context(), m.store, skey, m.ttl.Pending)
	switch {
	case err != nil:
		m.unavailable(w, r, err)
	case state == Pending:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "a request with this idempotency key is in progress", http.StatusConflict)
	case state == Done:
		m.replay(w, r, record, fp)
	default:
		m.first(w, r, skey, fence, fp)
	}
}

func (m *middleware) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	m.onError(r, err)
	w.Header().Set("Retry-After", "1")
	http.Error(w, "idempotency store unavailable", http.StatusServiceUnavailable)
}

// first runs the handler for the caller that won the claim, then stores
// its answer or releases the claim.
func (m *middleware) first(w http.ResponseWriter, r *http.Request, key []byte, fence Fence, fp []byte) {
	cleanup := context.WithoutCancel(r.Context())
	rec := &recorder{w: w, max: m.maxBody}
	done := false
	defer func() {
		if !done {
			// The handler panicked (http.ErrAbortHandler included): let a
			// retry run it. The panic goes on to net/http.
			_ = m.store.Release(cleanup, key, fence)
		}
	}()
	m.next.ServeHTTP(rec, r)
	done = true
	rec.finish()
	if m.release(rec.status) {
		if err := m.store.Release(cleanup, key, fence); err != nil && !errors.Is(err, ErrLost) {
			m.onError(r, err)
		}
		return
	}
	resp := Response{Status: rec.status, Fingerprint: fp, Header: rec.header, Body: rec.body, BodyOmitted: rec.omitted}
	err := m.store.Complete(cleanup, key, fence, AppendResponse(nil, &resp), m.ttl.Done)
	if errors.Is(err, ErrTooLarge) {
		// The store keeps less than MaxBody: keep the outcome at least.
		resp.Body, resp.BodyOmitted = nil, true
		err = m.store.Complete(cleanup, key, fence, AppendResponse(nil, &resp), m.ttl.Done)
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

// storedHeader copies the headers worth replaying: not Date (a replay gets
// its own) nor the hop-by-hop ones.
func storedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for name, vs := range h {
		switch name {
		case "Date", "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding",
			"Te", "Trailer", "Upgrade", "Proxy-Authenticate", "Proxy-Authorization":
			continue
		}
		if strings.HasPrefix(name, http.TrailerPrefix) {
			continue
		}
		out[name] = append([]string(nil), vs...)
	}
	return out
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
	r.Header.Set(call.HeaderIdempotencyKey, key)
}

// KeyTransport gives every unsafe request that has no idempotency key a
// fresh one (NewKey) before handing it to Next, so that Next — a
// call.Transport with Replayable set to call.IdempotentOrKeyed — retries it
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
	var se *call.StatusError
	if errors.As(err, &se) && se.Code == http.StatusConflict && se.Wait > 0 {
		return call.Network
	}
	return call.Classify(err)
}

// NewTransport returns the client side of idempotent retries for net/http:
// a KeyTransport over a call.Transport that retries under p (nil: the
// defaults) and replays requests that have an idempotent method or an
// idempotency key (call.IdempotentOrKeyed). base sends each attempt (nil:
// http.DefaultTransport). A POST is thus retried on network errors and
// timeouts, always with one key, and the server's Middleware runs it once.
// Build p with call.WithClassifier(Classify) to also wait out a first
// attempt the server is still running.
func NewTransport(base http.RoundTripper, p *call.Policy) http.RoundTripper {
	return &KeyTransport{Next: &call.Transport{Base: base, Policy: p, Replayable: call.IdempotentOrKeyed}}
}
