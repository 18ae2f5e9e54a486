// Package cdf draws latency CDFs — the sorted times to a final result of a
// run, one line per run — as a PNG page of tiles, one tile per scenario,
// on a log time axis and a "nines" fraction axis. The nines axis gives 0
// to 0.9, 0.9 to 0.99, 0.99 to 0.999 and 0.999 to 0.9999 the same height,
// so that the tail of a CDF, where read retry (SPEC R1) and hedging act,
// is as visible as its body and tails are compared by looking.
//
// cmd/rrsim draws read retry on against off with it; bench's rrcompare
// draws one line per client.
package cdf

import (
	"bytes"
	"errors"
	"image/color"
	"io"
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

// MaxPoints is about the most points Points keeps of a curve's body: the
// sorted latencies are thinned evenly, and the top 0.2% come on top.
const MaxPoints = 600

// MinMs is the smallest x Points gives, in milliseconds: every x stays
// positive for the log axis.
const MinMs = 0.01

// TopNines is the highest fraction the nines axis shows, 1 − 10⁻⁴; Points
// caps fractions at it.
const TopNines = 0.9999

// ErrNoLatencies: no line of any tile had a latency to draw.
var ErrNoLatencies = errors.New("no read latencies to plot")

// Line is one curve of a tile.
type Line struct {
	// Label is the legend's entry.
	Label string
	// Latencies are the run's times to a final result, sorted ascending.
	// They are read during Encode and not kept. A line without any is
	// left out, legend entry included.
	Latencies []time.Duration
	// Color is the stroke's colour; nil keeps gonum's default (black).
	Color color.Color
	// Width is the stroke's width; 0 keeps gonum's default.
	Width vg.Length
	// Dashes is the stroke's dash pattern (on, off, ... lengths); nil draws
	// a solid line.
	Dashes []vg.Length
}

// Tile is one chart of a page: a scenario's lines.
type Tile struct {
	Title  string // above the chart: the scenario's name
	YLabel string // the fraction axis's label
	Lines  []Line // in legend order
}

// Points returns the empirical CDF of sorted latencies as (milliseconds,
// fraction) points, thinned to about MaxPoints but keeping every point of
// the top 0.2% so that p99.9 shows. x is at least MinMs; fractions are
// capped at TopNines, the top of the axis. It returns nil for no
// latencies.
func Points(sorted []time.Duration) plotter.XYs {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	step := max(1, n/MaxPoints)
	tail := n - max(n/500, 1)
	var out plotter.XYs
	for i := 0; i < n; i++ {
		if i%step != 0 && i < tail && i != n-1 {
			continue
		}
		x := math.Max(float64(sorted[i])/1e6, MinMs)
		out = append(out, plotter.XY{X: x, Y: math.Min(float64(i+1)/float64(n), TopNines)})
	}
	return out
}

// ninesScale is the y axis giving each nine the same height: position =
// −log10(1 − y).
type ninesScale struct{}

func nines(y float64) float64 { return -math.Log10(1 - math.Min(math.Max(y, 0), TopNines)) }

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

// chart draws one tile; nil if none of its lines has a latency.
func chart(t Tile) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = t.Title
	p.X.Label.Text = "time to final result (ms, log)"
	p.Y.Label.Text = t.YLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = ninesScale{}
	p.Y.Tick.Marker = ninesTicks{}
	p.Y.Min, p.Y.Max = 0, TopNines
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range t.Lines {
		if len(c.Latencies) == 0 {
			continue
		}
		pts := Points(c.Latencies)
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		if c.Color != nil {
			l.Color = c.Color
		}
		if c.Width > 0 {
			l.Width = c.Width
		}
		l.Dashes = c.Dashes
		l.StepStyle = plotter.PostStep
		p.Add(l)
		p.Legend.Add(c.Label, l)
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

// Encode writes tiles as one PNG (96 dpi) to w: two tiles a row at most,
// each tileWidth by tileHeight, in the order given. A tile none of whose
// lines has a latency is left out; if that leaves none, Encode writes
// nothing and returns ErrNoLatencies. Other errors are gonum's or w's.
func Encode(w io.Writer, tiles []Tile, tileWidth, tileHeight vg.Length) error {
	var plots []*plot.Plot
	for _, t := range tiles {
		p, err := chart(t)
		if err != nil {
			return err
		}
		if p != nil {
			plots = append(plots, p)
		}
	}
	if len(plots) == 0 {
		return ErrNoLatencies
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
	img := vgimg.NewWith(vgimg.UseWH(tileWidth*vg.Length(cols), tileHeight*vg.Length(rows)), vgimg.UseDPI(96))
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(18), PadY: vg.Points(18),
		PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	canvases := plot.Align(grid, t, draw.New(img))
	for j := range grid {
		for i := range grid[j] {
			if grid[j][i] != nil {
				grid[j][i].Draw(canvases[j][i])
			}
		}
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// WriteFile is Encode to the file at path, created or truncated. The
// picture is drawn before the file is touched: if drawing fails
// (ErrNoLatencies included), no file is created.
func WriteFile(path string, tiles []Tile, tileWidth, tileHeight vg.Length) error {
	var buf bytes.Buffer
	if err := Encode(&buf, tiles, tileWidth, tileHeight); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o666)
}
