package sim

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/readretry/readretry/retry"
)

// FleetConfig sets up a Fleet.
type FleetConfig struct {
	// Hosts is the number of logical hosts, Ports the proxies on each:
	// Hosts × Ports proxies in all. Both at least 1.
	Hosts, Ports int
	// Data is the dataset every proxy serves; nil means NewDataset(Seed).
	Data *Dataset
	// Profile is every proxy's starting profile.
	Profile Profile
	// Seed makes the proxies' fault draws reproducible.
	Seed uint64
}

// BasePort is the logical port of a host's first proxy: proxy j of a host
// is labelled BasePort+j, whatever real port it listens on.
const BasePort = 9000

// maxFleet bounds Hosts × Ports.
const maxFleet = 1024

// Fleet is the proxies of one zone, spread over logical hosts: proxy (h, j)
// is labelled {Host: "host-<h+1>", Port: BasePort+j} and listens on its
// own ephemeral port of 127.0.0.1. Resolve maps labels to real addresses
// for transport/tcp; the host labels are what SPEC R13 groups re-sends by.
type Fleet struct {
	hosts, ports int
	data         *Dataset
	seed         uint64

	// mu guards the proxies: Redeploy replaces them while transports
	// resolve labels and runs change profiles.
	mu      sync.RWMutex
	proxies []*Proxy // host-major: index h*ports+j
	byLabel map[retry.Proxy]*Proxy
	gen     int      // redeploys so far
	prev    []*Proxy // the generation before, still serving its last answers
}

// Errors of the fleet.
var (
	// ErrBadFleet wraps what is wrong with a FleetConfig or a Selector.
	ErrBadFleet = errors.New("sim: bad fleet")
	// ErrUnknownLabel: Resolve for a label the fleet does not have.
	ErrUnknownLabel = errors.New("sim: unknown proxy label")
)

// StartFleet starts cfg.Hosts × cfg.Ports proxies. On error every proxy
// started so far is closed. Errors wrap ErrBadFleet (sizes out of range),
// ErrBadProfile, or the listener's.
func StartFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.Hosts < 1 || cfg.Ports < 1 || cfg.Hosts*cfg.Ports > maxFleet || cfg.Ports > 1<<15 {
		return nil, fmt.Errorf("%w: %d hosts × %d ports (want at least 1 × 1, at most %d proxies)", ErrBadFleet, cfg.Hosts, cfg.Ports, maxFleet)
	}
	if cfg.Data == nil {
		cfg.Data = NewDataset(cfg.Seed)
	}
	f := &Fleet{hosts: cfg.Hosts, ports: cfg.Ports, byLabel: map[retry.Proxy]*Proxy{}, data: cfg.Data, seed: cfg.Seed}
	for h := 0; h < cfg.Hosts; h++ {
		for j := 0; j < cfg.Ports; j++ {
			label := fleetLabel(h, j)
			p, err := StartProxy(label, cfg.Data, cfg.Profile, splitmix(cfg.Seed^uint64(h*cfg.Ports+j+1)))
			if err != nil {
				_ = f.Close()
				return nil, err
			}
			f.proxies = append(f.proxies, p)
			f.byLabel[label] = p
		}
	}
	return f, nil
}

// fleetLabel is the label of proxy j of host h (both 0-based).
func fleetLabel(h, j int) retry.Proxy {
	return retry.Proxy{Host: "host-" + strconv.Itoa(h+1), Port: uint16(BasePort + j)}
}

