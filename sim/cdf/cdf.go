// Package cdf draws latency CDFs — the sorted times to a final result of a
// run, one line per run — as a PNG page of tiles, one tile per scenario,
// on a log time axis and a "nines" fraction axis. The nines axis gives 0
// to 0.9, 0.9 to 0.99, 0.99 to 0.999 and 0.999 to 0.9999 the same height,
// so that the tail of a CDF, where read retry (SPEC R1) and hedging act,
// is as visible as its body and tails are compared by looking.
//
// Every tile of a page shares one time axis — the same decades, the same
// scale — so that a curve standing further right in one tile than in
// another is slower, not drawn on another scale (issue 29). A tile marks
// the times a run is built around (the budgets, the wait timeout, the
// first segment) with labelled vertical lines, and a page carries a
// caption, the run's parameters, so that a picture read on its own says
// what was run. Ours and Peer give readretry's variants and the peers
// they are compared with two families of styles that differ in colour
// and in dash pattern (and ours are thicker).
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

	"github.com/readretry/readretry/retry"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
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

// Style is how a line is stroked.
type Style struct {
	// Color is the stroke's colour; nil keeps gonum's default (black).
	Color color.Color
	// Width is the stroke's width; 0 keeps gonum's default.
	Width vg.Length
	// Dashes is the stroke's dash pattern (on, off, ... lengths); nil draws
	// a solid line.
	Dashes []vg.Length
}

// ourStyles are readretry's variants: thick, cool colours of the
// Okabe–Ito palette (told apart by readers with the common colour vision
// deficiencies), each with a dash pattern of its own.
var ourStyles = []Style{
	{Color: color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, Width: vg.Points(2.2)},                                                                              // blue, solid
	{Color: color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(8), vg.Points(3)}},                               // bluish green, long dashes
	{Color: color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1.5), vg.Points(2)}}, // reddish purple, dash-dot
	{Color: color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}},                               // sky blue, dots
}

// peerStyles are the peers': thinner, warm or grey, each with a dash
// pattern none of ourStyles has.
var peerStyles = []Style{
	{Color: color.RGBA{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}},                                                               // vermillion
	{Color: color.RGBA{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(1), vg.Points(1.5)}},                                                             // orange, fine dots
	{Color: color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(10), vg.Points(2), vg.Points(2), vg.Points(2)}},                                  // grey, long dash-dot
	{Color: color.RGBA{R: 0x8b, G: 0x45, B: 0x13, A: 0xff}, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(3), vg.Points(3), vg.Points(1), vg.Points(3)}},                                   // brown
	{Color: color.RGBA{R: 0x00, G: 0x00, B: 0x00, A: 0xff}, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(5), vg.Points(1.5), vg.Points(1), vg.Points(1.5), vg.Points(1), vg.Points(1.5)}}, // black, dash-dot-dot
	{Color: color.RGBA{R: 0xf0, G: 0xc0, B: 0x20, A: 0xff}, Width: vg.Points(1.3), Dashes: []vg.Length{vg.Points(7), vg.Points(4)}},                                                               // yellow, sparse dashes
}

// NumOurs and NumPeers are how many distinct styles Ours and Peer have;
// past them the styles repeat.
var (
	NumOurs  = len(ourStyles)
	NumPeers = len(peerStyles)
)

// Ours returns the style of readretry's i-th variant (i from 0: rrsim's
// retry on and off, rrcompare's readretry, readretry-do,
// readretry-adaptive…): the first NumOurs differ from each other and from
// every Peer in colour and in dash pattern, and are thicker than a
// peer's. i is taken modulo NumOurs. The Dashes slice is the caller's.
func Ours(i int) Style { return ourStyles[mod(i, len(ourStyles))].clone() }

// Peer returns the style of the i-th peer compared with readretry: thinner
// than Ours, and the first NumPeers differ in colour and dash pattern
// from each other and from Ours. i is taken modulo NumPeers. The Dashes
// slice is the caller's.
func Peer(i int) Style { return peerStyles[mod(i, len(peerStyles))].clone() }

func mod(i, n int) int { return ((i % n) + n) % n }

func (s Style) clone() Style {
	s.Dashes = append([]vg.Length(nil), s.Dashes...)
	return s
}

// Line is one curve of a tile.
type Line struct {
	// Label is the legend's entry.
	Label string
	// Latencies are the run's times to a final result, sorted ascending.
	// They are read during Encode and not kept. A line without any is
	// left out, legend entry included.
	Latencies []time.Duration
	Style
}

// Mark is a labelled vertical line across a tile at a time the run was
// built around: a read retry budget, the wait timeout, the first segment.
type Mark struct {
	Label string        // drawn beside the line, e.g. "simple budget 300ms"
	At    time.Duration // where; a mark at 0 or below is left out
}

