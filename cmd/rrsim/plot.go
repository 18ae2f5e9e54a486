package main

import (
	"errors"
	"image/color"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/readretry/readretry/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	colorOn  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue: read retry on
	colorOff = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red: read retry off
)

// cdfPoints is the most points one curve gets: the sorted latencies are
// thinned evenly, keeping the last ones where the tail is drawn.
const cdfPoints = 600

// minPlotMs keeps every x positive for the log axis.
const minPlotMs = 0.01

// topNines is the highest fraction the "nines" axis shows: 1 − 10⁻⁴.
const topNines = 0.9999

// ninesScale is a y axis that gives each nine the same height — 0 to 0.9,
// 0.9 to 0.99, 0.99 to 0.999 — so that the tail of a CDF (where read retry
// acts) is as visible as its body: position = −log10(1 − y).
type ninesScale struct{}

func nines(y float64) float64 { return -math.Log10(1 - math.Min(math.Max(y, 0), topNines)) }

// Normalize implements plot.Normalizer.
func (ninesScale) Normalize(lo, hi, y float64) float64 {
	return (nines(y) - nines(lo)) / (nines(hi) - nines(lo))
}

// ninesTicks labels 0, 0.5, 0.9, 0.99, 0.999 and 0.9999.
type ninesTicks struct{}

// Ticks implements plot.Ticker.
func (ninesTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, v := range []float64{0, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		if v >= lo && v <= hi {
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
	}
	return out
}

// cdf returns the empirical CDF of sorted latencies as (ms, fraction)
// points, thinned to at most cdfPoints but keeping every point of the
// top 0.2% so that p99.9 shows. Fractions are capped at topNines, the
// top of the axis.
func cdf(sorted []time.Duration) plotter.XYs {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	step := max(1, n/cdfPoints)
	tail := n - max(n/500, 1)
	var out plotter.XYs
	for i := 0; i < n; i++ {
		if i%step != 0 && i < tail && i != n-1 {
			continue
		}
		x := math.Max(float64(sorted[i])/1e6, minPlotMs)
		out = append(out, plotter.XY{X: x, Y: math.Min(float64(i+1)/float64(n), topNines)})
	}
	return out
}

// scenarioPlot draws one scenario's CDFs, retry on and off.
func scenarioPlot(name string, on, off *sim.Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = name
	p.X.Label.Text = "time to final result (ms, log)"
	p.Y.Label.Text = "fraction of reads (CDF)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = ninesScale{}
	p.Y.Tick.Marker = ninesTicks{}
	p.Y.Min, p.Y.Max = 0, topNines
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range []struct {
		r     *sim.Report
		label string
		col   color.Color
		dash  []vg.Length
	}{{on, "retry on", colorOn, nil}, {off, "retry off", colorOff, []vg.Length{vg.Points(4), vg.Points(2)}}} {
		if c.r == nil || len(c.r.Latencies) == 0 {
			continue
		}
		pts := cdf(c.r.Latencies)
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = c.col
		l.Width = vg.Points(1.5)
		l.Dashes = c.dash
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add(c.label, l)
		lo, hi = math.Min(lo, pts[0].X), math.Max(hi, pts[len(pts)-1].X)
	}
	if math.IsInf(lo, 1) {
		return nil, nil
	}
	// Whole decades, so that the log ticks are labelled.
	p.X.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.X.Max = math.Pow(10, math.Ceil(math.Log10(hi)))
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min * 10
	}
	// Top left stays empty: on a nines axis every curve reaches the top
	// only at its right end.
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = -vg.Points(6)
	return p, nil
}

// writePlot writes one PNG with a tile per scenario: the latency CDF of the
// reads with read retry on beside the one with it off, on a log time axis
// and a "nines" fraction axis, so that tails are compared by looking.
func writePlot(path string, reports []sim.Report) error {
	type pair struct {
		name    string
		on, off *sim.Report
	}
	var pairs []pair
	for i := range reports {
		r := &reports[i]
		k := len(pairs) - 1
		if k < 0 || pairs[k].name != r.Scenario {
			pairs = append(pairs, pair{name: r.Scenario})
			k++
		}
		if r.Retry {
			pairs[k].on = r
		} else {
			pairs[k].off = r
		}
	}
	var plots []*plot.Plot
	for _, pr := range pairs {
		p, err := scenarioPlot(pr.name, pr.on, pr.off)
		if err != nil {
			return err
		}
		if p != nil {
			plots = append(plots, p)
		}
	}
	if len(plots) == 0 {
		return errors.New("no read latencies to plot")
	}
	cols := min(len(plots), 2)
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for j := range grid {
		grid[j] = make([]*plot.Plot, cols)
		for i := range grid[j] {
			if k := j*cols + i; k < len(plots) {
				grid[j][i] = plots[k]
			}
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Points(float64(360*cols)), vg.Points(float64(250*rows))), vgimg.UseDPI(96))
	dc := draw.New(img)
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(18), PadY: vg.Points(18),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	canvases := plot.Align(grid, t, dc)
	for j := range grid {
		for i := range grid[j] {
			if grid[j][i] != nil {
				grid[j][i].Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