// Redeploy moves every proxy to a new endpoint, as a deploy of the
// database's proxies does: a new set is started (same profiles, labels on
// new hosts "host-H-gN" so that every endpoint is one the clients never
// saw), Labels returns the new set from then on, and the set before the
// last is stopped. The last set keeps serving until the next Redeploy, so
// that requests sent to it before the route moved get their answers. It
// returns the number of redeploys so far.
func (f *Fleet) Redeploy() (int, error) {
	f.mu.RLock()
	old, gen := f.proxies, f.gen+1
	f.mu.RUnlock()
	fresh := make([]*Proxy, 0, len(old))
	for i, op := range old {
		h, j := i/f.ports, i%f.ports
		label := retry.Proxy{Host: "host-" + strconv.Itoa(h+1) + "-g" + strconv.Itoa(gen), Port: uint16(BasePort + j)}
		p, err := StartProxy(label, f.data, op.Profile(), splitmix(f.seed^uint64(gen)<<20^uint64(i+1)))
		if err != nil {
			for _, q := range fresh {
				_ = q.Close()
			}
			return f.gen, err
		}
		fresh = append(fresh, p)
	}
	f.mu.Lock()
	stop := f.prev
	f.prev, f.proxies, f.gen = old, fresh, gen
	for _, p := range fresh {
		f.byLabel[p.label] = p
	}
	for _, p := range stop {
		delete(f.byLabel, p.label)
	}
	f.mu.Unlock()
	for _, p := range stop {
		_ = p.Close()
	}
	return gen, nil
}

// Hosts returns the number of hosts; Ports the proxies per host.
func (f *Fleet) Hosts() int { return f.hosts }

// Ports returns the number of proxies per host.
func (f *Fleet) Ports() int { return f.ports }

// Data returns the dataset the proxies serve.
func (f *Fleet) Data() *Dataset { return f.data }

// Labels returns every proxy's label, host by host: the route a client
// applies (retry.Client.ApplyRoute). The slice is new.
func (f *Fleet) Labels() []retry.Proxy {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]retry.Proxy, len(f.proxies))
	for i, p := range f.proxies {
		out[i] = p.label
	}
	return out
}

// Proxy returns proxy j of host h (both 0-based), or nil.
func (f *Fleet) Proxy(h, j int) *Proxy {
	if h < 0 || h >= f.hosts || j < 0 || j >= f.ports {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.proxies[h*f.ports+j]
}

// Resolve returns the real address of a labelled proxy, for
// tcp.Config.Resolve; ErrUnknownLabel for a label not in the fleet.
func (f *Fleet) Resolve(label retry.Proxy) (string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p := f.byLabel[label]; p != nil {
		return p.addr, nil
	}
	return "", fmt.Errorf("%w: %v", ErrUnknownLabel, label)
}

// Selector picks proxies of a fleet: Host and Port are 0-based indexes, -1
// meaning every host or every port. The zero Selector is proxy 0 of host 0.
type Selector struct {
	Host, Port int // 0-based indexes; -1 = all
}

// All selects every proxy of the fleet.
var All = Selector{Host: -1, Port: -1}

// HostSel selects every proxy of host h (0-based).
func HostSel(h int) Selector { return Selector{Host: h, Port: -1} }

// Set gives every selected proxy profile p. Errors wrap ErrBadFleet for a
// selector outside the fleet (nothing changes), or are the first proxy's
// SetProfile error (proxies before it have changed).
func (f *Fleet) Set(sel Selector, p Profile) error {
	if sel.Host < -1 || sel.Host >= f.hosts || sel.Port < -1 || sel.Port >= f.ports {
		return fmt.Errorf("%w: selector %+v outside %d hosts × %d ports", ErrBadFleet, sel, f.hosts, f.ports)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for h := 0; h < f.hosts; h++ {
		for j := 0; j < f.ports; j++ {
			if (sel.Host == -1 || sel.Host == h) && (sel.Port == -1 || sel.Port == j) {
				if err := f.proxies[h*f.ports+j].SetProfile(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Stats returns the sum of every proxy's counters.
func (f *Fleet) Stats() ProxyStats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var s ProxyStats
	for _, p := range f.proxies {
		ps := p.Stats()
		s.Connections += ps.Connections
		s.Requests += ps.Requests
		s.Dropped += ps.Dropped
		s.Errors += ps.Errors
		s.Packets += ps.Packets
		s.Cut += ps.Cut
		s.Stalled += ps.Stalled
		s.Duplicated += ps.Duplicated
		s.Closed += ps.Closed
		s.Malformed += ps.Malformed
	}
	return s
}

// Close closes every proxy and waits for their goroutines.
func (f *Fleet) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range append(f.proxies, f.prev...) {
		_ = p.Close()
	}
	f.proxies, f.prev = nil, nil
	return nil
}
