package call

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
)

// Header names that carry the flags of SPEC B5 between services. They are in
// canonical MIME form, so http.Header's Get and Set use them as they are.
const (
	// HeaderAttempt carries the attempt number of an outgoing request in its
	// caller's retry loop: "1" for a first attempt, "2" or more for a retry.
	// Its presence also tells the receiver that the request came from a
	// service using this toolkit, so the receiver is not the entrance.
	HeaderAttempt = "X-Retry-Attempt"
	// HeaderFlag carries the retry flag of seed 001 (see [WithRetryFlag])
	// unchanged along the whole call chain.
	HeaderFlag = "X-Retry-Flag"
)

// MaxFlagLen bounds the retry flag read from a header, in bytes: a longer
// value is ignored, so a peer cannot make every downstream header large.
const MaxFlagLen = 256

// maxAttemptHeader bounds the attempt number read from a header.
const maxAttemptHeader = 1 << 20

// Carrier is the metadata of one request, read and written by header name:
// http.Header implements it as it is; an RPC framework's metadata (gRPC
// metadata.MD, a Kitex TTHeader) needs a two-method adapter. Keys are the
// Header* constants.
type Carrier interface {
	Get(key string) string
	Set(key, value string)
}

// Flags are the retry flags of the request being served (SPEC B5), kept in
// its context.Context by [Extract] (server side) or [WithRetryFlag] and
// [WithEntrance] (at the entrance).
type Flags struct {
	// Attempt is the attempt number the caller gave this request
	// (HeaderAttempt): 1 for a first attempt, 2 or more for a retry, 0 when
	// the request did not say (it came from outside the toolkit). A
	// malformed header counts as a retry, because a peer that cannot spell
	// the header is not trusted to be sending a first attempt.
	Attempt int
	// Entrance marks the service where the request entered the system. It
	// is set by Extract when the request carries no HeaderAttempt, or by
	// WithEntrance, and it is never propagated: only the entrance retries
	// timeouts (B5), so a timeout deep in a chain is retried once, at the
	// top, instead of at every level.
	Entrance bool
	// Flag is the retry flag of seed 001: a scenario marker set at the
	// entrance and propagated downstream in HeaderFlag. A policy built with
	// [RequireRetryFlag] retries only requests that carry one.
	Flag string
}

// IsRetry reports whether the request being served is itself a retry.
// Calls made while serving it are not retried (B5, seed 003): the caller
// upstream already retries, and retrying here too would multiply the load.
func (f Flags) IsRetry() bool { return f.Attempt >= 2 }

type flagsKey struct{}

// FlagsFrom returns the flags stored in ctx, and false if there are none: a
// context that did not come through Extract, WithRetryFlag or WithEntrance.
// Such a context belongs to the origin of a call chain (a program, not a
// server), which the policy treats as the entrance.
func FlagsFrom(ctx context.Context) (Flags, bool) {
	f, ok := ctx.Value(flagsKey{}).(*Flags)
	if !ok {
		return Flags{}, false
	}
	return *f, true
}

// WithFlags returns a copy of ctx that carries f.
func WithFlags(ctx context.Context, f Flags) context.Context {
	return context.WithValue(ctx, flagsKey{}, &f)
}

// WithRetryFlag returns a copy of ctx whose retry flag is flag (seed 001's
// SetFlag). Set it at the entrance; Inject (and the HTTP and gRPC glue built
// on it, packages httpcall and grpccall) propagate it.
func WithRetryFlag(ctx context.Context, flag string) context.Context {
	f, _ := FlagsFrom(ctx)
	f.Flag = flag
	return WithFlags(ctx, f)
}

// WithEntrance returns a copy of ctx marked as the entrance of a call chain,
// for entry points that do not go through [Extract] (a message consumer, a
// cron job). The mark is not propagated.
func WithEntrance(ctx context.Context) context.Context {
	f, _ := FlagsFrom(ctx)
	f.Entrance = true
	return WithFlags(ctx, f)
}

// entrance reports whether calls under ctx may retry timeouts: a context
// without flags is the origin of a chain, hence the entrance.
func entrance(ctx context.Context) (Flags, bool) {
	f, ok := FlagsFrom(ctx)
	return f, !ok || f.Entrance
}

