package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"runtime"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/resp"
	"github.com/readretry/readretry/transport/tcp"
)

// Options set up a run. The zero Options is valid: every field has a
// default chosen so that the default scenario set runs in well under a
// minute on two cores while meeting issue 6's targets.
type Options struct {
	// Duration is how long requests are generated; 0 means 2 s. The run
	// then waits for the last final results (at most WaitTimeout plus the
	// complex budget).
	Duration time.Duration
	// Requests, if above 0, sends exactly that many requests per client at
	// Rate instead of running for Duration.
	Requests int
	// Rate is the requests per second each client sends, open loop (on
	// time whether or not answers came back); 0 means 2000.
	Rate int
	// Hosts and Ports shape the fleet: Hosts logical hosts with Ports
	// proxies each; 0 means 4 and 2.
	Hosts, Ports int
	// Seed fixes the dataset, the workload and the proxies' fault draws; 0
	// means 1.
	Seed uint64
	// SimpleBudget and ComplexBudget are the read retry budgets (SPEC R1)
	// of the retry-on client; 0 means 300 ms and 600 ms.
	SimpleBudget, ComplexBudget time.Duration
	// MaxRetries is the zone's ReadRetryMaxCnt (SPEC R5); 0 means 2.
	MaxRetries int
	// Hedge is the retry-on engine's Config.Hedge (SPEC R21, the adaptive
	// first re-send); the zero value keeps the seed's schedule.
	Hedge retry.Hedge
	// WaitTimeout is the engine's wait for requests without read retry;
	// 0 means 1 s.
	WaitTimeout time.Duration
	// Modes lists the runs, read retry on (true) and off (false); both run
	// at once against the same proxies, so they meet the same faults at the
	// same moments. nil means {true, false}.
	Modes []bool
	// Logger receives the engine's and the transport's logs; nil discards
	// them.
	Logger *slog.Logger
	// Progress, if set, is called about every 200 ms from Run's goroutine.
	Progress func(Progress)
	// FleetProcess, if set, makes the child process that runs a capacity
	// scenario's proxies (one that calls ServeFleet on its standard input
	// and output; see StartRemoteFleet), so that the memory and CPU figures
	// are the client's alone. nil runs them in this process; those figures
	// then include the proxies'.
	FleetProcess func() *exec.Cmd
	// Backend is what the requests meet: BackendProxies ("" means it) or
	// BackendRedis — real redis-server replicas, one per host (Ports is
	// ignored), over transport/resp, with RedisScenarios' faults and the
	// RedisMix workload (SPEC R23). Capacity runs need BackendProxies.
	Backend string
}

// Progress is a snapshot of a run, for a progress line.
type Progress struct {
	Scenario string        // the scenario's name
	Elapsed  time.Duration // since the first request
	Duration time.Duration // of the sending phase
	Draining bool          // sending is over; waiting for the last results
	Requests uint64        // issued, over every mode
	Finals   uint64        // final results received, over every mode
}

// ErrInvalidConfig wraps what is wrong with Options.
var ErrInvalidConfig = errors.New("sim: invalid config")

