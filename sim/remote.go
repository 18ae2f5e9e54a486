package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/readretry/readretry/retry"
)

// FleetControl is what a run needs of a zone's proxies: the route to
// apply, the address behind each label, and profile changes while it runs.
// *Fleet (proxies in this process) and *RemoteFleet (proxies in a child
// process) implement it.
type FleetControl interface {
	// Labels returns every proxy's label, host by host (a new slice).
	Labels() []retry.Proxy
	// Resolve returns the real address of a labelled proxy.
	Resolve(label retry.Proxy) (string, error)
	// Set gives every selected proxy profile p.
	Set(sel Selector, p Profile) error
	// Close stops the proxies.
	Close() error
}

var (
	_ FleetControl = (*Fleet)(nil)
	_ FleetControl = (*RemoteFleet)(nil)
)

// ErrRemoteFleet wraps a child process's failure to serve a fleet: it did
// not start, answered with an error, or went away.
var ErrRemoteFleet = errors.New("sim: remote fleet")

// fleetCmd is one line from a RemoteFleet to its child; fleetReply the
// child's answer. Profiles travel in ParseProfile's syntax.
type fleetCmd struct {
	Op      string `json:"op"` // "start", "set", "stats"
	Hosts   int    `json:"hosts,omitempty"`
	Ports   int    `json:"ports,omitempty"`
	Seed    uint64 `json:"seed,omitempty"`
	Host    int    `json:"host,omitempty"`
	Port    int    `json:"port,omitempty"`
	Profile string `json:"profile,omitempty"`
}

type fleetReply struct {
	Err   string      `json:"err,omitempty"`
	Addrs []string    `json:"addrs,omitempty"`
	Extra []string    `json:"extra,omitempty"`
	Stats *ProxyStats `json:"stats,omitempty"`
}

// RemoteFleet is a Fleet run by a child process (ServeFleet on the other
// end of its standard input and output), so that the CPU time and heap of
// the process that holds the clients are the clients' own: the proxies,
// their timers and their pending answers count elsewhere. Its proxies
// serve NewDataset(seed) and carry the same labels as a local Fleet's.
// Methods are safe for concurrent use.
type RemoteFleet struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *json.Decoder
	mu     sync.Mutex // one command at a time
	labels []retry.Proxy
	addrs  map[retry.Proxy]string
	extra  []string
	closed bool
}

// StartRemoteFleet starts cmd (typically the running binary again, with a
// flag that makes it call ServeFleet) and has it start a fleet as cfg says.
// cfg.Data must be nil: the child serves NewDataset(cfg.Seed), which is
// what the workload of a run with that seed asks for. Errors wrap
// ErrRemoteFleet or ErrBadFleet/ErrBadProfile; on error the child is ended.
func StartRemoteFleet(cmd *exec.Cmd, cfg FleetConfig) (*RemoteFleet, error) {
	if cfg.Data != nil {
		return nil, fmt.Errorf("%w: a remote fleet serves NewDataset(seed); Data must be nil", ErrBadFleet)
	}
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRemoteFleet, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRemoteFleet, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrRemoteFleet, cmd.Path, err)
	}
	f := &RemoteFleet{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(out)), addrs: map[retry.Proxy]string{}}
	rep, err := f.do(fleetCmd{Op: "start", Hosts: cfg.Hosts, Ports: cfg.Ports, Seed: cfg.Seed, Profile: cfg.Profile.String()})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if len(rep.Addrs) != cfg.Hosts*cfg.Ports {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %d addresses for %d proxies", ErrRemoteFleet, len(rep.Addrs), cfg.Hosts*cfg.Ports)
	}
	for i, addr := range rep.Addrs {
		label := fleetLabel(i/cfg.Ports, i%cfg.Ports)
		f.labels = append(f.labels, label)
		f.addrs[label] = addr
	}
	f.extra = rep.Extra
	return f, nil
}

// do sends one command and reads its reply.
func (f *RemoteFleet) do(c fleetCmd) (fleetReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rep fleetReply
	if f.closed {
		return rep, fmt.Errorf("%w: closed", ErrRemoteFleet)
	}
	line, err := json.Marshal(c)
	if err != nil {
		return rep, fmt.Errorf("%w: %v", ErrRemoteFleet, err)
	}
	if _, err := f.in.Write(append(line, '\n')); err != nil {
		return rep, fmt.Errorf("%w: child went away: %v", ErrRemoteFleet, err)
	}
	if err := f.out.Decode(&rep); err != nil {
		return rep, fmt.Errorf("%w: child went away: %v", ErrRemoteFleet, err)
	}
	if rep.Err != "" {
		return rep, fmt.Errorf("%w: %s", ErrRemoteFleet, rep.Err)
	}
	return rep, nil
}

