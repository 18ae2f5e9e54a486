package sim

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp/resptest"
	"github.com/readretry/readretry/wire"
)

// Backends of Options.Backend: what the engine's requests meet.
const (
	// BackendProxies is the simulator's own proxies speaking the wire
	// format (the default).
	BackendProxies = "proxies"
	// BackendRedis is real redis-server replicas on 127.0.0.1 reached
	// through transport/resp, with faults made by the servers themselves
	// (SPEC R23); see RedisFleet and RedisScenarios.
	BackendRedis = "redis"
)

// RedisMix is the workload of the Redis backend: the three reads that map
// to Redis commands (GET, MGET chunks, LRANGE chunks; transport/resp's
// table), no writes (replicas take none).
var RedisMix = []Weight{{wire.CmdGet, 50}, {wire.CmdBatchGet, 25}, {wire.CmdListGetAll, 25}}

// RedisDataset is the data the Redis backend loads into every replica:
// smaller than NewDataset's so that loading four servers takes a moment,
// with the same key and stream shapes.
func RedisDataset(seed uint64) *Dataset {
	return &Dataset{Keys: 20_000, Parts: 500, MaxStream: 60, Seed: seed}
}

// RedisScenarios returns the scenarios of the Redis backend: the names and
// meanings of Scenarios', with faults a real replica has. A profile is read
// by RedisFleet.Set (see there): dark = SIGSTOP, refuse = SIGKILL (back from
// its snapshot when healthy again), an error rate = MASTERDOWN, a latency
// tail = DEBUG SLEEP now and then, cut = connections closed mid-stream.
func RedisScenarios() []Scenario {
	dark := with(healthy, func(p *Profile) { p.Drop = 1 })
	masterDown := with(healthy, func(p *Profile) { p.Error = 1 })
	return []Scenario{
		{Name: "steady", About: "healthy replicas", Base: healthy},
		{
			Name:   "blackhole-host",
			About:  "replica 1 is stopped (SIGSTOP) for the whole run: it takes requests and never answers",
			Base:   healthy,
			Events: []Event{{At: 0, Select: HostSel(0), Profile: dark}},
		},
		{
			Name:  "error-codes",
			About: "replica 1 answers MASTERDOWN from 30% to 40% of the run, replica 2 from 60% to 70% (master gone, stale reads off)",
			Base:  healthy,
			Events: []Event{
				{At: 0.30, Select: HostSel(0), Profile: masterDown},
				{At: 0.40, Select: HostSel(0), Profile: healthy},
				{At: 0.60, Select: HostSel(1), Profile: masterDown},
				{At: 0.70, Select: HostSel(1), Profile: healthy},
			},
		},
		{
			Name:  "slow-tail",
			About: "every replica sleeps 250 ms (DEBUG SLEEP) every 1.25 s, staggered",
			Base:  with(healthy, func(p *Profile) { p.Latency = Latency{P50: time.Millisecond, P99: 250 * time.Millisecond} }),
		},
		{
			Name:  "stream-cut",
			About: "every replica's connection is cut after 64 KiB of replies, in the middle of MGET and LRANGE streams",
			Base:  with(healthy, func(p *Profile) { p.Cut = 1 }),
		},
		{
			Name:   "flapping",
			About:  "replica 2 is stopped at 20% and continued at 45%; replica 3 is killed at 55% and restarted from its snapshot at 80%",
			Base:   healthy,
			Events: flappingEvents(dark),
		},
		{
			Name:   "all-down",
			About:  "every replica is stopped (SIGSTOP): each read ends with one -19219",
			Base:   dark,
			Expect: expectAllDown,
		},
	}
}

// DefaultRedisScenarios are the scenarios rrsim -backend redis runs with no
// -scenario flag: all of RedisScenarios.
var DefaultRedisScenarios = []string{"steady", "blackhole-host", "error-codes", "slow-tail", "stream-cut", "flapping", "all-down"}

// ParseRedisScenarios is ParseScenarios over RedisScenarios.
func ParseRedisScenarios(s string) ([]Scenario, error) {
	return parseScenarios(s, RedisScenarios(), DefaultRedisScenarios)
}