func (o *Options) defaults() error {
	if o.Duration < 0 || o.Requests < 0 || o.Rate < 0 || o.Hosts < 0 || o.Ports < 0 || o.SimpleBudget < 0 ||
		o.ComplexBudget < 0 || o.MaxRetries < 0 || o.WaitTimeout < 0 {
		return fmt.Errorf("%w: negative value", ErrInvalidConfig)
	}
	if o.MaxRetries > retry.MaxMaxRetries {
		return fmt.Errorf("%w: MaxRetries %d above %d", ErrInvalidConfig, o.MaxRetries, retry.MaxMaxRetries)
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	if o.Rate == 0 {
		o.Rate = 2000
	}
	if o.Rate > 1_000_000 {
		return fmt.Errorf("%w: rate %d above 1,000,000/s", ErrInvalidConfig, o.Rate)
	}
	if o.Requests > 0 {
		o.Duration = time.Duration(float64(o.Requests) / float64(o.Rate) * float64(time.Second))
	}
	if o.Duration > time.Hour {
		return fmt.Errorf("%w: duration %v above 1h", ErrInvalidConfig, o.Duration)
	}
	if o.Hosts == 0 {
		o.Hosts = 4
	}
	if o.Ports == 0 {
		o.Ports = 2
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.SimpleBudget == 0 {
		o.SimpleBudget = 300 * time.Millisecond
	}
	if o.ComplexBudget == 0 {
		o.ComplexBudget = 600 * time.Millisecond
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = retry.DefaultMaxRetries
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = time.Second
	}
	if o.Modes == nil {
		o.Modes = []bool{true, false}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch o.Backend {
	case "":
		o.Backend = BackendProxies
	case BackendProxies, BackendRedis:
	default:
		return fmt.Errorf("%w: backend %q (have %s, %s)", ErrInvalidConfig, o.Backend, BackendProxies, BackendRedis)
	}
	return nil
}

// capacity is how many requests one client may issue in a run.
func (o *Options) capacity() int {
	if o.Requests > 0 {
		return o.Requests
	}
	return int(o.Duration.Seconds()*float64(o.Rate)) + 1
}

// Zone is the zone every run's clients send to; read it, do not change it.
var Zone = retry.Zone{AppID: 1, ZoneID: 1}

// simZone is Zone, under the name the run's code uses.
var simZone = Zone

// ConfList returns the directory's CollectUrlList the runs apply (SPEC
// R5): every read command, error code -7953, maxRetries re-sends.
func ConfList(maxRetries int) string {
	c := retry.DefaultConf()
	c.MaxRetries = maxRetries
	return "tcp://127.0.0.1:0;" + c.String()
}

// Run runs scenario sc: it starts a fleet of proxies, one client per mode
// (read retry on and off) over transport/tcp, sends the open-loop workload
// from each for the duration, applies the scenario's events on time, waits
// for every final result, checks every response, and returns one Report
// per mode, in Options.Modes order. An error means the run could not be set
// up (or ctx ended it); a run whose invariants broke returns reports whose
// Violations say so, and a nil error.
func Run(ctx context.Context, sc Scenario, opt Options) ([]Report, error) {
	return run(ctx, sc, opt, nil)
}

// run is Run with the proxies' dataset given apart (nil: the workload's),
// so that a test can make the proxies answer wrong and see the checks fail.
func run(ctx context.Context, sc Scenario, opt Options, proxyData *Dataset) ([]Report, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if err := sc.Base.Validate(); err != nil {
		return nil, err
	}
	for _, e := range sc.Events {
		if err := e.Profile.Validate(); err != nil {
			return nil, err
		}
		if !(e.At >= 0 && e.At <= 1) {
			return nil, fmt.Errorf("%w: event at %v, want 0..1", ErrInvalidConfig, e.At)
		}
	}
	if sc.Hosts > 0 {
		opt.Hosts = sc.Hosts
	}
	if sc.Churn != nil && opt.Duration < sc.Churn.MinDuration {
		opt.Duration, opt.Requests = sc.Churn.MinDuration, 0
	}
	var mix []Weight
	redis := opt.Backend == BackendRedis
	if redis {
		if sc.Load != nil {
			return nil, fmt.Errorf("%w: the capacity scenario needs the %s backend", ErrInvalidConfig, BackendProxies)
		}
		mix = RedisMix
	}
	if sc.Load != nil {
		if err := applyLoad(&sc, &opt); err != nil {
			return nil, err
		}
		mix = sc.Load.Mix
		if mix == nil {
			mix = ReadMix
		}
	}
	data := NewDataset(opt.Seed)
	if redis {
		data = RedisDataset(opt.Seed)
	}
	w, err := NewWorkload(data, opt.Seed, mix)
	if err != nil {
		return nil, err
	}
	var fleet FleetControl
	remote := sc.Load != nil && opt.FleetProcess != nil && proxyData == nil
	switch {
	case redis:
		if fleet, err = StartRedisFleet(opt.Hosts, data); err == nil {
			if err = fleet.Set(All, sc.Base); err != nil {
				_ = fleet.Close()
			}
		}
	case remote:
		fleet, err = StartRemoteFleet(opt.FleetProcess(), FleetConfig{Hosts: opt.Hosts, Ports: opt.Ports, Profile: sc.Base, Seed: opt.Seed})
	default:
		if proxyData == nil {
			proxyData = data
		}
		fleet, err = StartFleet(FleetConfig{Hosts: opt.Hosts, Ports: opt.Ports, Data: proxyData, Profile: sc.Base, Seed: opt.Seed})
	}
	if err != nil {
		return nil, err
	}
	defer fleet.Close()
	var churnC <-chan time.Time
	var local *Fleet
	if sc.Churn != nil {
		var ok bool
		if local, ok = fleet.(*Fleet); !ok || sc.Churn.Every <= 0 || sc.Churn.Zones < 0 {
			return nil, fmt.Errorf("%w: churn %+v needs proxies in this process", ErrInvalidConfig, *sc.Churn)
		}
		tk := time.NewTicker(sc.Churn.Every)
		defer tk.Stop()
		churnC = tk.C
	}

	events := sc.Events
	for len(events) > 0 && events[0].At == 0 && events[0].Client == nil {
		if err := fleet.Set(events[0].Select, events[0].Profile); err != nil {
			return nil, err
		}
		events = events[1:]
	}

	runs := make([]*clientRun, 0, len(opt.Modes))
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	for _, on := range opt.Modes {
		r, err := newClientRun(on, &sc, &opt, fleet, w)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}

	// A capacity run measures the heap its client grows by as contexts
	// pile up: the baseline comes after the client, its connections'
	// buffers and the Checker's preallocated state exist, before the first
	// request.
	var base Usage
	if sc.Load != nil {
		runtime.GC()
		base = ReadUsage()
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The capacity figures' sample at the plateau: halfway between the
	// first answers (Latency) and the end of sending.
	peakTimer := time.NewTimer(time.Hour)
	defer peakTimer.Stop()
	var peak capacityPeak
	if sc.Load != nil {
		peakTimer.Reset(sc.Load.Latency + (opt.Duration-sc.Load.Latency)/2)
	}
	cpu0 := processCPU()
	start := time.Now()
	for _, r := range runs {
		r.start = start
		go r.send(runCtx)
		go r.poll(runCtx)
	}
	progress := time.NewTicker(200 * time.Millisecond)
	defer progress.Stop()
	eventTimer := time.NewTimer(time.Hour)
	defer eventTimer.Stop()
	report := func(draining bool) {
		if opt.Progress == nil {
			return
		}
		p := Progress{Scenario: sc.Name, Elapsed: time.Since(start), Duration: opt.Duration, Draining: draining}
		for _, r := range runs {
			p.Requests += r.ck.Issued()
			p.Finals += r.ck.Finals()
		}
		opt.Progress(p)
	}
	for done := 0; done < len(runs); {
		var next time.Duration = time.Hour
		if len(events) > 0 {
			next = time.Until(start.Add(time.Duration(events[0].At * float64(opt.Duration))))
		}
		eventTimer.Reset(max(next, 0))
		select {
		case <-eventTimer.C:
			if len(events) > 0 {
				if err := applyEvent(&events[0], fleet, runs); err != nil {
					cancel()
					waitRuns(runs)
					return nil, fmt.Errorf("event at %v of %s: %w", events[0].At, sc.Name, err)
				}
				events = events[1:]
			}
		case <-churnC:
			if time.Since(start) < opt.Duration {
				if err := churnStep(&sc, &opt, local, runs, time.Since(start)); err != nil {
					cancel()
					waitRuns(runs)
					return nil, fmt.Errorf("churn of %s: %w", sc.Name, err)
				}
			}
		case <-progress.C:
			report(time.Since(start) >= opt.Duration)
		case <-peakTimer.C:
			peak = samplePeak(runs[0].c)
		case <-runs[done].pollDone:
			done++
		case <-ctx.Done():
			waitRuns(runs)
			return nil, ctx.Err()
		}
	}
	// The runs end on their own when ctx ends (they poll runCtx): the
	// select above may see a run done before it sees ctx.Done.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	report(true)

	out := make([]Report, len(runs))
	for i, r := range runs {
		out[i] = r.finish(&sc, &opt)
	}
	if sc.Load != nil {
		fillCapacity(&out[0], sc.Load, runs[0], base, peak, processCPU()-cpu0, remote)
	}
	return out, nil
}

// applyLoad makes opt run sc.Load: its rate, duration and budgets, read
// retry on only, every proxy answering after exactly Latency.
func applyLoad(sc *Scenario, opt *Options) error {
	l := sc.Load
	if l.Rate <= 0 || l.Rate > 1_000_000 || l.Duration <= 0 || l.Duration > time.Hour || l.Latency <= 0 ||
		l.SimpleBudget <= 0 || l.ComplexBudget <= 0 {
		return fmt.Errorf("%w: capacity load %+v", ErrInvalidConfig, *l)
	}
	opt.Rate, opt.Duration, opt.Requests = l.Rate, l.Duration, 0
	opt.SimpleBudget, opt.ComplexBudget = l.SimpleBudget, l.ComplexBudget
	opt.Modes = []bool{true}
	sc.Base = Profile{Latency: Latency{P50: l.Latency}}
	sc.Events = nil
	return nil
}

// applyEvent changes the fleet's profiles or, for a client event, every
// client's settings while it sends and polls (SPEC §6: settings changed
// under load).
func applyEvent(e *Event, fleet FleetControl, runs []*clientRun) error {
	if e.Client == nil {
		return fleet.Set(e.Select, e.Profile)
	}
	for _, r := range runs {
		if err := e.Client(r.c, simZone, fleet.Labels(), r.retryOn); err != nil {
			return err
		}
	}
	return nil
}

func waitRuns(runs []*clientRun) {
	for _, r := range runs {
		<-r.pollDone
		<-r.sendDone
	}
}

// clientRun is one client (read retry on or off) with its transport,
// sender and poller.
type clientRun struct {
	retryOn bool
	load    bool // a capacity run: the sender sums the R15 formula
	opt     *Options
	c       *retry.Client
	tr      EngineTransport
	w       *Workload
	ck      *Checker
	ans     Answer
	start   time.Time

	sendDone chan struct{}
	pollDone chan struct{}

	// Poller-owned samples of the context table at its fullest.
	peakLen   int
	peakBytes int64
	// Longest gaps between two loop turns beyond the expected wait, one per
	// goroutine (each written by its own goroutine, read after it ended).
	sendStall, pollStall time.Duration
	// Sender-owned, for capacity runs: when sending ended, and the R15
	// formula's bytes summed over the reads issued.
	sendEnd  time.Time
	r15Bytes int64
	reads    int64
	frame    []byte

	// A churn run's figures, its transport's dials at the last sample and
	// the extra zones it serves now (churnStep, on the run's goroutine).
	churn      *ChurnFigures
	churnDials uint64
	churnZones []retry.Zone
}

// stallSince returns how much longer than expected it has been since prev.
func stallSince(prev time.Time, now time.Time, expected time.Duration) time.Duration {
	return max(now.Sub(prev)-expected, 0)
}

func newClientRun(on bool, sc *Scenario, opt *Options, fleet FleetControl, w *Workload) (*clientRun, error) {
	maxContexts := 0
	if on {
		maxContexts = sc.MaxContexts
	}
	c, tr, err := newEngine(opt, fleet, on, maxContexts, retry.PollHand)
	if err != nil {
		return nil, err
	}
	r := &clientRun{retryOn: on, load: sc.Load != nil, opt: opt, c: c, tr: tr, w: w,
		ck:       NewChecker(w, opt.capacity(), 0),
		sendDone: make(chan struct{}), pollDone: make(chan struct{})}
	// LRANGE records carry the list's key (transport/resp's table).
	r.ck.SetPartKeyRecords(opt.Backend == BackendRedis)
	if on {
		r.ck.maxRetries = max(opt.MaxRetries, sc.MaxRetries)
	}
	return r, nil
}

// NewEngine returns the client a run drives: a retry.Client over
// transport/tcp with the transport settings every run uses (500 ms dial
// timeout, reconnect backoff from 5 ms to 100 ms), the fleet's route
// applied with ConfList(opt.MaxRetries), and — with retryOn — opt's
// budgets and, when maxContexts > 0, that context cap (SPEC R1, R2, R5).
// Zero fields of opt take Run's defaults. poller is the client's
// Config.Poller: with retry.PollHand drive it as Run does — Send from any
// goroutine, RecvResponse and PollWait from one; with retry.PollSelf call
// Do, and the client drives itself. The caller closes both (the client
// first).
func NewEngine(opt Options, fleet FleetControl, retryOn bool, maxContexts int, poller retry.Poller) (*retry.Client, *tcp.Transport, error) {
	if err := opt.defaults(); err != nil {
		return nil, nil, err
	}
	opt.Backend = BackendProxies
	c, tr, err := newEngine(&opt, fleet, retryOn, maxContexts, poller)
	if err != nil {
		return nil, nil, err
	}
	return c, tr.(*tcp.Transport), nil
}

// NewEngineFor is NewEngine over opt.Backend's transport: transport/tcp
// for the simulator's proxies, transport/resp for Redis replicas
// (BackendRedis, with a RedisFleet).
func NewEngineFor(opt Options, fleet FleetControl, retryOn bool, maxContexts int, poller retry.Poller) (*retry.Client, EngineTransport, error) {
	if err := opt.defaults(); err != nil {
		return nil, nil, err
	}
	return newEngine(&opt, fleet, retryOn, maxContexts, poller)
}

// Fleet describes what a run's clients meet, for report headers and plot
// captions: "4 hosts x 2 ports" of simulated proxies, or "3 redis-server
// replicas" with BackendRedis. Unset fields read as zero: call it on
// Options whose defaults are filled in.
func (o Options) Fleet() string {
	if o.Backend == BackendRedis {
		return fmt.Sprintf("%d redis-server replicas", o.Hosts)
	}
	return fmt.Sprintf("%d hosts x %d ports", o.Hosts, o.Ports)
}

// EngineTransport is what a run needs of its transport: transport/tcp for
// the simulator's proxies, transport/resp for Redis replicas.
type EngineTransport interface {
	retry.Transport
	retry.Waiter
	// WaitDialed waits for the first connection attempts (both transports
	// dial on their own goroutines).
	WaitDialed(ctx context.Context) error
	Close() error
}

// connStats returns the connection counters of either backend's
// transport (transport/resp carries transport/tcp's inside its own).
func connStats(tr EngineTransport) tcp.Stats {
	switch t := tr.(type) {
	case *tcp.Transport:
		return t.Stats()
	case *resp.Transport:
		return t.Stats().Conn
	}
	return tcp.Stats{}
}

// newTransport makes the backend's transport with the settings every run
// uses (500 ms dial timeout, reconnect backoff from 5 ms to 100 ms).
func newTransport(opt *Options, fleet FleetControl) (EngineTransport, error) {
	dial := 500 * time.Millisecond
	bo := backoff.Decorrelated{Base: 5 * time.Millisecond, Max: 100 * time.Millisecond}
	if opt.Backend == BackendRedis {
		return resp.New(resp.Config{Resolve: fleet.Resolve, DialTimeout: dial, Backoff: bo, Logger: opt.Logger})
	}
	return tcp.New(tcp.Config{
		Resolve:     fleet.Resolve,
		DialTimeout: dial,
		Backoff:     bo,
		StableAfter: 200 * time.Millisecond,
		Logger:      opt.Logger,
	})
}

func newEngine(opt *Options, fleet FleetControl, on bool, maxContexts int, poller retry.Poller) (*retry.Client, EngineTransport, error) {
	tr, err := newTransport(opt, fleet)
	if err != nil {
		return nil, nil, err
	}
	cfg := retry.Config{Transport: tr, Logger: opt.Logger, WaitTimeout: opt.WaitTimeout, Poller: poller}
	if on {
		cfg.Hedge = opt.Hedge
	}
	c, err := retry.New(cfg)
	if err != nil {
		_ = tr.Close()
		return nil, nil, err
	}
	fail := func(err error) (*retry.Client, EngineTransport, error) {
		_ = c.Close()
		_ = tr.Close()
		return nil, nil, err
	}
	if on {
		if err := c.SetReadRetryTimeout(opt.SimpleBudget, opt.ComplexBudget); err != nil {
			return fail(err)
		}
		if maxContexts > 0 {
			c.SetReadRetryMaxContextCountPerZone(maxContexts)
		}
	}
	// A proxy that refuses connections at the start is logged by the
	// engine and reconnected by the transport; it is not an error here.
	if err := c.ApplyRoute(simZone, fleet.Labels(), ConfList(opt.MaxRetries)); err != nil {
		return fail(err)
	}
	// ApplyRoute never waits on a dial (the transport dials on its own
	// goroutines): wait for the first attempts, bounded by the dial
	// timeout, so that the load starts against connected proxies.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tr.WaitDialed(ctx); err != nil {
		return fail(err)
	}
	return c, tr, nil
}

func (r *clientRun) close() {
	_ = r.c.Close()
	_ = r.tr.Close()
}

// send is the open-loop generator: every millisecond it issues the
// requests due by then at the configured rate, whatever has come back.
func (r *clientRun) send(ctx context.Context) {
	defer close(r.sendDone)
	ck := r.ck
	var op Op
	var req retry.Request
	var bufs RequestBuffers
	defer func() { r.sendEnd = time.Now() }()
	r.sendStall = OpenLoop(ctx, r.start, r.opt.Rate, r.opt.Duration, uint64(ck.Capacity()), func(id uint64) {
		r.w.Op(id, &op)
		r.w.Request(&op, &req, &bufs)
		if r.load && op.Command.IsRead() {
			r.frame = packFrame(r.frame[:0], &req)
			r.r15Bytes += int64(len(r.frame) + len(req.UserBuffer) + R15OverheadBytes)
			r.reads++
		}
		ck.Begin(id, time.Since(r.start))
		seq, err := r.c.Send(simZone, &req)
		if err != nil {
			ck.Refused(id)
			return
		}
		ck.Sent(id, seq)
	})
}

// poll drives the client: it drains RecvResponse into the checker, sleeps
// on the transport until a frame arrives or the engine's next deadline, and
// once sending is over waits for every final result and for the engine to
// release every context and timer (SPEC §6: nothing leaks).
func (r *clientRun) poll(ctx context.Context) {
	defer close(r.pollDone)
	ck := r.ck
	var drainBy time.Time
	lastSample := time.Time{}
	for {
		r.drain()
		now := time.Now()
		if now.Sub(lastSample) >= 20*time.Millisecond {
			r.sample()
			lastSample = now
		}
		select {
		case <-r.sendDone:
			if drainBy.IsZero() {
				drainBy = now.Add(r.opt.WaitTimeout + r.opt.ComplexBudget + time.Second)
			}
		case <-ctx.Done():
			return
		default:
		}
		if !drainBy.IsZero() {
			if ck.Settled() {
				break
			}
			if now.After(drainBy) {
				return // finish reports what is missing
			}
		}
		r.wait()
	}
	// Every final result is in: let the engine release the last one, then
	// wait for lingering timers (those of requests that ended before their
	// first timer's handle was published fire into nothing).
	leakBy := time.Now().Add(r.opt.WaitTimeout + r.opt.ComplexBudget + time.Second)
	for {
		r.drain()
		reqs, timers := r.c.InFlight(simZone)
		if reqs == 0 && timers == 0 || time.Now().After(leakBy) {
			return
		}
		select {
		case <-ctx.Done():
			return
		default:
		}
		r.wait()
	}
}

func (r *clientRun) drain() {
	for {
		rsp, ok := r.c.RecvResponse()
		if !ok {
			return
		}
		r.ans.SetResponse(rsp)
		r.ck.Check(&r.ans, time.Since(r.start))
	}
}

// wait sleeps until a frame arrives or the engine's next deadline, at most
// 5 ms, and notes by how much it overslept (for the stall figure).
func (r *clientRun) wait() {
	r.pollStall = max(r.pollStall, PollWait(r.c, r.tr))
}

// PollWait is a poller's sleep between two rounds of RecvResponse: until a
// frame arrives on tr or c's next deadline, at most 5 ms (at least 200 µs
// when a deadline is due). It returns by how much it overslept its own
// timeout — the goroutine not being run: a busy or paused machine.
func PollWait(c *retry.Client, tr retry.Waiter) (stall time.Duration) {
	d := 5 * time.Millisecond
	if t, ok := c.NextDeadline(); ok {
		d = min(max(time.Until(t), 200*time.Microsecond), d)
	}
	start := time.Now()
	tr.Wait(d)
	return stallSince(start, time.Now(), d)
}

// sample records the context table's memory at its fullest.
func (r *clientRun) sample() {
	ts, err := r.c.TableStats(simZone)
	if err != nil || ts.Len <= r.peakLen {
		return
	}
	r.peakLen = ts.Len
	r.peakBytes = ts.Bytes
}

// finish completes the report once the poller is done.
func (r *clientRun) finish(sc *Scenario, opt *Options) Report {
	<-r.sendDone
	rep := r.ck.Finish()
	rep.Scenario, rep.Retry, rep.Seconds, rep.Rate = sc.Name, r.retryOn, opt.Duration.Seconds(), opt.Rate
	if st, err := r.c.Stats(simZone); err == nil {
		rep.RetriesTimeout, rep.RetriesErrorCode = st.RetriesTimeout, st.RetriesErrorCode
		rep.RetriesRefused = st.RetriesRefused
		rep.Retries = st.RetriesTimeout + st.RetriesErrorCode
		rep.DuplicatesDropped = st.DuplicatesDropped
		rep.PeakContexts = st.PeakContexts
		rep.CapHits = st.CapHits
		rep.ContextsLeaked = st.Contexts
	}
	rep.RequestsLeaked, rep.TimersLeaked = r.c.InFlight(simZone)
	if rep.ContextsLeaked != 0 || rep.RequestsLeaked != 0 || rep.TimersLeaked != 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("leak: %d contexts, %d requests, %d timers held at the end",
			rep.ContextsLeaked, rep.RequestsLeaked, rep.TimersLeaked))
	}
	if r.peakLen > 0 {
		rep.BytesPerContext = r.peakBytes / int64(r.peakLen)
	}
	rep.MaxStallMs = ms(max(r.sendStall, r.pollStall))
	rep.Churn = r.churn
	if sc.Expect != nil {
		rep.Violations = append(rep.Violations, sc.Expect(sc, &rep)...)
	}
	if rep.Violations == nil {
		rep.Violations = []string{} // an empty JSON array, not null
	}
	return rep
}

// churnStep is one period of a churn run (Scenario.Churn, SPEC R22): it
// samples every client (from the third period on: the first sample is the
// start, the latest the end), then moves the fleet to new endpoints, applies
// the new route to every client, removes the extra zones of the last period
// and adds new ones.
func churnStep(sc *Scenario, opt *Options, fleet *Fleet, runs []*clientRun, at time.Duration) error {
	ch := sc.Churn
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	goroutines := runtime.NumGoroutine()
	for _, r := range runs {
		if r.churn == nil {
			r.churn = &ChurnFigures{FleetSize: len(fleet.Labels())}
		}
		st := connStats(r.tr)
		dials := st.Connects + st.DialFailures
		smp := ChurnSample{
			AtS: at.Seconds(), Goroutines: goroutines, HeapMiB: float64(ms.HeapAlloc) / (1 << 20),
			Conns: st.Conns, Proxies: st.Proxies, ProxyIDs: r.c.ProxyStats().Live,
			DialsPerS: float64(dials-r.churnDials) / ch.Every.Seconds(), Zones: len(r.c.Zones()),
		}
		r.churnDials = dials
		switch {
		case r.churn.Redeploys < 2:
		case r.churn.Redeploys == 2:
			r.churn.Start, r.churn.End = smp, smp
		default:
			r.churn.End = smp
		}
	}
	old := fleet.Labels()
	gen, err := fleet.Redeploy()
	if err != nil {
		return err
	}
	labels := fleet.Labels()
	// A rolling deploy: old and new together until the new are dialled
	// (ApplyRoute never waits on a dial), then the new alone.
	for _, r := range runs {
		if err := r.c.ApplyRoute(simZone, append(labels[:len(labels):len(labels)], old...), ConfList(opt.MaxRetries)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	for _, r := range runs {
		_ = r.tr.WaitDialed(ctx) // a slow dial only leaves the new proxies unavailable a while
	}
	cancel()
	for _, r := range runs {
		if err := r.c.ApplyRoute(simZone, labels, ConfList(opt.MaxRetries)); err != nil {
			return err
		}
		for _, z := range r.churnZones {
			if err := r.c.RemoveZone(z); err != nil {
				return err
			}
			r.churn.ZonesRemoved++
		}
		r.churnZones = r.churnZones[:0]
		for i := range ch.Zones {
			z := retry.Zone{AppID: simZone.AppID + 1, ZoneID: uint32(gen*ch.Zones + i)}
			if err := r.c.ApplyRoute(z, labels, ConfList(opt.MaxRetries)); err != nil {
				return err
			}
			r.churnZones = append(r.churnZones, z)
			r.churn.ZonesAdded++
		}
		r.churn.Redeploys = gen
	}
	return nil
}
