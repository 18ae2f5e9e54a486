// Command rrcompare runs readretry and the read-retry designs Go
// developers use instead on the same faults, at the same load, and prints
// one table (issue 14). Every client meets rrsim's scenarios — the same
// loopback proxies, fault profiles, seeds, open-loop workload and answer
// checker (package sim) — one client at a time, each against a fresh fleet
// of proxies in a child process, so that the CPU time and heap this process
// reports are the client's own.
//
//	cd bench && go run ./cmd/rrcompare                  # every scenario, every client
//	go run ./cmd/rrcompare -scenario slow-tail,inflight -duration 5s
//	go run ./cmd/rrcompare -json > rrcompare.json
//	go run ./cmd/rrcompare -plot ../docs/rrcompare.png  # latency CDFs, one line per client
//	go run ./cmd/rrcompare -backend redis               # real redis-server replicas, go-redis peers
//
// With -backend redis every client reads the same real redis-server
// replicas on 127.0.0.1 (one per host, loaded with the same data; needs
// redis-server on PATH) under rrsim's Redis scenarios (sim.RedisScenarios:
// faults made by the servers themselves): readretry over transport/resp,
// and go-redis as Go services use it — round robin over one client per
// replica, and with failsafe-go's hedge policy.
//
// Clients (-clients picks some): readretry (the engine over
// transport/tcp, polled as rrsim polls it), goroutines (the same schedule
// and proxy choice written by hand: a goroutine per request, a time.Timer
// per attempt, a mutex-guarded map, a reader goroutine per connection),
// failsafe-go (hedgepolicy inside a timeout, over the same demultiplexing
// TCP client), grpc-hedging (grpc-go's service config hedgingPolicy
// against a gRPC front on each proxy) and grpc-failsafe (grpc-go with
// failsafe-go's hedging interceptor).
//
// The inflight scenario is the cost run: every proxy silent, -inflight
// requests sent at -inflight-rate with budgets that outlast the sending,
// then a full collection and the heap, goroutine stacks and GC pause per
// request in flight.
//
// Exit status: 1 if an invariant broke for a readretry client (a record
// missing or doubled, a final result missing, a user buffer changed…); a
// peer that breaks one is reported (FAIL in its row, a line on stderr) and
// does not change the status; 2 for bad flags
// or a run that could not start; goals are printed, met or MISSED, and do
// not change it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readretry/readretry/sim"
)

func main() {
	if sim.IsFleetChild(os.Args) {
		if err := serveChild(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "rrcompare:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, sim.FleetChild)
	stop()
	os.Exit(code)
}

// serveChild serves one fleet with a gRPC front beside each proxy.
func serveChild(in io.Reader, out io.Writer) error {
	var fr *fronts
	return sim.ServeFleet(in, out, sim.FleetHooks{
		Started: func(f *sim.Fleet) ([]string, func(), error) {
			var addrs []string
			var err error
			fr, addrs, err = startFronts(f)
			if err != nil {
				return nil, nil, err
			}
			return addrs, fr.stop, nil
		},
		Changed: func(f *sim.Fleet) error { return fr.follow(f) },
	})
}

// cpuScenario is steady at each of -cpu-rate's rates: CPU and system
// calls per request where the per-request work, not the harness's fixed
// ticks and wake-ups, dominates. Its rows are named cpu@RATE (cpuName).
const cpuScenario = "cpu"

// cpuName is the cpu scenario's row name at rate requests per second:
// cpu@10k for 10,000.
func cpuName(rate int) string {
	if rate%1000 == 0 {
		return fmt.Sprintf("%s@%dk", cpuScenario, rate/1000)
	}
	return fmt.Sprintf("%s@%d", cpuScenario, rate)
}

// isCPU reports whether a row's scenario is one of the cpu scenario's.
func isCPU(name string) bool { return strings.HasPrefix(name, cpuScenario+"@") }

// parseRates parses -cpu-rate: comma-separated positive requests per
// second, duplicates dropped.
func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-cpu-rate %q: want positive requests per second", f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-cpu-rate: no rate")
	}
	return out, nil
}

// defaultScenarios are rrsim's scenarios that every client can run —
// not cap and settings, which change the engine's own settings — and the
// in-flight cost run.
var defaultScenarios = []string{"steady", cpuScenario, "slow-tail", "blackhole-host", "blackhole-two-hosts", "flapping", "stream-cut", "error-codes", "duplicates", "all-down", inflightScenario}

