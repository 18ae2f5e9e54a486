package cdf

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// ramp returns n sorted latencies, i+1 µs for i = 0..n-1.
func ramp(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * time.Microsecond
	}
	return out
}

func TestPoints(t *testing.T) {
	if Points(nil) != nil {
		t.Fatal("points of no latencies")
	}
	const n = 100_000
	pts := Points(ramp(n))
	// The body thinned to one point in n/MaxPoints (rounded down, so up to
	// 1% more than MaxPoints at this n), plus every point of the top 0.2%
	// (n/500), plus the last.
	if want := MaxPoints*101/100 + n/500 + 1; len(pts) > want || len(pts) < MaxPoints {
		t.Fatalf("%d points, want %d..%d", len(pts), MaxPoints, want)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].X < pts[i-1].X || pts[i].Y < pts[i-1].Y {
			t.Fatalf("point %d %v after %v: not monotonic", i, pts[i], pts[i-1])
		}
	}
	// Every one of the top n/500 latencies is a point of its own: x in ms
	// is (i+1)/1000, y is (i+1)/n capped at TopNines.
	tail := pts[len(pts)-n/500:]
	for j, p := range tail {
		i := n - n/500 + j
		wantY := math.Min(float64(i+1)/n, TopNines)
		if p.X != float64(i+1)/1000 || p.Y != wantY {
			t.Fatalf("tail point %d = %v, want (%v, %v)", j, p, float64(i+1)/1000, wantY)
		}
	}
	if last := pts[len(pts)-1]; last.Y != TopNines {
		t.Fatalf("last fraction %v, want the axis top %v", last.Y, TopNines)
	}
	// A latency of 0 stays on the log axis.
	if p := Points([]time.Duration{0, time.Millisecond}); p[0].X != MinMs || p[1].X != 1 || p[0].Y != 0.5 {
		t.Fatalf("points %v", p)
	}
}

