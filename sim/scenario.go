package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// Scenario is a named fault setting for a run: every proxy's starting
// profile, changes at set points of the run, and checks particular to it.
type Scenario struct {
	// Name is the -scenario flag's word for it, e.g. "blackhole-host".
	Name  string
	About string // one line, for -scenario help
	// Base is every proxy's profile at the start.
	Base Profile
	// Events change profiles during the run, in order of At.
	Events []Event
	// Hosts, if not 0, is the fleet's number of hosts for the run in place
	// of Options.Hosts (a scenario whose point is the shape of the zone).
	Hosts int
	// MaxContexts is the zone's context cap (SPEC R2) for the run; 0 means
	// the engine's default.
	MaxContexts int
	// MaxRetries is the most re-sends any request may make when the
	// scenario's events raise ReadRetryMaxCnt above Options.MaxRetries (the
	// checker's limit on attempts is then MaxRetries+1).
	MaxRetries int
	// Expect returns the scenario's own broken expectations for a report
	// (beyond the invariants every run checks); nil means none.
	Expect func(sc *Scenario, r *Report) []string
	// Churn, if set, redeploys the proxies and adds and removes zones while
	// the run's reads go on, and reports whether the process stays flat
	// (SPEC R22).
	Churn *Churn
	// Load, if set, makes the scenario a capacity run: it sets the offered
	// load, the answer delay and the budgets in place of Options', runs
	// read retry on only, and reports memory, GC pauses and CPU per read
	// (Report's capacity figures).
	Load *Load
}

// Churn is what a churn scenario changes every Every while reads go on
// (SPEC R22: a client that runs for months through redeploys and zones
// that come and go keeps only what it uses). Each period the fleet's
// proxies move to new endpoints (Fleet.Redeploy) and every client applies
// the new route to the run's zone; Zones extra zones (a route of the
// fleet's current proxies, no traffic) are added, and the previous
// period's extra zones removed. The run lasts at least MinDuration.
//
// The report's ChurnFigures sample each client at the end of the second
// period (start) and of the last (end): the process's goroutines and live
// heap (after a GC), the transport's open connections and proxies, the
// client's ProxyIDs in use, and dials per second over the period. Flat
// means, end against start: goroutines within +10% + 10, heap within
// ×1.5 + 16 MiB, connections and proxies at most two fleets' worth (the
// route's and the last one's, draining), dials per second within ×1.5 + one
// fleet per period — see expectChurn. Before SPEC R22 every figure grew
// with the redeploys.
type Churn struct {
	Every       time.Duration // period of the redeploys and zone changes
	Zones       int           // extra zones added (and removed a period later) each period
	MinDuration time.Duration // the run's least duration
}

// ChurnLoad is the churn scenario's: a redeploy and 50 zones added and 50
// removed every second, for at least 30 s.
var ChurnLoad = Churn{Every: time.Second, Zones: 50, MinDuration: 30 * time.Second}

// Load is a capacity scenario's offered load: Rate reads per second for
// Duration against proxies that all answer after exactly Latency, so that
// Rate × Latency contexts are in flight at the plateau (from Latency to
// Duration). The budgets must leave the first segment longer than Latency,
// or every read is re-sent before its answer comes.
type Load struct {
	Rate     int           // reads per second, open loop
	Duration time.Duration // of the sending phase
	Latency  time.Duration // every proxy's fixed answer time
	// SimpleBudget and ComplexBudget are the read retry budgets (SPEC R1).
	SimpleBudget, ComplexBudget time.Duration
	// Mix is the workload's command mix; nil means ReadMix.
	Mix []Weight
	// Contexts is the goal for peak contexts (the run reports whether it was
	// reached); 0 means Rate × Latency.
	Contexts int64
}

// ReadMix is DefaultMix without the writes: every request of a capacity
// run holds a read retry context.
var ReadMix = []Weight{
	{wire.CmdGet, 20}, {wire.CmdPBFieldGet, 10}, {wire.CmdListGet, 10},
	{wire.CmdBatchGet, 10}, {wire.CmdPBBatchFieldGet, 5}, {wire.CmdListGetBatch, 5},
	{wire.CmdGetByPartKey, 15}, {wire.CmdListGetAll, 15},
}