// RunMarks returns the marks of a run of read retry (SPEC R1, R6) with
// these budgets, ReadRetryMaxCnt retries and wait timeout, in time order
// of a default run: "x" at the first segment of a simple read,
// x = 2T/((n+1)(n+2)) (where its first re-send goes out; left out when
// the schedule has a single segment), "simple" and "complex" at the
// budgets (where a read gives up), "wait" at the wait timeout of
// requests without read retry. A duration <= 0 gives no mark.
func RunMarks(simple, complexBudget, wait time.Duration, retries int) []Mark {
	var out []Mark
	if d := retry.SimpleDeadlines(simple, retries); len(d) > 1 {
		out = append(out, Mark{Label: "x " + short(d[0]), At: d[0]})
	}
	for _, m := range []Mark{{"simple", simple}, {"complex", complexBudget}, {"wait", wait}} {
		if m.At > 0 {
			out = append(out, Mark{Label: m.Label + " " + short(m.At), At: m.At})
		}
	}
	return out
}

// short is d for a label, to 0.1 ms: 300ms, 1s, 1.5s, 33.3ms.
func short(d time.Duration) string { return d.Round(time.Millisecond / 10).String() }

// Tile is one chart of a page: a scenario's lines.
type Tile struct {
	Title  string // above the chart: the scenario's name
	YLabel string // the fraction axis's label
	Lines  []Line // in legend order
	Marks  []Mark // vertical lines, drawn under the curves
}

// Page is a picture: a caption above tiles laid out two a row.
type Page struct {
	// Caption is drawn across the top, one or more lines ("\n"): what was
	// run — the rate, the duration, the fleet, the budgets, the seed.
	// "" leaves no room for it.
	Caption string
	// Tiles in reading order. A tile none of whose lines has a latency is
	// left out.
	Tiles []Tile
	// TileWidth and TileHeight are one tile's size.
	TileWidth, TileHeight vg.Length
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
		x := ms(sorted[i])
		out = append(out, plotter.XY{X: x, Y: math.Min(float64(i+1)/float64(n), TopNines)})
	}
	return out
}

// ms is d in milliseconds, at least MinMs.
func ms(d time.Duration) float64 { return math.Max(float64(d)/1e6, MinMs) }

// Axis returns the time axis every tile of tiles shares, in milliseconds:
// from the round number (1, 2 or 5 × 10^k) at or below the smallest
// latency or mark of any drawn tile to the one at or above the largest.
// Tiles without latencies are not drawn and do not count. ok is false
// when no line has a latency.
//
// The axis is logarithmic: a run's reads end from tens of microseconds
// (a fast answer) to seconds (a budget or the wait timeout), five decades,
// and a linear axis would squeeze every answer that did not wait for a
// re-send into its first pixels.
func Axis(tiles []Tile) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	drawn := false
	for _, t := range tiles {
		for _, l := range t.Lines {
			if n := len(l.Latencies); n > 0 {
				drawn = true
				lo, hi = math.Min(lo, ms(l.Latencies[0])), math.Max(hi, ms(l.Latencies[n-1]))
			}
		}
	}
	if !drawn {
		return 0, 0, false
	}
	for _, t := range tiles {
		if !hasLatencies(t) {
			continue
		}
		for _, m := range t.Marks {
			if m.At > 0 {
				lo, hi = math.Min(lo, ms(m.At)), math.Max(hi, ms(m.At))
			}
		}
	}
	lo, hi = niceDown(lo), niceUp(hi)
	if hi <= lo {
		hi = niceUp(lo * 1.5)
	}
	return lo, hi, true
}

// niceSteps are the mantissas an axis end may have: 1, 2 and 5 times a
// power of ten, so that an end is a round number but the axis wastes at
// most a factor 2.5 on either side (whole decades would waste up to 10).
var niceSteps = []float64{1, 2, 5, 10}

// niceDown returns the largest 1, 2 or 5 × 10^k at or below v > 0.
func niceDown(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	out := p
	for _, m := range niceSteps {
		// The tolerance keeps 0.3/0.1 = 2.9999… from falling a step.
		if m*p <= v*(1+1e-9) {
			out = m * p
		}
	}
	return out
}