// Thresholds of RedisFleet.Set's reading of a profile.
const (
	// slowTailMin is the P99 from which a profile's latency tail becomes
	// DEBUG SLEEP: below it the replica's own speed is the tail.
	slowTailMin = 50 * time.Millisecond
	// cutAfterBytes is where a cut profile closes each connection.
	cutAfterBytes = 64 << 10
)

// RedisFleet is a FleetControl over real redis-server replicas on
// 127.0.0.1, one per host, each loaded with the same Dataset (independent
// servers, not a master and its replicas: a fault stays on the server it
// is put on; see package resptest). Labels are {Host: "replica-i", Port:
// 6379}, i from 1.
type RedisFleet struct {
	servers []*resptest.Server
	cuts    []*resptest.CutProxy

	mu     sync.Mutex
	state  []redisState
	wg     sync.WaitGroup
	closed bool
}

// redisState is what RedisFleet.Set last did to one replica.
type redisState struct {
	frozen, killed, masterDown, cutting bool
	sleeper                             chan struct{} // closed to stop the DEBUG SLEEP loop
}

// ErrRedisFleet wraps a failure to start or fault the replicas.
var ErrRedisFleet = errors.New("sim: redis fleet")

// StartRedisFleet starts hosts redis-server replicas, loads d into each
// (saving a snapshot for restarts) and puts a cutting proxy in front of
// each (used only while a profile cuts). Errors wrap ErrRedisFleet, or
// resptest.ErrNotInstalled without redis-server.
func StartRedisFleet(hosts int, d *Dataset) (*RedisFleet, error) {
	if hosts <= 0 {
		return nil, fmt.Errorf("%w: %d hosts", ErrRedisFleet, hosts)
	}
	cmds, n := redisCommands(d)
	f := &RedisFleet{state: make([]redisState, hosts)}
	for range hosts {
		s, err := resptest.Start()
		if err != nil {
			f.Close()
			if errors.Is(err, resptest.ErrNotInstalled) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrRedisFleet, err)
		}
		f.servers = append(f.servers, s)
		err = s.Pipe(cmds, n)
		if err == nil {
			_, err = s.Do("SAVE")
		}
		var cut *resptest.CutProxy
		if err == nil {
			cut, err = resptest.NewCutProxy(s.Addr, cutAfterBytes)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: load %s: %w", ErrRedisFleet, s.Addr, err)
		}
		f.cuts = append(f.cuts, cut)
	}
	return f, nil
}

// redisCommands is d as SET and RPUSH commands: key "k<n>" holds its value,
// list "p<n>" its stream's record values in order.
func redisCommands(d *Dataset) ([]byte, int) {
	var out, kb, vb []byte
	n := 0
	for k := uint64(0); k < d.Keys; k++ {
		kb = d.AppendKey(kb[:0], k)
		vb = d.AppendValue(vb[:0], kb)
		out = resptest.AppendCommand(out, "SET", string(kb), string(vb))
		n++
	}
	for p := uint64(0); p < d.Parts; p++ {
		kb = d.AppendPartKey(kb[:0], p)
		l := d.StreamLen(kb)
		if l == 0 {
			continue
		}
		args := []string{"RPUSH", string(kb)}
		for pos := uint64(0); pos < l; pos++ {
			args = append(args, string(d.AppendRecordValue(vb[:0], kb, pos)))
		}
		out = resptest.AppendCommand(out, args...)
		n++
	}
	return out, n
}

func redisLabel(i int) retry.Proxy {
	return retry.Proxy{Host: "replica-" + strconv.Itoa(i+1), Port: 6379}
}

// Labels returns every replica's label, in order.
func (f *RedisFleet) Labels() []retry.Proxy {
	out := make([]retry.Proxy, len(f.servers))
	for i := range out {
		out[i] = redisLabel(i)
	}
	return out
}

// Resolve returns a replica's address: its cutting proxy's while its
// profile cuts, else the server's own.
func (f *RedisFleet) Resolve(label retry.Proxy) (string, error) {
	for i := range f.servers {
		if redisLabel(i) == label {
			f.mu.Lock()
			cutting := f.state[i].cutting
			f.mu.Unlock()
			if cutting {
				return f.cuts[i].Addr(), nil
			}
			return f.servers[i].Addr, nil
		}
	}
	return "", fmt.Errorf("%w: no replica %v", ErrRedisFleet, label)
}

