package grpccall

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/readretry/readretry/retry/call"
)

// PushbackKey is the trailer in which a server asks the client to wait
// before its next attempt, in milliseconds, or not to retry at all (a
// negative value), as in gRPC's retry design.
const PushbackKey = "grpc-retry-pushback-ms"

// maxPushback bounds the pushback read from a trailer before it becomes a
// time.Duration (the policy caps the wait far lower).
const maxPushback = 1 << 40 // ms, about 35 years

// CodeClass returns the class of a gRPC status code (SPEC B2): Unavailable
// is Network; DeadlineExceeded is Timeout; ResourceExhausted and Aborted are
// ServiceQuality; InvalidArgument, NotFound, AlreadyExists,
// PermissionDenied, FailedPrecondition, OutOfRange, Unimplemented and
// Unauthenticated are Business; OK, Canceled, Unknown, Internal and
// DataLoss are Unknown (retried only if the policy lists the code).
func CodeClass(c codes.Code) call.Class {
	switch c {
	case codes.Unavailable:
		return call.Network
	case codes.DeadlineExceeded:
		return call.Timeout
	case codes.ResourceExhausted, codes.Aborted:
		return call.ServiceQuality
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated:
		return call.Business
	}
	return call.Unknown
}

// attemptError is a failed attempt as the policy judges it: the error the
// invoker returned, its status, its class, and the server's pushback. It
// never reaches the caller as the final error: the interceptors return the
// invoker's error itself.
type attemptError struct {
	err      error
	st       *status.Status
	class    call.Class
	pushback time.Duration
}

func (e *attemptError) Error() string              { return e.err.Error() }
func (e *attemptError) Unwrap() error              { return e.err }
func (e *attemptError) GRPCStatus() *status.Status { return e.st }
func (e *attemptError) RetryClass() call.Class     { return e.class }
func (e *attemptError) RetryCode() int             { return int(e.st.Code()) }
func (e *attemptError) RetryAfter() time.Duration  { return e.pushback }

// judge wraps the error of a failed attempt for the policy. trailer is the
// attempt's trailer metadata (nil if none arrived).
func judge(err error, trailer metadata.MD) error {
	st, ok := status.FromError(err)
	if !ok {
		return err // not a status: call.Classify judges it
	}
	e := &attemptError{err: err, st: st, class: CodeClass(st.Code())}
	if v := trailer.Get(PushbackKey); len(v) > 0 {
		ms, perr := strconv.ParseInt(v[0], 10, 64)
		switch {
		case len(v) > 1, perr != nil && !isDigits(v[0]), ms < 0:
			// Several values (which one would the server mean?),
			// malformed or negative: the server asks for no retry
			// (SPEC M2 round 3, as grpc-go reads it).
			e.class = call.ServiceQuality
		case perr != nil || ms > maxPushback: // digits too many for int64
			e.pushback = maxPushback * time.Millisecond
		default:
			e.pushback = time.Duration(ms) * time.Millisecond
		}
	}
	return e
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// final turns the error a call ends with into what the caller gets: the
// last attempt's error as the invoker returned it, or, for a context that
// ended, a status error wrapping the *call.ContextError.
func final(err error) error {
	switch e := err.(type) {
	case *attemptError:
		return e.err
	case *call.ContextError:
		return &contextError{e}
	}
	return err
}

// contextError is a *call.ContextError with the gRPC status of its context
// error (DeadlineExceeded or Canceled), so that status.Code reports it.
type contextError struct {
	*call.ContextError
}

func (e *contextError) Unwrap() error { return e.ContextError }

func (e *contextError) GRPCStatus() *status.Status {
	return status.New(status.FromContextError(e.Err).Code(), e.Error())
}

// contextStatus is the error of a call whose context was done before its
// first attempt: the status gRPC itself returns then.
func contextStatus(err error) error {
	return status.FromContextError(err).Err()
}

// carrier adapts gRPC metadata to call.Carrier: metadata keys are lower
// case, which metadata.MD's methods take care of.
type carrier metadata.MD

func (c carrier) Get(k string) string {
	if v := metadata.MD(c).Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c carrier) Set(k, v string) { metadata.MD(c).Set(k, v) }

// outgoing returns ctx with outgoing metadata carrying exactly ctx's flags
// for an attempt numbered attempt: the caller's metadata is copied, never
// changed, and a retry flag ctx does not hold is removed.
func outgoing(ctx context.Context, attempt int) context.Context {
	if metadata.ValueFromOutgoingContext(ctx, attemptKey) == nil && metadata.ValueFromOutgoingContext(ctx, flagKey) == nil {
		// The common case, none of the keys set by the caller: append
		// them, which copies nothing.
		n := strconv.Itoa(attempt)
		if f, _ := call.FlagsFrom(ctx); f.Flag != "" {
			return metadata.AppendToOutgoingContext(ctx, attemptKey, n, flagKey, f.Flag)
		}
		return metadata.AppendToOutgoingContext(ctx, attemptKey, n)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md.Delete(flagKey) // FromOutgoingContext returned a copy
	call.InjectAttempt(ctx, carrier(md), attempt)
	return metadata.NewOutgoingContext(ctx, md)
}

// The metadata keys of the flags: call's header names in lower case, as
// gRPC sends every key.
var (
	attemptKey = strings.ToLower(call.HeaderAttempt)
	flagKey    = strings.ToLower(call.HeaderFlag)
)

// incoming returns ctx with the flags of the incoming call read from its
// metadata.
func incoming(ctx context.Context, opts []call.ServerOption) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return call.Extract(ctx, carrier(md), opts...)
}
