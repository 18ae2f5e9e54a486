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
// zones and route updates for the Client's lifetime. IDs start at 1 and are
// never reused; a Client knows at most MaxProxies endpoints.
type ProxyID uint16

// MaxProxies is the number of distinct proxy endpoints one Client can know.
const MaxProxies = 1<<16 - 1

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

// Transport carries frames between a Client and its proxies. The engine
// never blocks on it and starts no goroutine for it: Send should hand the
// frame to a connection's buffer or fail, and Recv should return a frame
// already received or nothing (SPEC R14's poll model). Implementations:
// transport/tcp for real connections, retrytest for tests.
//
// Concurrency: Open and Available may be called from any goroutine; Send
// from many goroutines at once (every caller of Client.Send, and the
// poller for re-sends); Recv only from the goroutine inside
// Client.RecvResponse, one call at a time.
type Transport interface {
	// Open tells the transport about a proxy the first time any zone's route
	// names it; the transport may connect now or lazily. An error is logged
	// and the proxy counts as unavailable until Available says otherwise.
	Open(id ProxyID, p Proxy) error
	// Send writes one frame to the proxy. frame is only read, and not
	// retained after Send returns: copy it if it is queued. A non-nil error
	// means the frame was not sent (ErrUnavailable or the connection's).
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
