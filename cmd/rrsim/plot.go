package main

import (
	"image/color"

	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/sim/cdf"
	"gonum.org/v1/plot/vg"
)

var (
	colorOn  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue: read retry on
	colorOff = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red: read retry off
)

// writePlot writes one PNG with a tile per scenario: the latency CDF of the
// reads with read retry on beside the one with it off (dashed), on a log
// time axis and a "nines" fraction axis, so that tails are compared by
// looking. A scenario's reports stand next to each other, as sim.Run
// returns them.
func writePlot(path string, reports []sim.Report) error {
	var tiles []cdf.Tile
	for i := range reports {
		r := &reports[i]
		k := len(tiles) - 1
		if k < 0 || tiles[k].Title != r.Scenario {
			// Line 0 is retry on, line 1 retry off; one without a report
			// has no latencies and is left out.
			tiles = append(tiles, cdf.Tile{Title: r.Scenario, YLabel: "fraction of reads (CDF)", Lines: []cdf.Line{
				{Label: "retry on", Color: colorOn, Width: vg.Points(1.5)},
				{Label: "retry off", Color: colorOff, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}},
			}})
			k++
		}
		line := 1
		if r.Retry {
			line = 0
		}
		tiles[k].Lines[line].Latencies = r.Latencies
	}
	return cdf.WriteFile(path, tiles, vg.Points(360), vg.Points(250))
}