// niceUp returns the smallest 1, 2 or 5 × 10^k at or above v > 0.
func niceUp(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range niceSteps {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func hasLatencies(t Tile) bool {
	for _, l := range t.Lines {
		if len(l.Latencies) > 0 {
			return true
		}
	}
	return false
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

// markStyle strokes every Mark: thin, grey, dotted, so that it reads as a
// reference line and not as a curve.
var markStyle = draw.LineStyle{Color: color.RGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff}, Width: vg.Points(0.8),
	Dashes: []vg.Length{vg.Points(1.5), vg.Points(1.5)}}

// markPlotter draws a tile's marks: a vertical line over the data area
// and its label, rotated, up from the bottom right of the line.
type markPlotter struct {
	marks []Mark
	style draw.LineStyle
	text  text.Style
}

// Plot implements plot.Plotter.
func (m markPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, mk := range m.marks {
		v := ms(mk.At)
		if mk.At <= 0 || v < p.X.Min || v > p.X.Max {
			continue
		}
		x := trX(v)
		c.StrokeLine2(m.style, x, c.Min.Y, x, c.Max.Y)
		c.FillText(m.text, vg.Point{X: x + vg.Points(1), Y: c.Min.Y + vg.Points(2)}, mk.Label)
	}
}

// chart draws one tile on the time axis lo..hi (ms); nil if none of its
// lines has a latency.
func chart(t Tile, lo, hi float64) (*plot.Plot, error) {
	if !hasLatencies(t) {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = t.Title
	p.X.Label.Text = "time to final result (ms, log)"
	p.Y.Label.Text = t.YLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = ninesScale{}
	p.Y.Tick.Marker = ninesTicks{}
	p.Add(plotter.NewGrid())
	if len(t.Marks) > 0 {
		p.Add(markPlotter{marks: t.Marks, style: markStyle, text: text.Style{
			Color: markStyle.Color, Font: font.From(plot.DefaultFont, 7), Rotation: math.Pi / 2,
			XAlign: draw.XLeft, YAlign: draw.YTop, Handler: p.TextHandler}})
	}
	for _, c := range t.Lines {
		if len(c.Latencies) == 0 {
			continue
		}
		l, err := plotter.NewLine(Points(c.Latencies))
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
	}
	// Set after Add, which widens the axes to the data: every tile gets
	// exactly the page's range.
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, TopNines
	// Top left stays empty: on a nines axis every curve reaches the top
	// only at its right end.
	p.Legend.Top = true
	p.Legend.Left = true
	// Smaller text and a longer sample than gonum's: a legend of seven
	// clients covers less of the curves, and each sample is long enough
	// to show its dash pattern whole.
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(30)
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = -vg.Points(6)
	return p, nil
}

// charts returns a plot per drawable tile of pg, in order, all on Axis's
// range; ErrNoLatencies if there is none.
func charts(pg Page) ([]*plot.Plot, error) {
	lo, hi, ok := Axis(pg.Tiles)
	if !ok {
		return nil, ErrNoLatencies
	}
	var plots []*plot.Plot
	for _, t := range pg.Tiles {
		p, err := chart(t, lo, hi)
		if err != nil {
			return nil, err
		}
		if p != nil {
			plots = append(plots, p)
		}
	}
	return plots, nil
}

// captionStyle is the caption's text style.
func captionStyle() text.Style {
	return text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 10),
		XAlign: draw.XLeft, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
}

// pad is the space around the caption and the page's edges.
var pad = vg.Points(6)

// captionHeight is the room the caption takes at the top of the page.
func captionHeight(caption string) vg.Length {
	if caption == "" {
		return 0
	}
	return captionStyle().Height(caption) + 2*pad
}

// grid lays plots out two a row.
func grid(plots []*plot.Plot) [][]*plot.Plot {
	cols := min(len(plots), 2)
	rows := (len(plots) + cols - 1) / cols
	g := make([][]*plot.Plot, rows)
	for j := range g {
		g[j] = make([]*plot.Plot, cols)
		for i := range g[j] {
			if k := j*cols + i; k < len(plots) {
				g[j][i] = plots[k]
			}
		}
	}
	return g
}

// size is the page's size for plots.
func size(pg Page, plots []*plot.Plot) (w, h vg.Length) {
	g := grid(plots)
	return pg.TileWidth * vg.Length(len(g[0])), pg.TileHeight*vg.Length(len(g)) + captionHeight(pg.Caption)
}

// render draws pg's caption and plots on dc and returns the canvas each
// plot was drawn on, laid out as grid does.
func render(dc draw.Canvas, pg Page, plots []*plot.Plot) [][]draw.Canvas {
	if pg.Caption != "" {
		dc.FillText(captionStyle(), vg.Point{X: dc.Min.X + pad, Y: dc.Max.Y - pad}, pg.Caption)
	}
	body := draw.Crop(dc, 0, 0, 0, -captionHeight(pg.Caption))
	g := grid(plots)
	t := draw.Tiles{Rows: len(g), Cols: len(g[0]), PadX: vg.Points(18), PadY: vg.Points(18),
		PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: vg.Points(12)}
	canvases := plot.Align(g, t, body)
	for j := range g {
		for i := range g[j] {
			if g[j][i] != nil {
				g[j][i].Draw(canvases[j][i])
			}
		}
	}
	return canvases
}

// Encode writes pg as one PNG (96 dpi) to w: the caption, then the tiles
// two a row at most, each TileWidth by TileHeight, in the order given, on
// one shared time axis (Axis). A tile none of whose lines has a latency
// is left out; if that leaves none, Encode writes nothing and returns
// ErrNoLatencies. Other errors are gonum's or w's.
func Encode(w io.Writer, pg Page) error {
	plots, err := charts(pg)
	if err != nil {
		return err
	}
	width, height := size(pg, plots)
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))
	render(draw.New(img), pg, plots)
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// WriteFile is Encode to the file at path, created or truncated. The
// picture is drawn before the file is touched: if drawing fails
// (ErrNoLatencies included), no file is created.
func WriteFile(path string, pg Page) error {
	var buf bytes.Buffer
	if err := Encode(&buf, pg); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o666)
}
