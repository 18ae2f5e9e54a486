package cdf_test

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"time"

	"github.com/readretry/readretry/sim/cdf"
	"gonum.org/v1/plot/vg"
)

// Draw one scenario's tile, two runs' latencies as two lines, and look at
// the page: one tile 360 x 240 pt at 96 dpi.
func ExampleEncode() {
	fast := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	slow := []time.Duration{time.Millisecond, 2 * time.Millisecond, 80 * time.Millisecond}
	tile := cdf.Tile{Title: "slow-tail", YLabel: "fraction of reads", Lines: []cdf.Line{
		{Label: "retry on", Latencies: fast, Color: color.RGBA{B: 0xff, A: 0xff}, Width: vg.Points(1.5)},
		{Label: "retry off", Latencies: slow, Color: color.RGBA{R: 0xff, A: 0xff}, Width: vg.Points(1.5)},
	}}
	var buf bytes.Buffer
	if err := cdf.Encode(&buf, []cdf.Tile{tile}, vg.Points(360), vg.Points(240)); err != nil {
		fmt.Println(err)
		return
	}
	img, err := png.Decode(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(img.Bounds().Dx(), "x", img.Bounds().Dy(), "px")
	fmt.Println(cdf.Points(slow))
	// Output:
	// 480 x 320 px
	// [{1 0.3333333333333333} {2 0.6666666666666666} {80 0.9999}]
}
