package retry

import (
	"errors"
	"net"
	"strconv"
	"time"
)

// Proxy is one endpoint that serves a zone (SPEC §1 vocabulary). Host is a
// host name or address and groups proxies for SPEC R13: a re-send prefers a
// host not tried yet, then an untried port on a tried host.
type Proxy struct {
	Host string // host name or address; proxies with the same Host share a machine (R13)
	Port uint16 // TCP port
}

// String returns "host:port".
func (p Proxy) String() string { return net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port))) }

// ProxyID is the Client's number for one proxy endpoint, the same across
// zones and route updates while any route names the endpoint or any attempt
// sent to it is in flight. IDs start at 1. Once no route of any zone names
// the endpoint and its last attempt has ended, the Client releases it
// (Transport.Release) and may give its ID to another endpoint later (SPEC
// R22: a client that runs for months through thousands of redeploys keeps
// only the proxies it uses). A Client knows at most MaxProxies endpoints at
// once, those still draining included.
type ProxyID uint16

// Bounds on proxies (SPEC R22).
const (
	// MaxProxies is the number of proxy endpoints one Client can know at
	// once: named by a route, or no longer named but with attempts in
	// flight. A route update that would need more is refused whole with
	// ErrInvalidConfig.
	MaxProxies = 1<<16 - 1
	// MaxRouteProxies is the most entries (duplicates included) one route
	// update may list. A longer list is refused whole with ErrInvalidConfig
	// before anything is done: each new endpoint costs its transport a
	// connection and buffers (transport/tcp: two goroutines and a 256 KiB
	// ring), and a real zone has tens of proxies, not thousands.
	MaxRouteProxies = 1024
)

// Waiter is a Transport that can block until a frame arrives. Wait returns
// when a frame is waiting for Recv (true) or timeout has passed (false). A
// PollSelf client's driver calls it between polls so that answers are handled when they
// arrive, not at the next tick. Wait is called from one goroutine at a time
// but may overlap with Recv on another (a Do caller polling). transport/tcp
// implements it.
type Waiter interface {
	Wait(timeout time.Duration) bool
}

// ErrUnavailable is what a Transport returns from Send when it has no
// usable connection to the proxy; the engine then moves the request to the
// next proxy at once.
var ErrUnavailable = errors.New("retry: proxy unavailable")

// ErrRequestRefused is what a Transport's Send error wraps when the request
// itself is unacceptable to the transport, whatever the proxy: a write to a
// transport that carries only reads, a command it cannot translate, a frame
// it cannot parse. The engine then tries no other proxy, does not hold it
// against the proxy (SPEC §7 R13 round 3: the proxy stays healthy), and
// Send and Do return the transport's error as it is, so that errors.Is
// matches the transport's own sentinel too (SPEC R13, issue 29). A re-send
// the transport refuses this way is not sent anywhere else: the request
// waits for the attempts already out.
var ErrRequestRefused = errors.New("retry: request refused by the transport")

// ProxyErrorer is a Transport that can say why a proxy cannot take a frame
// now. When no proxy of a zone takes a request, the engine asks it for
// each of the zone's proxies and puts the answers in the *NoProxyError that
// Send and Do return, so that a client pointed at a wrong address says so
// ("dial tcp 127.0.0.1:1: connect: connection refused") instead of a bare
// ErrNoProxy (SPEC R13, issue 29). It is asked on that error path only,
// never for a request that found a proxy.
//
// ProxyError returns nil if the proxy is available or the transport does
// not know why it is not, and otherwise the error that keeps it down: the
// last failed connection attempt or the error that broke the connection,
// as the network returned it (errors.As finds a *net.OpError in it), or
// the transport's own reason (write queue full, not yet connected,
// transport closed). It may be called from any goroutine and must not
// block on the network. transport/tcp, transport/resp and retrytest
// implement it.
type ProxyErrorer interface {
	ProxyError(id ProxyID) error
}

// Transport carries frames between a Client and its proxies. The engine
// never blocks on it and starts no goroutine for it: Send should hand the
// frame to a connection's buffer or fail, and Recv should return a frame
// already received or nothing (SPEC R14's poll model). Implementations:
// transport/tcp for real connections, retrytest for tests.
//
// Concurrency: Open and Available may be called from any goroutine; Send
// from many goroutines at once (every caller of Client.Send, and the
// poller for re-sends); Recv and Release only from the goroutine inside
// Client.RecvResponse, one call at a time.
//
// Lifecycle of an ID (SPEC R22): Open(id, p), then any number of Send and
// Available calls, then Release(id) once no route names p and no attempt
// sent to it is in flight; after Release the engine may Open the same id
// for another endpoint.
type Transport interface {
	// Open tells the transport about a proxy when a route names it and the
	// id is not open; the transport may connect now or lazily but must not
	// wait on the network (the Client calls it inside ApplyRoute, which never
	// waits on a dial). An error is logged and the proxy counts as
	// unavailable until Available says otherwise.
	Open(id ProxyID, p Proxy) error
	// Release tells the transport that the engine is done with the proxy:
	// no route names it and no attempt sent to it is in flight. The
	// transport closes its connection and frees what it holds for it
	// (goroutines, buffers) without waiting on the network. It is a fence:
	// once Release returns, Recv never returns a frame from that proxy under
	// id (frames received and not yet returned are dropped), and Send and
	// Available treat id as unknown until the engine opens it again, maybe
	// for another endpoint. A late answer from the old endpoint can so never
	// pass for one from the new.
	Release(id ProxyID)
	// Send writes one frame to the proxy. frame is only read, and not
	// retained after Send returns: copy it if it is queued. A non-nil error
	// means the frame was not sent. Its kind decides what the engine does
	// next: an error wrapping ErrRequestRefused says the request is
	// unacceptable whatever the proxy, and the engine returns it to the
	// caller as it is; any other (ErrUnavailable, the connection's) says the
	// proxy cannot take it, and the engine moves on to the next proxy.
	Send(id ProxyID, frame []byte) error
	// Recv returns one received response frame and the proxy it came from,
	// or ok == false if none is waiting. It must not block. The frame stays
	// valid, unchanged, until the next call to Recv.
	Recv() (frame []byte, from ProxyID, ok bool)
	// Available reports whether Send to the proxy can currently succeed
	// (connected, not known to be down). The engine skips unavailable
	// proxies when it chooses one (SPEC R13).
	Available(id ProxyID) bool
}