type config struct {
	scenarios    []sim.Scenario
	kinds        []kind
	opt          sim.Options
	inflight     int
	inflightRate int
	cpuRates     []int
	cpuRate      map[string]int // rate of each cpu scenario, by its name
	json         bool
	plot         string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("rrcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenario := fs.String("scenario", "default", "comma-separated scenario `NAMES`, or \"default\"")
	clients := fs.String("clients", "all", "comma-separated client `NAMES`, or \"all\"")
	var of sim.Flags
	of.Register(fs, sim.FlagUsage{
		Duration: "how long each client sends in each scenario",
		Rate:     "requests per second, open loop",
		Simple:   "budget of simple reads",
		Complex:  "budget of complex reads",
		Retries:  "re-sends per read: ReadRetryMaxCnt, n hedges, maxAttempts-1",
		Wait:     "timeout of writes (never retried)",
	})
	inflight := fs.Int("inflight", 100_000, "requests in flight in the inflight scenario")
	inflightRate := fs.Int("inflight-rate", 25_000, "requests per second while the inflight scenario fills up")
	cpuRate := fs.String("cpu-rate", "10000,50000", "comma-separated requests per second of the cpu scenario (steady proxies), one run per `RATES`")
	asJSON := fs.Bool("json", false, "print one JSON array of rows instead of the table")
	backend := fs.String("backend", sim.BackendProxies, "what the clients meet: `NAME` \""+sim.BackendProxies+"\" (simulated proxies) or \""+sim.BackendRedis+"\" (real redis-server replicas, go-redis peers)")
	plotPath := fs.String("plot", "", "write latency CDFs (one line per client, a tile per scenario) to `FILE.png`")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rrcompare [flags]\n\nScenarios (default: %s):\n", strings.Join(defaultScenarios, ","))
		for _, s := range sim.Scenarios() {
			if slices.Contains(defaultScenarios, s.Name) {
				fmt.Fprintf(stderr, "  %-15s %s\n", s.Name, s.About)
			}
		}
		fmt.Fprintf(stderr, "  %-15s %s\n", cpuScenario, "steady at each -cpu-rate: CPU and system calls per request at steady state")
		fmt.Fprintf(stderr, "  %-15s %s\n\nClients:\n", inflightScenario, "every proxy silent: heap, stacks and GC with -inflight requests in flight")
		for _, k := range kinds {
			fmt.Fprintf(stderr, "  %-15s %s\n", k.name, k.about)
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
	if *inflight <= 0 || *inflightRate <= 0 {
		return nil, errors.New("-inflight and -inflight-rate must be positive")
	}
	rates, err := parseRates(*cpuRate)
	if err != nil {
		return nil, err
	}
	cfg := &config{json: *asJSON, plot: *plotPath, inflight: *inflight, inflightRate: *inflightRate, cpuRates: rates, cpuRate: map[string]int{}}
	switch *backend {
	case sim.BackendProxies:
	case sim.BackendRedis:
		return parseRedis(cfg, *scenario, *clients, of.Options())
	default:
		return nil, fmt.Errorf("-backend %q: want %s or %s", *backend, sim.BackendProxies, sim.BackendRedis)
	}
	names := defaultScenarios
	if s := strings.TrimSpace(*scenario); s != "" && s != "default" {
		names = nil
		for _, n := range strings.Split(s, ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	for _, n := range names {
		if n == inflightScenario {
			cfg.scenarios = append(cfg.scenarios, sim.Scenario{Name: inflightScenario, Base: sim.Profile{Drop: 1}})
			continue
		}
		if n == cpuScenario {
			st, _ := sim.LookupScenario("steady")
			for _, r := range rates {
				cfg.cpuRate[cpuName(r)] = r
				cfg.scenarios = append(cfg.scenarios, sim.Scenario{Name: cpuName(r), Base: st.Base})
			}
			continue
		}
		sc, err := sim.LookupScenario(n)
		if err != nil {
			return nil, err
		}
		for _, e := range sc.Events {
			if e.Client != nil {
				return nil, fmt.Errorf("scenario %s changes the engine's settings; only readretry could run it", n)
			}
		}
		if sc.Load != nil || sc.MaxContexts > 0 {
			return nil, fmt.Errorf("scenario %s is about the engine's own context cap; run it with rrsim", n)
		}
		cfg.scenarios = append(cfg.scenarios, sc)
	}
	if len(cfg.scenarios) == 0 {
		return nil, errors.New("no scenario")
	}
	if *clients == "all" || *clients == "" {
		cfg.kinds = kinds
	} else {
		for _, n := range strings.Split(*clients, ",") {
			i := slices.IndexFunc(kinds, func(k kind) bool { return k.name == strings.TrimSpace(n) })
			if i < 0 {
				return nil, fmt.Errorf("unknown client %q", n)
			}
			cfg.kinds = append(cfg.kinds, kinds[i])
		}
	}
	cfg.opt = of.Options()
	cfg.opt.Hosts, cfg.opt.Ports = 4, 2
	return cfg, nil
}

// parseRedis finishes cfg for -backend redis: rrsim's Redis scenarios
// ("default" is all of them) and the Redis clients.
func parseRedis(cfg *config, scenario, clients string, opt sim.Options) (*config, error) {
	sc, err := sim.ParseRedisScenarios(scenario)
	if err != nil {
		return nil, err
	}
	cfg.scenarios = sc
	if clients == "all" || clients == "" {
		cfg.kinds = redisKinds
	} else {
		for _, n := range strings.Split(clients, ",") {
			i := slices.IndexFunc(redisKinds, func(k kind) bool { return k.name == strings.TrimSpace(n) })
			if i < 0 {
				return nil, fmt.Errorf("unknown client %q with -backend %s", n, sim.BackendRedis)
			}
			cfg.kinds = append(cfg.kinds, redisKinds[i])
		}
	}
	cfg.opt = opt
	cfg.opt.Hosts, cfg.opt.Ports, cfg.opt.Backend = 4, 1, sim.BackendRedis
	return cfg, nil
}

// optionsFor returns the options of one scenario: the inflight run fills
// up at its own rate, with budgets and write timeout that outlast the
// sending so that every request is in flight when it ends.
func (cfg *config) optionsFor(sc sim.Scenario) sim.Options {
	opt := cfg.opt
	if r, ok := cfg.cpuRate[sc.Name]; ok {
		opt.Rate = r
	}
	if sc.Name == inflightScenario {
		opt.Rate = cfg.inflightRate
		opt.Duration = time.Duration(float64(cfg.inflight) / float64(cfg.inflightRate) * float64(time.Second))
		// Long enough that none ends before the measurement, a slow
		// full collection (seconds, for some clients) included.
		hold := opt.Duration + 5*time.Second
		opt.SimpleBudget, opt.ComplexBudget, opt.WaitTimeout = hold, hold, hold
	}
	return opt
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, child func() *exec.Cmd) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rrcompare:", err)
		return 2
	}
	began := time.Now()
	var rows []row
	for _, sc := range cfg.scenarios {
		opt := cfg.optionsFor(sc)
		for _, k := range cfg.kinds {
			rw, err := runOne(ctx, sc, opt, k, child)
			if err != nil {
				fmt.Fprintf(stderr, "rrcompare: %s with %s: %v\n", sc.Name, k.name, err)
				return 2
			}
			check := "invariants ok"
			if len(rw.Violations) > 0 {
				check = "INVARIANTS BROKEN"
			}
			fmt.Fprintf(stderr, "%-15s %-13s %6d requests, p99.9 %s, %s\n", sc.Name, k.name, rw.Requests, sim.FormatMs(rw.P999Ms), check)
			rows = append(rows, rw)
		}
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			fmt.Fprintln(stderr, "rrcompare:", err)
			return 2
		}
	} else {
		fmt.Fprintf(stdout, "rrcompare: %d scenarios x %d clients, %v each at %d req/s (cpu: %v/s; inflight: %d at %d/s), %s (%.0fs)\n\n",
			len(cfg.scenarios), len(cfg.kinds), cfg.opt.Duration, cfg.opt.Rate, cfg.cpuRates, cfg.inflight, cfg.inflightRate, describe(cfg.opt), time.Since(began).Seconds())
		writeTable(stdout, rows)
		fmt.Fprintln(stdout)
		writeGoals(stdout, goals(rows))
		for _, r := range rows {
			if r.MaxStallMs > sim.StallNoteMs {
				fmt.Fprintf(stdout, "note: %s/%s: the generator ran up to %s late (machine busy): that client met a lumpier load\n", r.Scenario, r.Client, sim.FormatMs(r.MaxStallMs))
			}
		}
	}
	if cfg.plot != "" {
		if err := writePlot(cfg.plot, rows, cfg); err != nil {
			fmt.Fprintln(stderr, "rrcompare: plot:", err)
			return 2
		}
	}
	return exitCode(rows, stderr)
}

// exitCode is 1 when a readretry client broke an invariant, else 0. Every
// broken invariant is printed to stderr, a peer's too, and the peer's row
// says FAIL in the table; but what this program checks is readretry, so a
// peer's failure (failsafe-go over gRPC has been seen to break one) is a
// finding to report, not a failed run.
func exitCode(rows []row, stderr io.Writer) int {
	code := 0
	for _, r := range rows {
		ours := strings.HasPrefix(r.Client, "readretry")
		for _, v := range r.Violations {
			who := "peer"
			if ours {
				who, code = "readretry", 1
			}
			fmt.Fprintf(stderr, "rrcompare: INVARIANT BROKEN (%s): %s with %s: %s\n", who, r.Scenario, r.Client, v)
		}
	}
	return code
}
