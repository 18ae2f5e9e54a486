package main

import (
	"errors"
	"image/color"
	"math"
	"os"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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

const topNines = 0.9999

// ninesScale gives each nine of a CDF the same height (0.9, 0.99,
// 0.999…), so that tails — where hedging acts — show as well as bodies.
type ninesScale struct{}

func nines(y float64) float64 { return -math.Log10(1 - math.Min(math.Max(y, 0), topNines)) }

// Normalize implements plot.Normalizer.
func (ninesScale) Normalize(lo, hi, y float64) float64 {
	return (nines(y) - nines(lo)) / (nines(hi) - nines(lo))
}

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

// cdf thins sorted latencies to about 600 points, keeping the top 0.2%.
func cdf(sorted []time.Duration) plotter.XYs {
	n := len(sorted)
	step := max(1, n/600)
	tail := n - max(n/500, 1)
	var out plotter.XYs
	for i := 0; i < n; i++ {
		if i%step != 0 && i < tail && i != n-1 {
			continue
		}
		out = append(out, plotter.XY{X: math.Max(float64(sorted[i])/1e6, 0.01), Y: math.Min(float64(i+1)/float64(n), topNines)})
	}
	return out
}

// writePlot writes one PNG with a tile per scenario: each client's read
// latency CDF on a log time axis and a nines fraction axis.
func writePlot(path string, rows []row) error {
	var order []string
	by := map[string][]*row{}
	for i := range rows {
		r := &rows[i]
		if len(r.latencies) == 0 || r.Scenario == inflightScenario {
			continue
		}
		if by[r.Scenario] == nil {
			order = append(order, r.Scenario)
		}
		by[r.Scenario] = append(by[r.Scenario], r)
	}
	if len(order) == 0 {
		return errors.New("no read latencies to plot")
	}
	var plots []*plot.Plot
	for _, name := range order {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "time to final result (ms, log)"
		p.Y.Label.Text = "fraction of reads"
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Y.Scale, p.Y.Tick.Marker = ninesScale{}, ninesTicks{}
		p.Y.Min, p.Y.Max = 0, topNines
		p.Add(plotter.NewGrid())
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range by[name] {
			pts := cdf(r.latencies)
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			for i, k := range kinds {
				if k.name == r.Client {
					l.Color = clientColors[i%len(clientColors)]
				}
			}
			l.Width = vg.Points(1.3)
			l.StepStyle = plotter.PostStep
			p.Add(l)
			p.Legend.Add(r.Client, l)
			lo, hi = math.Min(lo, pts[0].X), math.Max(hi, pts[len(pts)-1].X)
		}
		p.X.Min = math.Pow(10, math.Floor(math.Log10(lo)))
		p.X.Max = math.Max(math.Pow(10, math.Ceil(math.Log10(hi))), p.X.Min*10)
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), -vg.Points(6)
		plots = append(plots, p)
	}
	cols := min(len(plots), 2)
	nrows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, nrows)
	for j := range grid {
		grid[j] = make([]*plot.Plot, cols)
		for i := range grid[j] {
			if k := j*cols + i; k < len(plots) {
				grid[j][i] = plots[k]
			}
		}
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Points(float64(380*cols)), vg.Points(float64(260*nrows))), vgimg.UseDPI(96))
	t := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Points(18), PadY: vg.Points(18),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	canvases := plot.Align(grid, t, draw.New(img))
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
