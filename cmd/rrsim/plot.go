package main

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/sim/cdf"
	"gonum.org/v1/plot/vg"
)

// writePlot writes one PNG with a tile per scenario: the latency CDF of the
// reads with read retry on beside the one with it off, on one log time
// axis shared by every tile and a "nines" fraction axis, so that tails are
// compared by looking; plotPage says what is on it.
func writePlot(path string, reports []sim.Report, scenarios []sim.Scenario, opt sim.Options) error {
	return cdf.WriteFile(path, plotPage(reports, scenarios, opt))
}

// plotPage is writePlot's picture: a tile per scenario of reports (a
// scenario's reports stand next to each other, as sim.Run returns them),
// retry on in readretry's first style and retry off in its second; each
// tile marks the first segment x of a simple read, the two budgets and
// the wait timeout the run used (a capacity scenario's own budgets); the
// caption is the run's parameters. scenarios are the ones run, for what a
// scenario sets in place of opt.
func plotPage(reports []sim.Report, scenarios []sim.Scenario, opt sim.Options) cdf.Page {
	byName := map[string]sim.Scenario{}
	for _, sc := range scenarios {
		byName[sc.Name] = sc
	}
	var tiles []cdf.Tile
	var names []string // tiles' scenarios
	for i := range reports {
		r := &reports[i]
		k := len(tiles) - 1
		if k < 0 || names[k] != r.Scenario {
			// Line 0 is retry on, line 1 retry off; one without a report
			// has no latencies and is left out.
			sc := byName[r.Scenario]
			tiles = append(tiles, cdf.Tile{Title: tileTitle(sc, r.Scenario), YLabel: "fraction of reads (CDF)",
				Lines: []cdf.Line{{Label: "retry on", Style: cdf.Ours(0)}, {Label: "retry off", Style: cdf.Ours(1)}},
				Marks: marks(sc, opt)})
			names = append(names, r.Scenario)
			k++
		}
		line := 1
		if r.Retry {
			line = 0
		}
		tiles[k].Lines[line].Latencies = r.Latencies
	}
	return cdf.Page{Caption: caption(opt), Tiles: tiles, TileWidth: vg.Points(360), TileHeight: vg.Points(250)}
}

// tileTitle is a scenario's name, with what makes its tile differ from
// the caption: its own fleet or budgets, or settings changed mid-run.
func tileTitle(sc sim.Scenario, name string) string {
	switch {
	case sc.Load != nil:
		return fmt.Sprintf("%s (budgets %v/%v)", name, sc.Load.SimpleBudget, sc.Load.ComplexBudget)
	case sc.Hosts > 0:
		return fmt.Sprintf("%s (%d hosts)", name, sc.Hosts)
	}
	for _, e := range sc.Events {
		if e.Client != nil {
			return name + " (settings change mid-run; marks at the start)"
		}
	}
	return name
}

// marks are the times the run was built around (cdf.RunMarks): the
// first segment x of a simple read, the budgets — a capacity scenario's
// own — and the wait timeout.
func marks(sc sim.Scenario, opt sim.Options) []cdf.Mark {
	simple, complexB := opt.SimpleBudget, opt.ComplexBudget
	if sc.Load != nil {
		simple, complexB = sc.Load.SimpleBudget, sc.Load.ComplexBudget
	}
	return cdf.RunMarks(simple, complexB, opt.WaitTimeout, opt.MaxRetries)
}

// short is d for the caption: 300ms, 1s, 1.5s.
func short(d time.Duration) string { return d.Round(time.Millisecond / 10).String() }

// caption is the run's parameters, two lines.
func caption(opt sim.Options) string {
	backend := opt.Backend
	if backend == "" {
		backend = sim.BackendProxies
	}
	shape := opt.Fleet()
	length := fmt.Sprintf("for %v", opt.Duration)
	if opt.Requests > 0 {
		length = fmt.Sprintf("%d requests", opt.Requests)
	}
	x := ""
	if d := retry.SimpleDeadlines(opt.SimpleBudget, opt.MaxRetries); len(d) > 1 {
		x = ", first segment x " + short(d[0])
	}
	return fmt.Sprintf("rrsim, backend %s: %d req/s per mode %s, %s, seed %d\n"+
		"read retry budgets %v simple / %v complex, %d retries%s; wait timeout %v (no read retry). Dotted lines mark them.",
		backend, opt.Rate, length, shape, opt.Seed, opt.SimpleBudget, opt.ComplexBudget, opt.MaxRetries, x, opt.WaitTimeout)
}
