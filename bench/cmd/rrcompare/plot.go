package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/sim/cdf"
	"gonum.org/v1/plot/vg"
)

// writePlot writes one PNG with a tile per scenario (the inflight run has
// no latencies worth drawing): each client's read latency CDF on one log
// time axis shared by every tile and a nines fraction axis, so that tails
// — where hedging acts — are compared by looking; plotPage says what is
// on it.
func writePlot(path string, rows []row, cfg *config) error {
	return cdf.WriteFile(path, plotPage(rows, cfg))
}

// plotPage is writePlot's picture: a tile per scenario in the order of
// rows, a line per client in clientStyle, the marks of cdf.RunMarks (x,
// the budgets and the wait timeout the scenario ran with), and the run's
// parameters as the caption.
func plotPage(rows []row, cfg *config) cdf.Page {
	byName := map[string]sim.Scenario{}
	for _, sc := range cfg.scenarios {
		byName[sc.Name] = sc
	}
	var tiles []cdf.Tile
	tile := map[string]int{} // scenario → index in tiles
	for i := range rows {
		r := &rows[i]
		if len(r.latencies) == 0 || r.Scenario == inflightScenario {
			continue
		}
		k, ok := tile[r.Scenario]
		if !ok {
			k = len(tiles)
			tile[r.Scenario] = k
			opt := cfg.optionsFor(byName[r.Scenario])
			tiles = append(tiles, cdf.Tile{Title: r.Scenario, YLabel: "fraction of reads",
				Marks: cdf.RunMarks(opt.SimpleBudget, opt.ComplexBudget, opt.WaitTimeout, opt.MaxRetries)})
		}
		tiles[k].Lines = append(tiles[k].Lines, cdf.Line{Label: r.Client, Latencies: r.latencies, Style: clientStyle(r.Client)})
	}
	return cdf.Page{Caption: caption(cfg), Tiles: tiles, TileWidth: vg.Points(380), TileHeight: vg.Points(260)}
}

// ours reports whether a client is one of readretry's variants: the
// clients this program checks (exitCode) and draws in cdf.Ours.
func ours(client string) bool { return strings.HasPrefix(client, "readretry") }

// clientStyle is a client's line style, the same in every tile and on
// either backend: readretry's variants in cdf.Ours, the peers in
// cdf.Peer, each numbered in the order of kinds then redisKinds, so that
// no two clients of one picture look alike (up to cdf.NumOurs variants
// and cdf.NumPeers peers).
func clientStyle(client string) cdf.Style {
	var our, peer []string
	for _, k := range slices.Concat(kinds, redisKinds) {
		switch {
		case ours(k.name) && !slices.Contains(our, k.name):
			our = append(our, k.name)
		case !ours(k.name) && !slices.Contains(peer, k.name):
			peer = append(peer, k.name)
		}
	}
	if i := slices.Index(our, client); i >= 0 {
		return cdf.Ours(i)
	}
	if i := slices.Index(peer, client); i >= 0 {
		return cdf.Peer(i)
	}
	// Not a known client: the next peer style after the known ones.
	return cdf.Peer(len(peer))
}

// caption is the run's parameters, two lines.
func caption(cfg *config) string {
	o := cfg.opt
	backend := o.Backend
	if backend == "" {
		backend = sim.BackendProxies
	}
	shape := o.Fleet()
	rate := fmt.Sprintf("%d req/s", o.Rate)
	if len(cfg.cpuRates) > 0 && slices.ContainsFunc(cfg.scenarios, func(s sim.Scenario) bool { return isCPU(s.Name) }) {
		rate += " (the cpu@N tiles: N req/s)"
	}
	x := ""
	if d := retry.SimpleDeadlines(o.SimpleBudget, o.MaxRetries); len(d) > 1 {
		x = fmt.Sprintf(" (first segment x %v)", d[0])
	}
	return fmt.Sprintf("rrcompare, backend %s: %s for %v per client and scenario, %s, seed %d\n"+
		"budgets %v simple / %v complex, %d re-sends per read%s; wait timeout %v (writes). Dotted lines mark them.",
		backend, rate, o.Duration, shape, o.Seed, o.SimpleBudget, o.ComplexBudget, o.MaxRetries, x, o.WaitTimeout)
}