// TestNinesScale: each nine gets the same height, so on an axis from 0 to
// 0.9999 the nines 0.9, 0.99 and 0.999 stand at a quarter, a half and
// three quarters.
func TestNinesScale(t *testing.T) {
	for _, c := range []struct{ y, want float64 }{{0, 0}, {0.9, 0.25}, {0.99, 0.5}, {0.999, 0.75}, {0.9999, 1}, {1, 1}} {
		if got := (ninesScale{}).Normalize(0, TopNines, c.y); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Normalize(%v) = %v, want %v", c.y, got, c.want)
		}
	}
	var labels []string
	for _, tk := range (ninesTicks{}).Ticks(0.5, TopNines) {
		labels = append(labels, tk.Label)
	}
	if got, want := len(labels), 5; got != want || labels[0] != "0.5" || labels[4] != "0.9999" {
		t.Fatalf("ticks %v", labels)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	empty := []Tile{{Title: "a", Lines: []Line{{Label: "x"}}}, {Title: "b"}}
	path := filepath.Join(dir, "none.png")
	if err := WriteFile(path, Page{Tiles: empty, TileWidth: vg.Points(360), TileHeight: vg.Points(250)}); !errors.Is(err, ErrNoLatencies) {
		t.Fatalf("no latencies: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a file was created for nothing to draw: %v", err)
	}
	// Three drawable tiles and an empty one: two columns, two rows of
	// 360 x 250 pt at 96 dpi (4/3 px per pt).
	line := Line{Label: "on", Latencies: ramp(2000), Style: Style{Color: color.Black, Width: vg.Points(1.5)}}
	tiles := []Tile{{Title: "a", Lines: []Line{line}}, empty[0], {Title: "c", Lines: []Line{line, {Label: "off", Latencies: ramp(10)}}}, {Title: "d", Lines: []Line{line}}}
	pg := Page{Tiles: tiles, TileWidth: vg.Points(360), TileHeight: vg.Points(250)}
	path = filepath.Join(dir, "cdf.png")
	if err := WriteFile(path, pg); err != nil {
		t.Fatal(err)
	}
	if w, h := pngSize(t, path); w != 960 || h < 666 || h > 667 {
		t.Fatalf("page %dx%d px, want 960x666.7", w, h)
	}
	// A caption of two lines adds its room on top: two lines of 10 pt
	// text and the padding, between 20 and 50 pt (27 to 67 px).
	pg.Caption = "rate 2000/s\nseed 1"
	if err := WriteFile(path, pg); err != nil {
		t.Fatal(err)
	}
	if w, h := pngSize(t, path); w != 960 || h < 666+27 || h > 667+67 {
		t.Fatalf("captioned page %dx%d px, want 960 x 693..734", w, h)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.png"), pg); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}

func pngSize(t *testing.T, path string) (w, h int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img.Bounds().Dx(), img.Bounds().Dy()
}

// ms returns n milliseconds.
func msd(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// TestSharedAxis: every tile of a page gets the same log time axis, from
// the decade below the fastest latency or mark of any tile to the decade
// above the slowest, whatever its own lines span (issue 29).
func TestSharedAxis(t *testing.T) {
	pg := Page{Tiles: []Tile{
		{Title: "fast", Lines: []Line{{Label: "a", Latencies: []time.Duration{msd(2), msd(9)}}}},
		{Title: "empty", Lines: []Line{{Label: "none"}}, Marks: []Mark{{Label: "ignored", At: time.Hour}}},
		{Title: "wide", Lines: []Line{{Label: "b", Latencies: []time.Duration{msd(0.25), msd(1500)}}}},
		{Title: "marked", Lines: []Line{{Label: "c", Latencies: []time.Duration{msd(3)}}}, Marks: []Mark{{Label: "wait", At: 30 * time.Second}, {Label: "off", At: 0}}},
	}}
	// Smallest 0.25 ms -> 0.2; largest the 30 s mark -> 5·10^4 ms. The
	// empty tile's mark does not count: the tile is not drawn.
	const wantLo, wantHi = 0.2, 5e4
	lo, hi, ok := Axis(pg.Tiles)
	if !ok || math.Abs(lo-wantLo) > 1e-12 || math.Abs(hi-wantHi) > 1e-6 {
		t.Fatalf("Axis = %v, %v, %v; want %v, %v", lo, hi, ok, wantLo, wantHi)
	}
	plots, err := charts(pg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plots) != 3 {
		t.Fatalf("%d plots, want 3 (the empty tile left out)", len(plots))
	}
	for i, p := range plots {
		if math.Abs(p.X.Min-wantLo) > 1e-12 || math.Abs(p.X.Max-wantHi) > 1e-6 {
			t.Errorf("tile %q: x from %v to %v, want %v to %v", p.Title.Text, p.X.Min, p.X.Max, wantLo, wantHi)
		}
		if _, ok := p.X.Scale.(plot.LogScale); !ok {
			t.Errorf("tile %d: x scale %T, want a log scale", i, p.X.Scale)
		}
	}
	if _, _, ok := Axis([]Tile{{Marks: []Mark{{At: time.Second}}}}); ok {
		t.Fatal("an axis for no latencies")
	}
}

// TestNiceEnds: an axis end is 1, 2 or 5 times a power of ten, the
// nearest outside the data.
func TestNiceEnds(t *testing.T) {
	for _, c := range []struct{ v, down, up float64 }{
		{0.03, 0.02, 0.05}, {0.25, 0.2, 0.5}, {1, 1, 1}, {0.3, 0.2, 0.5}, {2, 2, 2}, {4.9, 2, 5},
		{5, 5, 5}, {7, 5, 10}, {1400, 1000, 2000}, {3000, 2000, 5000}, {5001, 5000, 10000}, {33000, 20000, 50000},
	} {
		if got := niceDown(c.v); math.Abs(got-c.down) > 1e-9*c.down {
			t.Errorf("niceDown(%v) = %v, want %v", c.v, got, c.down)
		}
		if got := niceUp(c.v); math.Abs(got-c.up) > 1e-9*c.up {
			t.Errorf("niceUp(%v) = %v, want %v", c.v, got, c.up)
		}
	}
	// One latency: the axis still spans a step.
	if lo, hi, _ := Axis([]Tile{{Lines: []Line{{Latencies: []time.Duration{msd(2)}}}}}); lo != 2 || hi != 5 {
		t.Errorf("axis of one 2 ms latency: %v..%v, want 2..5", lo, hi)
	}
}

// TestRunMarks: x is the first segment of a simple read, 2T/((n+1)(n+2))
// (SPEC R6): 2·300/(3·4) = 50 ms for T = 300 ms, n = 2, and 2·200/(4·5)
// = 20 ms for n = 3; one segment (n = 0) has no x; an unset duration no
// mark.
func TestRunMarks(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		simple, complexB, wait time.Duration
		n                      int
		want                   []Mark
	}{
		{300 * ms, 600 * ms, time.Second, 2, []Mark{{"x 50ms", 50 * ms}, {"simple 300ms", 300 * ms}, {"complex 600ms", 600 * ms}, {"wait 1s", time.Second}}},
		{200 * ms, 700 * ms, 1500 * ms, 3, []Mark{{"x 20ms", 20 * ms}, {"simple 200ms", 200 * ms}, {"complex 700ms", 700 * ms}, {"wait 1.5s", 1500 * ms}}},
		{300 * ms, 600 * ms, 0, 0, []Mark{{"simple 300ms", 300 * ms}, {"complex 600ms", 600 * ms}}},
		{0, 0, time.Second, 2, []Mark{{"wait 1s", time.Second}}},
	} {
		if got := RunMarks(c.simple, c.complexB, c.wait, c.n); !slices.Equal(got, c.want) {
			t.Errorf("RunMarks(%v, %v, %v, %d) = %v, want %v", c.simple, c.complexB, c.wait, c.n, got, c.want)
		}
	}
}

// recorded draws pg on a recording canvas and returns the actions, the
// plots and the canvas each was drawn on.
func recorded(t *testing.T, pg Page) ([]recorder.Action, []*plot.Plot, [][]draw.Canvas) {
	t.Helper()
	plots, err := charts(pg)
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder.Canvas
	w, h := size(pg, plots)
	canvases := render(draw.NewCanvas(&rec, w, h), pg, plots)
	return rec.Actions, plots, canvases
}

// stroke is a Stroke action with the colour and dashes it was drawn with.
type stroke struct {
	path   vg.Path
	color  color.Color
	width  vg.Length
	dashes []vg.Length
}

func strokes(actions []recorder.Action) []stroke {
	var out []stroke
	var cur stroke
	for _, a := range actions {
		switch a := a.(type) {
		case *recorder.SetColor:
			cur.color = a.Color
		case *recorder.SetLineWidth:
			cur.width = a.Width
		case *recorder.SetLineDash:
			cur.dashes = a.Dashes
		case *recorder.Stroke:
			s := cur
			s.path = a.Path
			out = append(out, s)
		}
	}
	return out
}

func texts(actions []recorder.Action) []recorder.FillString {
	var out []recorder.FillString
	for _, a := range actions {
		if f, ok := a.(*recorder.FillString); ok {
			out = append(out, *f)
		}
	}
	return out
}

func sameColor(a, b color.Color) bool {
	if a == nil || b == nil {
		return a == b
	}
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}

// TestMarksDrawn: each mark is a vertical line in the mark style at its
// time on the tile's axis (gonum's transform of the value), across the
// whole data area, with its label; in every tile.
func TestMarksDrawn(t *testing.T) {
	marks := []Mark{{"x 50ms", 50 * time.Millisecond}, {"simple 300ms", 300 * time.Millisecond}, {"complex 600ms", 600 * time.Millisecond}, {"wait 1s", time.Second}}
	lat := []time.Duration{msd(1), msd(2), msd(40)}
	pg := Page{Caption: "c", TileWidth: vg.Points(360), TileHeight: vg.Points(250), Tiles: []Tile{
		{Title: "a", Lines: []Line{{Label: "on", Latencies: lat}}, Marks: marks},
		{Title: "b", Lines: []Line{{Label: "on", Latencies: lat}}, Marks: marks},
	}}
	actions, plots, canvases := recorded(t, pg)
	all := strokes(actions)
	labels := map[string]int{}
	for _, f := range texts(actions) {
		labels[f.String]++
	}
	for i, p := range plots {
		dc := p.DataCanvas(canvases[0][i])
		trX, _ := p.Transforms(&dc)
		for _, m := range marks {
			x := trX(float64(m.At) / 1e6)
			found := false
			for _, s := range all {
				if len(s.path) == 2 && s.path[0].Pos.X == x && s.path[1].Pos.X == x &&
					s.path[0].Pos.Y == dc.Min.Y && s.path[1].Pos.Y == dc.Max.Y &&
					sameColor(s.color, markStyle.Color) && slices.Equal(s.dashes, markStyle.Dashes) {
					found = true
				}
			}
			if !found {
				t.Errorf("tile %d: no mark line %q at x = %v pt", i, m.Label, x)
			}
		}
	}
	for _, m := range marks {
		if labels[m.Label] != len(plots) {
			t.Errorf("label %q drawn %d times, want once a tile (%d)", m.Label, labels[m.Label], len(plots))
		}
	}
}

// TestCaptionDrawn: every line of the caption is drawn above the tiles.
func TestCaptionDrawn(t *testing.T) {
	pg := Page{Caption: "rrsim: 2000 req/s for 2s\nbudgets 300ms/600ms, seed 7", TileWidth: vg.Points(360), TileHeight: vg.Points(250),
		Tiles: []Tile{{Title: "a", Lines: []Line{{Label: "on", Latencies: ramp(100)}}}}}
	actions, _, canvases := recorded(t, pg)
	top := canvases[0][0].Max.Y
	for _, want := range strings.Split(pg.Caption, "\n") {
		found := false
		for _, f := range texts(actions) {
			if f.String == want && f.Point.Y > top {
				found = true
			}
		}
		if !found {
			t.Errorf("caption line %q not drawn above the tiles (top %v)", want, top)
		}
	}
}

// TestStyles: readretry's variants and the peers all differ in colour
// and in dash pattern, ours are thicker, and each line is stroked in its
// style.
func TestStyles(t *testing.T) {
	var all []Style
	for i := range NumOurs {
		all = append(all, Ours(i))
	}
	for i := range NumPeers {
		all = append(all, Peer(i))
	}
	if NumOurs < 4 || NumPeers < 6 {
		t.Fatalf("%d ours, %d peers: want room for rrcompare's 3 variants plus retry off and 6 peers", NumOurs, NumPeers)
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			if sameColor(all[i].Color, all[j].Color) {
				t.Errorf("styles %d and %d share a colour", i, j)
			}
			if slices.Equal(all[i].Dashes, all[j].Dashes) {
				t.Errorf("styles %d and %d share a dash pattern %v", i, j, all[i].Dashes)
			}
		}
	}
	for i := range NumOurs {
		for j := range NumPeers {
			if Ours(i).Width <= Peer(j).Width {
				t.Errorf("ours %d (%v) not thicker than peer %d (%v)", i, Ours(i).Width, j, Peer(j).Width)
			}
		}
	}
	if s := Ours(1); len(s.Dashes) > 0 {
		s.Dashes[0] = 0
		if Ours(1).Dashes[0] == 0 {
			t.Fatal("Ours shares its dash slice with the caller")
		}
	}
	if !sameColor(Ours(NumOurs).Color, Ours(0).Color) || !sameColor(Peer(-1).Color, Peer(NumPeers-1).Color) {
		t.Fatal("styles do not wrap around")
	}
	// Drawn: each line's points are stroked with its colour, width and
	// dashes.
	var lines []Line
	for i, s := range all {
		lines = append(lines, Line{Label: strconv.Itoa(i), Latencies: ramp(50 + i), Style: s})
	}
	actions, _, _ := recorded(t, Page{TileWidth: vg.Points(360), TileHeight: vg.Points(250), Tiles: []Tile{{Title: "a", Lines: lines}}})
	drawn := strokes(actions)
	for i, s := range all {
		found := false
		for _, d := range drawn {
			if len(d.path) > 50 && sameColor(d.color, s.Color) && d.width == s.Width && slices.Equal(d.dashes, s.Dashes) {
				found = true
			}
		}
		if !found {
			t.Errorf("style %d: no curve stroked with it", i)
		}
	}
}