// CapacityLoad is the capacity scenario's load: 100,000 reads/s for 7 s
// against proxies answering after 5.1 s — 510,000 contexts from 5.1 s to
// 7 s, a margin over the goal of 500,000 — with budgets of 33 s (2
// retries: the first segment is 5.5 s, so no read is re-sent before its
// answer).
var CapacityLoad = Load{
	Rate: 100_000, Duration: 7 * time.Second, Latency: 5100 * time.Millisecond,
	SimpleBudget: 33 * time.Second, ComplexBudget: 33 * time.Second, Contexts: 500_000,
}

// Event sets the profile of the selected proxies when a share At (0..1)
// of the run's duration has passed; At 0 applies before the first request.
// An event with Client set changes the clients' settings instead, while
// they send and poll.
type Event struct {
	At      float64  // share of the run's duration, 0..1
	Select  Selector // the proxies a profile event changes
	Profile Profile  // their new profile
	// Client, if set, is called for each client with the zone, the fleet's
	// route and whether that client runs with read retry on; its error
	// ends the run.
	Client func(c *retry.Client, zone retry.Zone, route []retry.Proxy, retryOn bool) error
}

// healthy is the scenarios' baseline proxy: lognormal latency with a 1 ms
// median and a short tail.
var healthy = Profile{Latency: Latency{P50: time.Millisecond, P99: 5 * time.Millisecond}}

// flappingEvents is the flapping scenario's timeline on either backend:
// host 2 goes dark at 20% and comes back at 45%, host 3 refuses
// connections from 55% to 80%. dark is the backend's dark profile.
func flappingEvents(dark Profile) []Event {
	return []Event{
		{At: 0.20, Select: HostSel(1), Profile: dark},
		{At: 0.45, Select: HostSel(1), Profile: healthy},
		{At: 0.55, Select: HostSel(2), Profile: with(healthy, func(p *Profile) { p.Refuse = true })},
		{At: 0.80, Select: HostSel(2), Profile: healthy},
	}
}

func with(p Profile, f func(*Profile)) Profile { f(&p); return p }

// Scenarios returns the built-in scenarios, in the order rrsim runs them.
// The slice is new on each call.
func Scenarios() []Scenario {
	dark := with(healthy, func(p *Profile) { p.Drop = 1 })
	return []Scenario{
		{
			Name:  "steady",
			About: "healthy proxies: p50 1 ms, p99 5 ms",
			Base:  healthy,
		},
		{
			Name:   "blackhole-host",
			About:  "every proxy of host 1 takes requests and never answers",
			Base:   healthy,
			Events: []Event{{At: 0, Select: HostSel(0), Profile: dark}},
		},
		{
			Name:   "blackhole-two-hosts",
			About:  "two hosts, one dark: every proxy of host 1 takes requests and never answers (ignores -hosts)",
			Base:   healthy,
			Hosts:  2,
			Events: []Event{{At: 0, Select: HostSel(0), Profile: dark}},
		},
		{
			Name:  "error-codes",
			About: "5% of answers are -7953 (PROXY_ERR_SWIFT_TIMEOUT)",
			Base:  with(healthy, func(p *Profile) { p.Error = 0.05 }),
		},
		{
			Name:  "slow-tail",
			About: "lognormal latency, p50 1 ms, p99 250 ms",
			Base:  with(healthy, func(p *Profile) { p.Latency = Latency{P50: time.Millisecond, P99: 250 * time.Millisecond} }),
		},
		{
			Name:  "stream-cut",
			About: "complex answers cut after 2 packets (20%), stalled 400 ms mid-stream (5%), connection closed mid-stream (0.2%)",
			Base: with(healthy, func(p *Profile) {
				p.PacketRecords, p.Cut, p.CutAfter = 4, 0.2, 2
				p.Stall, p.StallFor = 0.05, 400*time.Millisecond
				p.Close = 0.002
			}),
		},
		{
			Name:   "flapping",
			About:  "host 2 goes dark at 20% and comes back at 45%; host 3 refuses connections from 55% to 80%",
			Base:   healthy,
			Events: flappingEvents(dark),
		},
		{
			Name:   "all-down",
			About:  "every proxy takes requests and never answers: each read ends with one -19219, each write with -16659",
			Base:   dark,
			Expect: expectAllDown,
		},
		{
			Name:        "cap",
			About:       "20 ms answers and a cap of 16 contexts: reads beyond it go without retry and are still answered",
			Base:        Profile{Latency: Latency{P50: 20 * time.Millisecond}},
			MaxContexts: 16,
			Expect:      expectCap,
		},
		{
			Name:  "settings",
			About: "budgets, ReadRetryMaxCnt, the route and the cap change under load (2% drops, p99 50 ms)",
			Base: with(healthy, func(p *Profile) {
				p.Latency.P99, p.Drop, p.PacketRecords = 50*time.Millisecond, 0.02, 4
			}),
			MaxRetries: 3,
			Events:     settingsEvents(),
		},
		{
			Name:  "duplicates",
			About: "5% of packets are sent twice: each record still reaches the caller once",
			Base:  with(healthy, func(p *Profile) { p.Dup = 0.05; p.PacketRecords = 4 }),
		},
		{
			Name:   "churn",
			About:  "the proxies move to new endpoints every second and 50 zones come and go, under reads, for at least 30 s: goroutines, heap, connections and dials stay flat",
			Base:   healthy,
			Churn:  &ChurnLoad,
			Expect: expectChurn,
		},
		{
			Name:   "capacity",
			About:  "500,000 contexts in one zone: 100,000 reads/s for 7 s, answers after 5.1 s (proxies in a child process; ignores -rate, -duration, -simple, -complex)",
			Load:   &CapacityLoad,
			Expect: expectCapacity,
			// Above the default 500,000 so that the load's plateau (its
			// jitter included) is held whole, with a context for every read.
			MaxContexts: 600_000,
		},
	}
}

