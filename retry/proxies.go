package retry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Proxies that no route names any more are released (SPEC R22: nothing
// outlives its use). Every deploy of a database's proxies moves them to new
// endpoints; a client that kept each endpoint it was ever told about would
// keep a connection, two goroutines and a ring per endpoint in its
// transport, and would run out of ProxyIDs after 65,535 of them — and then
// refuse every route update with a new endpoint, routing to dead proxies.
//
// The mechanism, one owner per fact:
//
//   - The registry (proxyRegistry, under its own lock) counts for each
//     ProxyID the zones whose current route names it. ApplyRoute and
//     RemoveZone move the counts; a proxy whose count falls to 0 is
//     retiring.
//   - Each proxy has an in-flight count (proxyInfo.load): attempts sent to it
//     by requests that have not ended. A request counts each attempt when it
//     records it (flight.addTried) and gives them all back when its context
//     is deleted (flight.untry). The count is an atomic on the proxy's own
//     cache line, touched once per attempt, next to the transport's own
//     per-proxy work.
//   - The poller (advance) releases a retiring proxy once its in-flight
//     count is 0: Transport.Release, then its ID goes to the back of a free
//     list for a later new endpoint.
//
// Why nothing sends to a released proxy: a sender chooses a proxy from the
// zone's route and counts its attempt while it holds Client.closeMu for
// reading. ApplyRoute stores the new route first, then takes closeMu for
// writing once (a barrier: every Send that may have seen the old route has
// counted its attempt or failed), and only then hands the retiring proxies
// to the poller. Re-sends run on the poller itself, which releases. Why a
// late answer from a released proxy is never taken as the new endpoint's:
// Transport.Release is a fence (the transport drops what the old endpoint
// sent), and sequence numbers are never reused within a zone, so a frame
// that slipped through names a request that has ended.

// proxyInfo is what the client knows of one proxy endpoint. The slice of
// them (Client.proxies) is copied on write, so readers take no lock; a
// released ID keeps its last endpoint until the ID is given out again.
type proxyInfo struct {
	p    Proxy
	host uint16     // client-wide host number, for SPEC R13
	load *proxyLoad // attempts in flight; a new one each time the ID is given out
}

// proxyLoad is a proxy's count of attempts in flight and its health (SPEC
// §7 R13 round 3, health.go), alone on their cache line so that senders to
// different proxies do not share one. A new one is made each time the ID is
// given out, so a reused ID starts healthy with nothing in flight.
type proxyLoad struct {
	attempts atomic.Int64
	health   proxyHealth
	_        [32]byte
}

// proxySlot is the registry's state of one ProxyID.
type proxySlot struct {
	routes   int32 // zones whose current route names the proxy
	used     bool  // the ID is given out (routed or draining)
	retiring bool  // on the retiring list
}

// hostRef numbers a host for SPEC R13 while proxies on it are known.
type hostRef struct {
	id   uint16
	refs int
}

// proxyRegistry maps endpoints to ProxyIDs and tracks which IDs are in use.
// Its lock is taken by ApplyRoute and RemoveZone (under Client.mu) and by the
// poller (reapProxies), and is never held while taking another.
type proxyRegistry struct {
	mu        sync.Mutex
	byAddr    map[Proxy]ProxyID
	slots     []proxySlot // by ProxyID; slot 0 is never given out
	free      []ProxyID   // released IDs, oldest first
	live      int         // IDs given out and not yet released
	hosts     map[string]*hostRef
	freeHosts []uint16
	nextHost  int
	retiring  []ProxyID    // IDs no route names, waiting for their attempts to end
	pending   atomic.Int32 // len(retiring), read by the poller without the lock
}

func (r *proxyRegistry) init() {
	r.byAddr = make(map[Proxy]ProxyID)
	r.hosts = make(map[string]*hostRef)
	r.slots = make([]proxySlot, 1)
}

// routeProxies gives each proxy of unique (no duplicates) its ProxyID,
// opening the new ones in the transport, counts the new route of z and
// uncounts its old one, and returns the new route and the IDs that no
// route names any more. An update that would take the client past
// MaxProxies endpoints changes nothing. c.mu is held.
func (c *Client) routeProxies(old *route, unique []Proxy) (*route, []ProxyID, error) {
	r := &c.reg
	r.mu.Lock()
	fresh := 0
	for _, p := range unique {
		if _, ok := r.byAddr[p]; !ok {
			fresh++
		}
	}
	if r.live+fresh > MaxProxies {
		r.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: more than %d proxy endpoints in use or draining", ErrInvalidConfig, MaxProxies)
	}
	infos := *c.proxies.Load()
	if fresh > 0 {
		infos = append(make([]proxyInfo, 0, len(infos)+fresh), infos...)
	}
	rt := &route{ids: make([]ProxyID, 0, len(unique)), hosts: make([]uint16, 0, len(unique))}
	var opened []ProxyID
	for _, p := range unique {
		id, ok := r.byAddr[p]
		if !ok {
			id = r.take()
			for int(id) >= len(infos) {
				infos = append(infos, proxyInfo{})
			}
			infos[id] = proxyInfo{p: p, host: r.hostOf(p.Host), load: &proxyLoad{}}
			r.byAddr[p] = id
			opened = append(opened, id)
		}
		r.slots[id].routes++
		rt.ids = append(rt.ids, id)
		rt.hosts = append(rt.hosts, infos[id].host)
	}
	retired := r.uncount(old)
	r.mu.Unlock()
	if fresh > 0 {
		c.proxies.Store(&infos)
	}
	// Open under c.mu, before the route is stored: an ID is opened before any
	// sender can choose it, and after the poller's Release of its last use.
	// Transport.Open never waits on the network (SPEC R22).
	for _, id := range opened {
		p := infos[id].p
		if err := c.tr.Open(id, p); err != nil {
			c.log.LogAttrs(context.Background(), slog.LevelWarn, MsgOpenProxyFailed,
				slog.String("proxy", p.String()), slog.String("error", err.Error()))
		}
	}
	return rt, retired, nil
}

// uncount takes a route's proxies off their counts and returns those no
// route names any more; r.mu is held.
func (r *proxyRegistry) uncount(old *route) []ProxyID {
	var retired []ProxyID
	if old == nil {
		return nil
	}
	for _, id := range old.ids {
		if s := &r.slots[id]; s.routes > 0 {
			s.routes--
			if s.routes == 0 {
				retired = append(retired, id)
			}
		}
	}
	return retired
}

// take gives out an ID: the longest released one, else a new one; the
// caller has checked r.live against MaxProxies. r.mu is held.
func (r *proxyRegistry) take() ProxyID {
	var id ProxyID
	if len(r.free) > 0 {
		id = r.free[0]
		r.free = r.free[1:]
	} else {
		id = ProxyID(len(r.slots))
		r.slots = append(r.slots, proxySlot{})
	}
	r.slots[id] = proxySlot{used: true}
	r.live++
	return id
}

// hostOf returns host's number, counting one more proxy on it; r.mu is held.
func (r *proxyRegistry) hostOf(host string) uint16 {
	if h, ok := r.hosts[host]; ok {
		h.refs++
		return h.id
	}
	var id uint16
	if n := len(r.freeHosts); n > 0 {
		id, r.freeHosts = r.freeHosts[n-1], r.freeHosts[:n-1]
	} else {
		id = uint16(r.nextHost) // at most MaxProxies hosts are known at once
		r.nextHost++
	}
	r.hosts[host] = &hostRef{id: id, refs: 1}
	return id
}

// unrefHost counts one proxy less on host; r.mu is held.
func (r *proxyRegistry) unrefHost(host string) {
	h, ok := r.hosts[host]
	if !ok {
		return
	}
	if h.refs--; h.refs == 0 {
		delete(r.hosts, host)
		r.freeHosts = append(r.freeHosts, h.id)
	}
}

// retire hands proxies that no route names any more to the poller, which
// releases each once its attempts in flight have ended. It first waits for
// every Send under way (closeMu): one that chose such a proxy from the old
// route has then counted its attempt. Called after the new routes are
// stored, under c.mu.
func (c *Client) retire(ids []ProxyID) {
	if len(ids) == 0 {
		return
	}
	c.sendBarrier()
	r := &c.reg
	r.mu.Lock()
	for _, id := range ids {
		if s := &r.slots[id]; s.used && s.routes == 0 && !s.retiring {
			s.retiring = true
			r.retiring = append(r.retiring, id)
		}
	}
	r.pending.Store(int32(len(r.retiring)))
	r.mu.Unlock()
}

// reapProxies releases the retiring proxies whose attempts have all ended
// (poller only): their IDs go to the free list after Transport.Release. A
// proxy a route names again meanwhile leaves the list unreleased.
func (c *Client) reapProxies() {
	r := &c.reg
	if r.pending.Load() == 0 {
		return
	}
	infos := *c.proxies.Load()
	var done [16]ProxyID
	released := done[:0]
	r.mu.Lock()
	kept := r.retiring[:0]
	for _, id := range r.retiring {
		s := &r.slots[id]
		switch {
		case s.routes > 0:
			s.retiring = false // named again: stays open under its ID
		case infos[id].load.attempts.Load() > 0:
			kept = append(kept, id)
		default:
			*s = proxySlot{}
			c.forget(&infos[id].load.health)
			p := infos[id].p
			if r.byAddr[p] == id {
				delete(r.byAddr, p)
			}
			r.unrefHost(p.Host)
			released = append(released, id)
		}
	}
	clear(r.retiring[len(kept):])
	r.retiring = kept
	r.pending.Store(int32(len(kept)))
	r.mu.Unlock()
	if len(released) == 0 {
		return
	}
	for _, id := range released {
		c.tr.Release(id)
	}
	r.mu.Lock()
	r.free = append(r.free, released...)
	r.live -= len(released)
	r.mu.Unlock()
}

// ProxyStats are the client's counts of proxy endpoints (SPEC R22), for leak
// checks and dashboards.
type ProxyStats struct {
	// Live counts the endpoints the client knows now: named by a route of
	// some zone, or draining. At most MaxProxies.
	Live int
	// Draining counts endpoints no route names whose attempts in flight
	// have not all ended yet; they are released (Transport.Release) once
	// they have.
	Draining int
	// Free counts released ProxyIDs waiting to be given to a new endpoint.
	Free int
}

// ProxyStats returns the client's proxy counts. It takes a short lock.
func (c *Client) ProxyStats() ProxyStats {
	r := &c.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	return ProxyStats{Live: r.live, Draining: len(r.retiring), Free: len(r.free)}
}

// sendBarrier returns once every Send under way has returned: each holds
// closeMu for reading from its zone lookup to its last attempt.
func (c *Client) sendBarrier() {
	c.closeMu.Lock()
	//lint:ignore SA2001 an empty critical section is the barrier
	c.closeMu.Unlock()
}

// loadOf returns the in-flight count and health of a proxy the client
// knows.
func (c *Client) loadOf(id ProxyID) *proxyLoad {
	return (*c.proxies.Load())[id].load
}

// untry gives back the request's attempts to its proxies' in-flight counts;
// it is called once, when the context is deleted.
func (f *flight) untry() {
	s := f.scratch()
	for i := range int(f.m.ntried) {
		f.c.loadOf(s.tried(i)).attempts.Add(-1)
	}
	f.m.ntried = 0
}
