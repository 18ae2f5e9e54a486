package retry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Result codes a Response can carry besides the proxy's own. The values are
// the seed SDK's (TcapErrCode), so an SDK built on this package can pass
// them through unchanged.
const (
	// ResultOK is success.
	ResultOK int32 = 0
	// ResultReadRetryTimeout is API_ERR_READ_RETRY_TIMEOUT (-19219): a read
	// with read retry on got no good answer before its last segment ended
	// (SPEC R9). The response still carries the request's async ID, sequence
	// number and user buffer.
	ResultReadRetryTimeout int32 = -19219
	// ResultWaitRspTimeout is API_ERR_WAIT_RSP_TIMEOUT (-16659): a request
	// without a read retry context (a write, a read with retry off or over
	// the cap) got no final answer within Config.WaitTimeout. It is distinct
	// from ResultReadRetryTimeout so that callers can tell the two apart
	// (SPEC R9).
	ResultWaitRspTimeout int32 = -16659
	// ResultNoProxy is API_ERR_PROXY_CONNECT_FAILED (-18195): no proxy of
	// the zone is available. Send reports it as ErrNoProxy (which carries
	// this code) and keeps nothing.
	ResultNoProxy int32 = -18195
)

// Errors returned by Client methods. Each is a sentinel for errors.Is; a
// call that returns one has changed nothing.
var (
	// ErrNoProxy: Send found no available proxy in the zone (every proxy
	// down, or the route empty). Its Code is ResultNoProxy. Send and Do
	// return it inside a *NoProxyError that says which proxies were
	// refused and why; errors.Is(err, ErrNoProxy) holds for it.
	ErrNoProxy = &Error{Code: ResultNoProxy, msg: "retry: no proxy available in the zone"}
	// ErrUnknownZone: Send or Stats for a zone no route was applied to (or
	// one RemoveZone removed). The error returned wraps it and names the
	// zone, so that a log line says which (unknownZone).
	ErrUnknownZone = errors.New("retry: unknown zone")
	// ErrTooManyRequests: the zone already tracks Config.MaxWaitingPerZone
	// requests without a read retry context plus its context cap; the
	// request is not sent (back-pressure instead of unbounded memory).
	ErrTooManyRequests = errors.New("retry: too many requests in flight in the zone")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("retry: client closed")
	// ErrBadRequest wraps what is wrong with a Request passed to Send (its
	// command, its keys, its size); the wire error is wrapped too.
	ErrBadRequest = errors.New("retry: bad request")
	// ErrInvalidConfig wraps what is wrong with a Config, a budget or a route.
	ErrInvalidConfig = errors.New("retry: invalid config")
	// ErrTooManyZones: ApplyRoute for a new zone when the client serves
	// Config.MaxZones zones already (SPEC R22). It wraps ErrInvalidConfig.
	ErrTooManyZones = fmt.Errorf("%w: too many zones", ErrInvalidConfig)
	// ErrReadRetryTimeout is what Do returns for ResultReadRetryTimeout
	// (-19219, SPEC R9): read retry ran out of retries and budget.
	ErrReadRetryTimeout = &Error{Code: ResultReadRetryTimeout, msg: "retry: read retry exhausted (API_ERR_READ_RETRY_TIMEOUT)"}
	// ErrWaitTimeout is what Do returns for ResultWaitRspTimeout (-16659):
	// a request without read retry got no final answer in time.
	ErrWaitTimeout = &Error{Code: ResultWaitRspTimeout, msg: "retry: no answer within the wait timeout (API_ERR_WAIT_RSP_TIMEOUT)"}
	// ErrPoller: Send on a client made with Config.Poller = PollSelf and no
	// Config.OnResponse, where its responses would reach no one (SPEC R20).
	// It depends on the Config alone, never on earlier calls.
	ErrPoller = errors.New("retry: the client's poller does not allow this call")
)

// Error is an error that carries one of the seed's result codes, for SDKs
// that report codes rather than Go errors. Use errors.As to get it.
type Error struct {
	Code int32 // the seed SDK's result code, e.g. ResultNoProxy
	msg  string
}

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrReadRetryTimeout) holds for every error carrying
// -19219.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// unknownZone returns ErrUnknownZone naming z: an SDK that logs the error
// shows which zone it asked for, the first thing to check when a client is
// pointed at the wrong configuration. It allocates, on the error path only.
func unknownZone(z Zone) error {
	return fmt.Errorf("%w: app_id %d, zone_id %d (no route applied)", ErrUnknownZone, z.AppID, z.ZoneID)
}

// NoProxyError is the error Send and Do return when no proxy of the zone
// took the request (SPEC R13, issue 29): every proxy of its route was
// unavailable or refused the frame, or the route names none. It says why,
// so that a client pointed at a wrong address tells so in its log: the
// message names the zone and each proxy with its cause, e.g.
//
//	retry: no proxy available in the zone: app_id 1, zone_id 2: 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused
//
// errors.Is(err, ErrNoProxy) holds, errors.As(err, **Error) gives
// ErrNoProxy with ResultNoProxy, and errors.Is and errors.As reach every
// cause too (errors.As(err, **net.OpError) finds a dial error). It is made
// on the error path only; a call that returns it changed nothing.
type NoProxyError struct {
	// Zone is the zone the request was for.
	Zone Zone
	// Proxies is the number of proxies the zone's route names (0: none).
	Proxies int
	// Causes says, for the first MaxNoProxyCauses proxies of the route in
	// route order, why each could not take the request: the error its
	// Transport.Send returned, or the transport's ProxyError for it, or
	// ErrUnavailable when the transport says nothing more. Never nil
	// errors.
	Causes []ProxyCause
}

// MaxNoProxyCauses bounds NoProxyError.Causes: a zone of many proxies down
// for one reason needs a few of them in a log line, not all.
const MaxNoProxyCauses = 4

// ProxyCause is why one proxy could not take a request.
type ProxyCause struct {
	Proxy Proxy
	Err   error
}

// Error names the zone, and each listed proxy with its cause.
func (e *NoProxyError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNoProxy.Error())
	b.WriteString(": app_id ")
	b.WriteString(strconv.FormatUint(uint64(e.Zone.AppID), 10))
	b.WriteString(", zone_id ")
	b.WriteString(strconv.FormatUint(uint64(e.Zone.ZoneID), 10))
	if e.Proxies == 0 {
		b.WriteString(": the route names no proxy")
		return b.String()
	}
	for i, c := range e.Causes {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(c.Proxy.String())
		b.WriteString(": ")
		b.WriteString(c.Err.Error())
	}
	if n := e.Proxies - len(e.Causes); n > 0 {
		b.WriteString("; and ")
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" more")
	}
	return b.String()
}

// Unwrap returns ErrNoProxy followed by each cause, for errors.Is and
// errors.As.
func (e *NoProxyError) Unwrap() []error {
	out := make([]error, 0, 1+len(e.Causes))
	out = append(out, ErrNoProxy)
	for _, c := range e.Causes {
		out = append(out, c.Err)
	}
	return out
}
