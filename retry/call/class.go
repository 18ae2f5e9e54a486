package call

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
)

// Class is what a failed attempt's error says about retrying it (SPEC B2).
type Class uint8

const (
	// Unknown is an error nobody vouched for. It is not retried, unless the
	// policy lists retryable codes and the error carries one of them (G4).
	Unknown Class = iota
	// Business is a business-logic error: bad argument, insufficient
	// balance, not found. Never retried: the answer would be the same.
	Business
	// ServiceQuality is the downstream protecting itself: throttled,
	// rejected, circuit open. Never retried: a retry feeds the overload.
	ServiceQuality
	// Network is a transport failure: connection reset or refused, lost
	// packet, broken pipe. Retried.
	Network
	// Timeout is an attempt that ran out of time. The request may have been
	// processed, and every service on the path saw the same timeout, so it
	// is retried only at the entrance service (B5).
	Timeout
)

var classNames = [...]string{"unknown", "business", "service-quality", "network", "timeout"}

// String returns the class name in lower case ("network", "timeout", …).
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Classifier maps a failed attempt's error to its class. It must be safe for
// concurrent use and should not allocate: it runs after every failed
// attempt. [Classify] is the default; a custom classifier usually handles
// its own error types and falls back to Classify.
type Classifier func(err error) Class

// Classed is implemented by errors that know their class; [Classify]
// returns the class of the outermost Classed error in the chain.
type Classed interface {
	error
	RetryClass() Class
}

// Coded is implemented by errors that carry a numeric status code — a gRPC
// code, an HTTP status, a business code — so that a policy can list the
// codes it retries (SPEC G4, [WithRetryableCodes]).
type Coded interface {
	error
	RetryCode() int
}

// Sentinel service-quality errors (SPEC B2). A circuit breaker, rate limiter
// or server that sheds load returns or wraps one of these; [Classify] reports
// ServiceQuality for them, so they are never retried.
var (
	ErrThrottled   error = &classError{"call: throttled", ServiceQuality}
	ErrRejected    error = &classError{"call: rejected", ServiceQuality}
	ErrCircuitOpen error = &classError{"call: circuit open", ServiceQuality}
)

type classError struct {
	msg   string
	class Class
}

func (e *classError) Error() string     { return e.msg }
func (e *classError) RetryClass() Class { return e.class }

// Mark returns err with class c attached: [Classify] reports c for it and for
// any error that wraps it. errors.Is and errors.As see through the mark.
// Mark(nil, c) is nil.
func Mark(err error, c Class) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, class: c}
}

type marked struct {
	err   error
	class Class
}

func (e *marked) Error() string     { return e.err.Error() }
func (e *marked) Unwrap() error     { return e.err }
func (e *marked) RetryClass() Class { return e.class }

// WithCode returns err carrying status code code, for policies that list
// retryable codes (SPEC G4). WithCode(nil, code) is nil.
func WithCode(err error, code int) error {
	if err == nil {
		return nil
	}
	return &codedError{err: err, code: code}
}

type codedError struct {
	err  error
	code int
}

func (e *codedError) Error() string  { return e.err.Error() }
func (e *codedError) Unwrap() error  { return e.err }
func (e *codedError) RetryCode() int { return e.code }

// Classify is the default [Classifier] (SPEC B2). In order:
//   - an error in the chain that implements [Classed] decides;
//   - context.DeadlineExceeded, os.ErrDeadlineExceeded, and any net.Error
//     whose Timeout() is true are Timeout;
//   - context.Canceled is Unknown (the caller gave up; nothing to retry);
//   - a net.Error, connection reset / refused / aborted, broken pipe,
//     network or host unreachable, net.ErrClosed, io.ErrUnexpectedEOF and
//     io.EOF (a peer that hung up mid-call) are Network;
//   - everything else is Unknown.
//
// It walks wrapped and joined errors without allocating.
func Classify(err error) Class {
	if err == nil {
		return Unknown
	}
	if c, ok := classOf(err); ok {
		return c
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return Timeout
	}
	if errors.Is(err, context.Canceled) {
		return Unknown
	}
	if c, ok := netClassOf(err); ok {
		return c
	}
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETDOWN), errors.Is(err, syscall.EHOSTDOWN):
		return Network
	case errors.Is(err, syscall.ETIMEDOUT):
		return Timeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Network
	}
	return Unknown
}

// as finds the outermost error of type T in err's tree (depth first, like
// errors.As) without allocating: errors.As needs a pointer to a target,
// which escapes; a type assertion does not.
func as[T any](err error) (T, bool) {
	for err != nil {
		if t, ok := err.(T); ok {
			return t, true
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, inner := range j.Unwrap() {
				if t, ok := as[T](inner); ok {
					return t, true
				}
			}
			break
		}
		err = errors.Unwrap(err)
	}
	var zero T
	return zero, false
}

// classOf finds the outermost Classed error in err's tree.
func classOf(err error) (Class, bool) {
	if c, ok := as[Classed](err); ok {
		return c.RetryClass(), true
	}
	return Unknown, false
}

// netClassOf finds the outermost net.Error in err's tree. A bare
// syscall.Errno has Timeout and Temporary methods too, so it looks like a
// net.Error; it is left to Classify's errno list instead, or a file's
// ENOENT or EACCES would count as a network error and be retried (B2).
func netClassOf(err error) (Class, bool) {
	e, ok := as[net.Error](err)
	if _, errno := e.(syscall.Errno); errno {
		return Unknown, false
	}
	switch {
	case !ok:
		return Unknown, false
	case e.Timeout():
		return Timeout, true
	default:
		return Network, true
	}
}

// codeOf finds the outermost Coded error in err's tree.
func codeOf(err error) (int, bool) {
	if c, ok := as[Coded](err); ok {
		return c.RetryCode(), true
	}
	return 0, false
}
