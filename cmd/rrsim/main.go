// Command rrsim is readretry's main job: it starts simulated proxies on
// 127.0.0.1, runs read-retry scenarios against them with a real client
// over TCP — read retry on and off at the same time, against the same
// proxies — checks every answer, and prints a report per scenario.
//
//	go run ./cmd/rrsim                       # the default scenario set, under a minute
//	go run ./cmd/rrsim -scenario slow-tail -duration 5s -rate 4000
//	go run ./cmd/rrsim -scenario all -json   # one JSON array of reports
//	go run ./cmd/rrsim -plot docs/rrsim.png  # latency CDFs, retry on vs off
//	go run ./cmd/rrsim -profile 'latency=1ms/50ms,drop=0.02,cut=0.1@2'
//	go run ./cmd/rrsim -scenario capacity   # 500,000 contexts over TCP
//	go run ./cmd/rrsim -metrics 127.0.0.1:9100 -duration 60s  # Prometheus /metrics during the run
//	go run ./cmd/rrsim -backend redis        # the same scenarios on real redis-server replicas
//
// With -backend redis the requests go through transport/resp to real
// redis-server replicas started on 127.0.0.1 (one per host; needs
// redis-server on PATH), the faults are the servers' own (SIGSTOP, SIGKILL,
// MASTERDOWN, DEBUG SLEEP, connections cut mid-stream; see
// sim.RedisScenarios), and the workload is GET, MGET and LRANGE reads.
//
// The capacity scenario is not in the default set (it offers 100,000
// reads/s and needs the machine to itself); its proxies run in a child
// process (this binary with -fleet-child as its only argument) so that the
// heap, GC and CPU figures it reports are the client's own.
//
// The exit status is 1 if any correctness invariant broke in any run (a
// record missing or duplicated, a request without exactly one final
// result, a user buffer changed, a leaked context, ...), 2 for bad flags or
// a run that could not start, 0 otherwise. Performance targets are printed
// ("target met/MISSED") but do not change the exit status: machines are
// noisy, invariants are not.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/readretry/readretry/sim"
)