// Labels returns every proxy's label, host by host. The slice is new.
func (f *RemoteFleet) Labels() []retry.Proxy { return append([]retry.Proxy(nil), f.labels...) }

// Resolve returns the real address of a labelled proxy; ErrUnknownLabel
// for a label not in the fleet.
func (f *RemoteFleet) Resolve(label retry.Proxy) (string, error) {
	if a, ok := f.addrs[label]; ok {
		return a, nil
	}
	return "", fmt.Errorf("%w: %v", ErrUnknownLabel, label)
}

// Extra returns what the child's FleetHooks.Started returned for each
// proxy, in Labels order (for example the address of a gRPC front beside
// it), or nil. The slice is new.
func (f *RemoteFleet) Extra() []string { return append([]string(nil), f.extra...) }

// Set gives every selected proxy profile p, in the child. Errors as
// Fleet.Set's, wrapped in ErrRemoteFleet when they come from the child.
func (f *RemoteFleet) Set(sel Selector, p Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := f.do(fleetCmd{Op: "set", Host: sel.Host, Port: sel.Port, Profile: p.String()})
	return err
}

// Stats returns the sum of the child's proxies' counters.
func (f *RemoteFleet) Stats() (ProxyStats, error) {
	rep, err := f.do(fleetCmd{Op: "stats"})
	if err != nil || rep.Stats == nil {
		return ProxyStats{}, err
	}
	return *rep.Stats, nil
}

// Close ends the child: it closes its standard input (ServeFleet then
// stops the proxies and returns) and waits for it to exit, killing it after
// 10 s. It is safe to call more than once.
func (f *RemoteFleet) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	_ = f.in.Close()
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		_ = f.cmd.Process.Kill()
		return <-done
	}
}

// FleetHooks let a program that serves a fleet in a child process add
// services of its own beside the proxies.
type FleetHooks struct {
	// Started, if set, is called once the fleet is up. It may start
	// services beside the proxies (e.g. one gRPC front per proxy) and returns
	// one string per proxy, host-major, for RemoteFleet.Extra, and a
	// function that stops them (called before the proxies close).
	Started func(f *Fleet) (extra []string, stop func(), err error)
	// Changed, if set, is called after each profile change the parent
	// made (so that such services can follow a proxy's profile, e.g. stop
	// listening while it refuses connections). Its error is the command's.
	Changed func(f *Fleet) error
}

// ServeFleet is the child's end of a RemoteFleet: it reads commands from
// in, one JSON object a line, runs them against the fleet it starts, and
// writes one JSON reply a line to out. It returns when in ends (the parent
// closed it or went away), after closing the fleet; the error is nil then.
func ServeFleet(in io.Reader, out io.Writer, hooks FleetHooks) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	enc := json.NewEncoder(out)
	var fleet *Fleet
	var stop func()
	defer func() {
		if stop != nil {
			stop()
		}
		if fleet != nil {
			_ = fleet.Close()
		}
	}()
	for {
		var c fleetCmd
		if err := dec.Decode(&c); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: bad command: %v", ErrRemoteFleet, err)
		}
		var rep fleetReply
		err := func() error {
			switch c.Op {
			case "start":
				if fleet != nil {
					return errors.New("fleet already started")
				}
				p, err := ParseProfile(c.Profile)
				if err != nil {
					return err
				}
				f, err := StartFleet(FleetConfig{Hosts: c.Hosts, Ports: c.Ports, Seed: c.Seed, Profile: p})
				if err != nil {
					return err
				}
				fleet = f
				for _, pr := range f.proxies {
					rep.Addrs = append(rep.Addrs, pr.addr)
				}
				if hooks.Started != nil {
					extra, st, err := hooks.Started(f)
					if err != nil {
						return err
					}
					rep.Extra, stop = extra, st
				}
				return nil
			case "set":
				if fleet == nil {
					return errors.New("no fleet")
				}
				p, err := ParseProfile(c.Profile)
				if err != nil {
					return err
				}
				if err := fleet.Set(Selector{Host: c.Host, Port: c.Port}, p); err != nil {
					return err
				}
				if hooks.Changed != nil {
					return hooks.Changed(fleet)
				}
				return nil
			case "stats":
				if fleet == nil {
					return errors.New("no fleet")
				}
				st := fleet.Stats()
				rep.Stats = &st
				return nil
			}
			return fmt.Errorf("unknown command %q", c.Op)
		}()
		if err != nil {
			rep = fleetReply{Err: err.Error()}
		}
		if err := enc.Encode(&rep); err != nil {
			return fmt.Errorf("%w: %v", ErrRemoteFleet, err)
		}
	}
}