// Extract returns ctx with the flags of an incoming request read from c
// (server side of B5). A request without HeaderAttempt makes this service
// the entrance; HeaderFlag is kept to be propagated further. Malformed values
// never fail: see Flags.Attempt and MaxFlagLen. With [Edge], c is not read:
// the request is the entrance, with no retry flag.
//
// Trust boundary: the flags are believed as sent. A caller can switch on
// retries that a [RequireRetryFlag] policy keeps off (by sending HeaderFlag)
// and switch off the entrance's retries (by sending HeaderAttempt: 2 makes
// the request a retry, which is not retried again; 1 makes this service not
// the entrance, which does not retry timeouts). So read flags without Edge
// only from services of the same system; where outsiders can call, use Edge
// (or strip the X-Retry-* headers at the proxy in front), the reason Envoy
// strips its x-envoy-* retry headers from external requests.
func Extract(ctx context.Context, c Carrier, opts ...ServerOption) context.Context {
	var cfg serverConfig
	if len(opts) > 0 {
		cfg = serverConfigOf(opts)
	}
	return extract(ctx, c, cfg)
}

func extract(ctx context.Context, c Carrier, cfg serverConfig) context.Context {
	if cfg.edge {
		return WithFlags(ctx, Flags{Entrance: true})
	}
	var f Flags
	if v := c.Get(HeaderAttempt); v == "" {
		f.Entrance = true
	} else {
		f.Attempt = ParseAttempt(v)
	}
	if v := c.Get(HeaderFlag); len(v) <= MaxFlagLen {
		f.Flag = v
	}
	return WithFlags(ctx, f)
}

// ServerOption configures the server side of SPEC B5: [Receive], [Extract],
// httpcall.Handler, and the gRPC server interceptors of package grpccall.
type ServerOption func(*serverConfig)

type serverConfig struct {
	edge bool
}

func serverConfigOf(opts []ServerOption) serverConfig {
	var c serverConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// Edge marks a server at the edge of the system, whose callers are outside
// it — users, partners, the internet (SPEC B5, round 2). The retry flags of
// its requests are ignored, whatever they say or omit (HeaderAttempt,
// HeaderFlag): every request is the entrance of a call chain and carries no
// retry flag, so its own calls retry exactly as their policies say. A
// service that wants a retry flag for some requests sets its own with
// [WithRetryFlag] in its handler; that flag is then propagated downstream.
func Edge() ServerOption {
	return func(c *serverConfig) { c.edge = true }
}

// ParseAttempt reads a HeaderAttempt value: a decimal attempt number from 1
// to 2^20, surrounding spaces allowed. Anything else (empty, zero, negative,
// too large, not a number) returns 2, i.e. "treat as a retry".
func ParseAttempt(v string) int {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > maxAttemptHeader {
		return 2
	}
	return n
}

// Inject writes the flags for an outgoing request made under ctx to c
// (client side of B5): HeaderAttempt with this call's attempt number (see
// [Attempt]) and HeaderFlag if ctx has a retry flag. The entrance mark is not
// written.
func Inject(ctx context.Context, c Carrier) {
	inject(ctx, c, Attempt(ctx))
}

// InjectAttempt is [Inject] with the attempt number given: for a caller
// that numbers attempts itself, such as an interceptor whose retry loop may
// run inside another (the number then counts the outer attempts too).
func InjectAttempt(ctx context.Context, c Carrier, attempt int) {
	inject(ctx, c, attempt)
}

func inject(ctx context.Context, c Carrier, attempt int) {
	c.Set(HeaderAttempt, strconv.Itoa(attempt))
	if f, ok := FlagsFrom(ctx); ok && f.Flag != "" {
		c.Set(HeaderFlag, f.Flag)
	}
}

type attemptKey struct{}

// attemptCtx is the context of the retries of one call: the caller's
// context plus the number of the attempt running now. It is allocated once
// per call, at the first retry, and updated in place for later attempts, so
// retrying allocates one object however many attempts there are. The number
// is atomic because an attempt's goroutines may outlive it.
type attemptCtx struct {
	context.Context
	n atomic.Int32
}

func (c *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// Attempt returns the number of the attempt that ctx belongs to: 1 for the
// first attempt of a call run by Do, DoValue or a wrapped function (and for
// any context not made by this package), 2 for the first retry, and so on.
func Attempt(ctx context.Context) int {
	if c, ok := ctx.Value(attemptKey{}).(*attemptCtx); ok {
		return int(c.n.Load())
	}
	return 1
}