// Servers returns the replicas, for a caller that injects faults of its own.
func (f *RedisFleet) Servers() []*resptest.Server { return f.servers }

// Set gives the selected replicas (Selector.Host; Port is ignored: one
// replica per host) profile p, read as the server faults that come
// closest: Drop ≥ 1 stops the process (SIGSTOP; dark host), Refuse kills
// it (SIGKILL; refused connections), Error > 0 makes it a replica of a
// master that is gone, with stale reads off (every read answers
// MASTERDOWN), a Latency.P99 of at least 50 ms makes it sleep P99 (DEBUG
// SLEEP) every 5 × P99, staggered by replica, and Cut > 0 sends new
// connections through a proxy that closes each after 64 KiB of replies.
// What p does not have is undone: a stopped server continues, a killed one
// restarts from its snapshot (answering LOADING while it loads), MASTERDOWN
// ends. Other profile fields have no Redis counterpart and are ignored.
func (f *RedisFleet) Set(sel Selector, p Profile) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("%w: closed", ErrRedisFleet)
	}
	if sel.Host < -1 || sel.Host >= len(f.servers) {
		return fmt.Errorf("%w: host %d of %d", ErrBadFleet, sel.Host, len(f.servers))
	}
	for i := range f.servers {
		if sel.Host == -1 || sel.Host == i {
			if err := f.apply(i, p); err != nil {
				return fmt.Errorf("%w: replica %d: %w", ErrRedisFleet, i+1, err)
			}
		}
	}
	return nil
}

// apply puts replica i in profile p's state (under f.mu).
func (f *RedisFleet) apply(i int, p Profile) error {
	s, st := f.servers[i], &f.state[i]
	if st.sleeper != nil && p.Latency.P99 < slowTailMin {
		close(st.sleeper)
		st.sleeper = nil
	}
	if st.frozen && p.Drop < 1 {
		if err := s.Thaw(); err != nil {
			return err
		}
		st.frozen = false
	}
	if st.killed && !p.Refuse {
		if err := s.Restart(); err != nil {
			return err
		}
		st.killed = false
	}
	if st.masterDown && p.Error == 0 {
		if err := s.MasterUp(); err != nil {
			return err
		}
		st.masterDown = false
	}
	st.cutting = p.Cut > 0
	if p.Error > 0 && !st.masterDown && !st.frozen && !st.killed {
		if err := s.MasterDown(); err != nil {
			return err
		}
		st.masterDown = true
	}
	if p.Latency.P99 >= slowTailMin && st.sleeper == nil {
		st.sleeper = make(chan struct{})
		f.wg.Add(1)
		go f.sleep(s, p.Latency.P99, time.Duration(i)*p.Latency.P99, st.sleeper)
	}
	if p.Refuse && !st.killed {
		s.Kill()
		st.killed, st.frozen = true, false
	}
	if p.Drop >= 1 && !st.frozen && !st.killed {
		if err := s.Freeze(); err != nil {
			return err
		}
		st.frozen = true
	}
	return nil
}

// sleep makes s sleep d every 5·d, after offset, until stop is closed.
func (f *RedisFleet) sleep(s *resptest.Server, d, offset time.Duration, stop chan struct{}) {
	defer f.wg.Done()
	t := time.NewTimer(offset)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		select {
		case <-stop:
			return
		case <-s.Sleep(d):
		}
		t.Reset(4 * d)
	}
}

// Close ends every fault, stops the replicas and the cutting proxies, and
// waits for the fleet's goroutines.
func (f *RedisFleet) Close() error {
	f.mu.Lock()
	f.closed = true
	for i := range f.state {
		if f.state[i].sleeper != nil {
			close(f.state[i].sleeper)
			f.state[i].sleeper = nil
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
	for _, c := range f.cuts {
		_ = c.Close()
	}
	for _, s := range f.servers {
		s.Stop() // continues a stopped server before it waits for it
	}
	return nil
}

var _ FleetControl = (*RedisFleet)(nil)
