package cdf

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"
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
	if err := WriteFile(path, empty, vg.Points(360), vg.Points(250)); !errors.Is(err, ErrNoLatencies) {
		t.Fatalf("no latencies: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a file was created for nothing to draw: %v", err)
	}
	// Three drawable tiles and an empty one: two columns, two rows of
	// 360 x 250 pt at 96 dpi (4/3 px per pt).
	line := Line{Label: "on", Latencies: ramp(2000), Color: color.Black, Width: vg.Points(1.5)}
	tiles := []Tile{{Title: "a", Lines: []Line{line}}, empty[0], {Title: "c", Lines: []Line{line, {Label: "off", Latencies: ramp(10)}}}, {Title: "d", Lines: []Line{line}}}
	path = filepath.Join(dir, "cdf.png")
	if err := WriteFile(path, tiles, vg.Points(360), vg.Points(250)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != 960 || h < 666 || h > 667 {
		t.Fatalf("page %dx%d px, want 960x666.7", w, h)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.png"), tiles, vg.Points(360), vg.Points(250)); err == nil {
		t.Fatal("wrote into a missing directory")
	}
}