// settingsEvents change the clients' settings five times during the run
// (SPEC §1 R1, R2, R5 at run time; §6 settings changed under load). The
// retry-off client gets the route and configuration changes but keeps its
// budgets at zero, so it stays without read retry.
func settingsEvents() []Event {
	route := func(keep func(i int, p retry.Proxy) bool, maxRetries int) func(*retry.Client, retry.Zone, []retry.Proxy, bool) error {
		return func(c *retry.Client, z retry.Zone, all []retry.Proxy, _ bool) error {
			var rt []retry.Proxy
			for i, p := range all {
				if keep(i, p) {
					rt = append(rt, p)
				}
			}
			return c.ApplyRoute(z, rt, ConfList(maxRetries))
		}
	}
	onlyOn := func(f func(c *retry.Client) error) func(*retry.Client, retry.Zone, []retry.Proxy, bool) error {
		return func(c *retry.Client, _ retry.Zone, _ []retry.Proxy, on bool) error {
			if !on {
				return nil
			}
			return f(c)
		}
	}
	return []Event{
		{At: 0.2, Client: onlyOn(func(c *retry.Client) error { return c.SetReadRetryTimeout(120*time.Millisecond, 240*time.Millisecond) })},
		{At: 0.35, Client: route(func(i int, _ retry.Proxy) bool { return i%3 != 0 }, 1)},
		{At: 0.5, Client: onlyOn(func(c *retry.Client) error { c.SetReadRetryMaxContextCountPerZone(8); return nil })},
		{At: 0.65, Client: route(func(int, retry.Proxy) bool { return true }, 3)},
		{At: 0.8, Client: onlyOn(func(c *retry.Client) error {
			c.SetReadRetryMaxContextCountPerZone(0)
			return c.SetReadRetryTimeout(300*time.Millisecond, 600*time.Millisecond)
		})},
	}
}

// DefaultScenarios are the scenarios rrsim runs with no -scenario flag.
var DefaultScenarios = []string{"steady", "blackhole-host", "blackhole-two-hosts", "error-codes", "slow-tail", "stream-cut", "flapping", "all-down", "cap", "duplicates", "settings"}

// ErrUnknownScenario: a name no built-in scenario has.
var ErrUnknownScenario = errors.New("sim: unknown scenario")

// LookupScenario returns the built-in scenario called name.
func LookupScenario(name string) (Scenario, error) { return lookupScenario(name, Scenarios()) }

func lookupScenario(name string, all []Scenario) (Scenario, error) {
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("%w: %q (have %s)", ErrUnknownScenario, name, strings.Join(scenarioNames(all), ", "))
}

func scenarioNames(all []Scenario) []string {
	var out []string
	for _, s := range all {
		out = append(out, s.Name)
	}
	return out
}

// ParseScenarios parses rrsim's -scenario flag: "" or "default" for
// DefaultScenarios, "all" for every built-in scenario, or a comma-separated
// list of names (each once, in the order given). Errors wrap
// ErrUnknownScenario.
func ParseScenarios(s string) ([]Scenario, error) {
	return parseScenarios(s, Scenarios(), DefaultScenarios)
}

