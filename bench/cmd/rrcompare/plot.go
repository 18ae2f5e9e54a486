package main

import (
	"image/color"

	"github.com/readretry/readretry/sim/cdf"
	"gonum.org/v1/plot/vg"
)

// clientColors are the clients' line colours, in kinds order.
var clientColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // readretry: blue
	{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // readretry-do: cyan
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // goroutines: red
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // failsafe-go: green
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // grpc-hedging: purple
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // grpc-failsafe: orange
}

// writePlot writes one PNG with a tile per scenario (the inflight run has
// no latencies worth drawing): each client's read latency CDF on a log
// time axis and a nines fraction axis, so that tails — where hedging
// acts — are compared by looking.
func writePlot(path string, rows []row) error {
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
			tiles = append(tiles, cdf.Tile{Title: r.Scenario, YLabel: "fraction of reads"})
		}
		l := cdf.Line{Label: r.Client, Latencies: r.latencies, Width: vg.Points(1.3)}
		for j, kd := range kinds {
			if kd.name == r.Client {
				l.Color = clientColors[j%len(clientColors)]
			}
		}
		tiles[k].Lines = append(tiles[k].Lines, l)
	}
	return cdf.WriteFile(path, tiles, vg.Points(380), vg.Points(260))
}