func main() {
	if sim.IsFleetChild(os.Args) {
		if err := sim.ServeFleet(os.Stdin, os.Stdout, sim.FleetHooks{}); err != nil {
			fmt.Fprintln(os.Stderr, "rrsim:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runScenario is sim.Run; tests replace it to see how rrsim reports a
// broken invariant or a failed run.
var runScenario = sim.Run

// config is the parsed command line.
type config struct {
	scenarios []sim.Scenario
	opt       sim.Options
	json      bool
	plot      string
	verbose   bool
	metrics   string
}

// parseFlags parses args; errors are usage errors (exit status 2).
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("rrsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenario := fs.String("scenario", "default", "scenario `NAME`, a comma-separated list, \"default\" or \"all\"")
	profile := fs.String("profile", "", "run one custom scenario whose proxies all have this profile `SPEC` (e.g. latency=1ms/50ms,drop=0.02,cut=0.1@2); overrides -scenario")
	var of sim.Flags
	of.Register(fs, sim.FlagUsage{
		Duration: "how long each scenario sends requests",
		Rate:     "requests per second per mode, open loop",
		Simple:   "read retry budget of simple reads",
		Complex:  "read retry budget of complex reads",
		Retries:  "ReadRetryMaxCnt of the zone, 1..8",
		Wait:     "wait timeout of requests without read retry",
	})
	count := fs.Int("count", 0, "send exactly `N` requests per mode instead of running for -duration")
	hosts := fs.Int("hosts", 4, "logical hosts in the zone")
	ports := fs.Int("ports", 2, "proxies per host")
	asJSON := fs.Bool("json", false, "print one JSON array of reports instead of the table")
	plot := fs.String("plot", "", "write the latency CDFs (retry on vs off, per scenario) to `FILE.png`")
	verbose := fs.Bool("v", false, "log the engine's and the transport's messages to stderr, and add the requests, peak-ctx and B/ctx columns to the table")
	backend := fs.String("backend", sim.BackendProxies, "what the requests meet: `NAME` \""+sim.BackendProxies+"\" (simulated proxies) or \""+sim.BackendRedis+"\" (real redis-server replicas)")
	metrics := fs.String("metrics", "", "serve Prometheus metrics (the engine's counters of both modes, labelled retry=on|off) at http://`ADDR`/metrics during the run, e.g. 127.0.0.1:9100")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rrsim [flags]\n\nScenarios:\n")
		for _, s := range sim.Scenarios() {
			fmt.Fprintf(stderr, "  %-15s %s\n", s.Name, s.About)
		}
		fmt.Fprintf(stderr, "\nScenarios with -backend %s:\n", sim.BackendRedis)
		for _, s := range sim.RedisScenarios() {
			fmt.Fprintf(stderr, "  %-15s %s\n", s.Name, s.About)
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if err := of.Check(); err != nil {
		return nil, err
	}
	if *hosts <= 0 || *ports <= 0 || *count < 0 {
		return nil, errors.New("-hosts and -ports must be positive, -count not negative")
	}
	cfg := &config{json: *asJSON, plot: *plot, verbose: *verbose, metrics: *metrics}
	switch {
	case *backend != sim.BackendProxies && *backend != sim.BackendRedis:
		return nil, fmt.Errorf("-backend %q: want %s or %s", *backend, sim.BackendProxies, sim.BackendRedis)
	case *backend == sim.BackendRedis && *profile != "":
		return nil, errors.New("-profile needs the simulated proxies (-backend " + sim.BackendProxies + ")")
	case *backend == sim.BackendRedis:
		sc, err := sim.ParseRedisScenarios(*scenario)
		if err != nil {
			return nil, err
		}
		cfg.scenarios = sc
	case *profile != "":
		p, err := sim.ParseProfile(*profile)
		if err != nil {
			return nil, err
		}
		cfg.scenarios = []sim.Scenario{{Name: "custom", About: p.String(), Base: p}}
	default:
		sc, err := sim.ParseScenarios(*scenario)
		if err != nil {
			return nil, err
		}
		cfg.scenarios = sc
	}
	cfg.opt = of.Options()
	cfg.opt.Requests, cfg.opt.Hosts, cfg.opt.Ports = *count, *hosts, *ports
	cfg.opt.Backend = *backend
	// The capacity scenario's proxies run in this binary started again,
	// so that its memory and CPU figures are the client's own.
	cfg.opt.FleetProcess = sim.FleetChild
	return cfg, nil
}

// run is the command without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rrsim:", err)
		return 2
	}
	if cfg.verbose {
		cfg.opt.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if cfg.metrics != "" {
		ms, err := startMetrics(cfg.metrics)
		if err != nil {
			fmt.Fprintln(stderr, "rrsim:", err)
			return 2
		}
		defer ms.close()
		fmt.Fprintf(stderr, "rrsim: metrics at %s\n", ms.url)
		for i, sc := range cfg.scenarios {
			if sc.Load != nil {
				// sim.Run drops a capacity scenario's events, the only way in
				// to its client.
				fmt.Fprintf(stderr, "rrsim: -metrics: %s is a capacity run, whose client is not exported; Go and process metrics are\n", sc.Name)
			}
			cfg.scenarios[i] = ms.hook(sc)
		}
	}
	prog := newProgress(stderr, len(cfg.scenarios))
	var reports []sim.Report
	began := time.Now()
	for i, sc := range cfg.scenarios {
		prog.scenario = i + 1
		cfg.opt.Progress = prog.update
		rs, err := runScenario(ctx, sc, cfg.opt)
		if err != nil {
			fmt.Fprintf(stderr, "rrsim: scenario %s: %v\n", sc.Name, err)
			return 2
		}
		reports = append(reports, rs...)
		prog.done(sc.Name, rs)
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			fmt.Fprintln(stderr, "rrsim:", err)
			return 2
		}
	} else {
		shape := cfg.opt.Fleet()
		fmt.Fprintf(stdout, "rrsim: %d scenarios, %v each at %d req/s per mode, %s, budgets %v/%v, %d retries (%.1fs)\n\n",
			len(cfg.scenarios), cfg.opt.Duration, cfg.opt.Rate, shape,
			cfg.opt.SimpleBudget, cfg.opt.ComplexBudget, cfg.opt.MaxRetries, time.Since(began).Seconds())
		_ = sim.WriteTable(stdout, reports, cfg.verbose)
		fmt.Fprintln(stdout)
		_ = sim.WriteTargets(stdout, sim.Targets(reports))
		for _, n := range sim.Notes(reports) {
			fmt.Fprintln(stdout, n)
		}
		for _, l := range sim.ChurnLines(reports) {
			fmt.Fprintln(stdout, l)
		}
	}
	if cfg.plot != "" {
		if err := writePlot(cfg.plot, reports, cfg.scenarios, cfg.opt); err != nil {
			fmt.Fprintln(stderr, "rrsim: plot:", err)
			return 2
		}
		if !cfg.json {
			fmt.Fprintf(stdout, "\nlatency CDFs written to %s\n", cfg.plot)
		}
	}
	failed := false
	for _, r := range reports {
		if r.Passed() {
			continue
		}
		failed = true
		mode := "off"
		if r.Retry {
			mode = "on"
		}
		for _, v := range r.Violations {
			fmt.Fprintf(stderr, "rrsim: INVARIANT BROKEN: %s (retry %s): %s\n", r.Scenario, mode, v)
		}
	}
	if failed {
		return 1
	}
	return 0
}

// progress writes a progress line to stderr: rewritten in place on a
// terminal, one line per finished scenario otherwise.
type progress struct {
	w        io.Writer
	tty      bool
	total    int
	scenario int
	width    int
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) update(s sim.Progress) {
	if !p.tty {
		return
	}
	phase := fmt.Sprintf("%4.1fs/%.1fs", s.Elapsed.Seconds(), s.Duration.Seconds())
	if s.Draining {
		phase = "draining  "
	}
	line := fmt.Sprintf("[%d/%d] %-15s %s  requests %7d  final results %7d", p.scenario, p.total, s.Scenario, phase, s.Requests, s.Finals)
	p.width = max(p.width, len(line))
	fmt.Fprintf(p.w, "\r%-*s", p.width, line)
}

func (p *progress) done(name string, rs []sim.Report) {
	var req, ok uint64
	pass := true
	for _, r := range rs {
		req += r.Requests
		ok += r.OK
		pass = pass && r.Passed()
	}
	check := "invariants ok"
	if !pass {
		check = "INVARIANTS BROKEN"
	}
	line := fmt.Sprintf("[%d/%d] %-15s done: %d requests, %d ok, %s", p.scenario, p.total, name, req, ok, check)
	if p.tty {
		fmt.Fprintf(p.w, "\r%-*s\n", p.width, line)
		return
	}
	fmt.Fprintln(p.w, line)
}