// parseScenarios is ParseScenarios over the scenarios all, with defaults
// for "" and "default".
func parseScenarios(s string, all []Scenario, defaults []string) ([]Scenario, error) {
	s = strings.TrimSpace(s)
	var names []string
	switch s {
	case "", "default":
		names = defaults
	case "all":
		names = scenarioNames(all)
	default:
		for _, n := range strings.Split(s, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				return nil, fmt.Errorf("%w: empty name in %q", ErrUnknownScenario, s)
			}
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	out := make([]Scenario, 0, len(names))
	for _, n := range names {
		sc, err := lookupScenario(n, all)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// expectAllDown: with every proxy dark, each read with retry ends with
// exactly one -19219 and each write (and each read without retry) with the
// ordinary wait timeout.
func expectAllDown(_ *Scenario, r *Report) []string {
	var out []string
	if r.Retry {
		if r.ReadRetryTimeouts != r.Reads {
			out = append(out, fmt.Sprintf("all-down: %d reads but %d ended with -19219", r.Reads, r.ReadRetryTimeouts))
		}
		if r.WaitTimeouts != r.Writes {
			out = append(out, fmt.Sprintf("all-down: %d writes but %d ended with -16659", r.Writes, r.WaitTimeouts))
		}
	} else if r.WaitTimeouts != r.Requests {
		out = append(out, fmt.Sprintf("all-down: %d requests without retry but %d ended with -16659", r.Requests, r.WaitTimeouts))
	}
	if r.OK != 0 {
		out = append(out, fmt.Sprintf("all-down: %d requests answered OK by dark proxies", r.OK))
	}
	return out
}

// expectCapacity: every read is answered (the proxies are healthy and
// slow, the budgets longer than their delay). The capacity goals (contexts,
// memory, GC pauses) are targets, not invariants: see Targets.
func expectCapacity(_ *Scenario, r *Report) []string {
	if r.ReadsOK != r.Reads {
		return []string{fmt.Sprintf("capacity: %d of %d reads answered right", r.ReadsOK, r.Reads)}
	}
	return nil
}

// expectChurn: the process stays flat under churn (see Churn for the
// tolerances); every invariant (each request's one final result, each
// record once and right) is the Checker's, as in every run.
func expectChurn(sc *Scenario, r *Report) []string {
	ch := r.Churn
	if ch == nil || ch.Redeploys < 3 {
		return []string{"churn: fewer than 3 redeploys, nothing to compare"}
	}
	var out []string
	st, end := ch.Start, ch.End
	fleet := ch.FleetSize
	perPeriod := float64(fleet) / sc.Churn.Every.Seconds()
	if lim := st.Goroutines + st.Goroutines/10 + 10; end.Goroutines > lim {
		out = append(out, fmt.Sprintf("churn: goroutines %d at the start, %d at the end (limit %d)", st.Goroutines, end.Goroutines, lim))
	}
	if lim := st.HeapMiB*1.5 + 16; end.HeapMiB > lim {
		out = append(out, fmt.Sprintf("churn: heap %.1f MiB at the start, %.1f at the end (limit %.1f)", st.HeapMiB, end.HeapMiB, lim))
	}
	if end.Conns > 2*fleet || end.Proxies > 2*fleet || end.ProxyIDs > 2*fleet {
		out = append(out, fmt.Sprintf("churn: at the end %d connections, %d proxies open, %d ProxyIDs in use (limit %d each)", end.Conns, end.Proxies, end.ProxyIDs, 2*fleet))
	}
	if lim := st.DialsPerS*1.5 + perPeriod; end.DialsPerS > lim {
		out = append(out, fmt.Sprintf("churn: %.1f dials/s at the start, %.1f at the end (limit %.1f)", st.DialsPerS, end.DialsPerS, lim))
	}
	return out
}

// expectCap: the cap bounds the contexts, and reads over it are still
// answered (healthy proxies).
func expectCap(sc *Scenario, r *Report) []string {
	var out []string
	if r.Retry && sc.MaxContexts > 0 && r.PeakContexts > int64(sc.MaxContexts) {
		out = append(out, fmt.Sprintf("cap: %d contexts held at once, cap %d", r.PeakContexts, sc.MaxContexts))
	}
	if r.OK != r.Requests {
		out = append(out, fmt.Sprintf("cap: %d of %d requests answered OK", r.OK, r.Requests))
	}
	return out
}
