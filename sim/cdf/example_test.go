package cdf_test

import (
	"bytes"
	"fmt"
	"image/png"
	"time"

	"github.com/readretry/readretry/sim/cdf"
	"gonum.org/v1/plot/vg"
)

// Draw one scenario's tile, two runs' latencies as two lines in two of
// readretry's styles, the budget marked, under a caption naming the run;
// then look at the page: one tile 360 x 240 pt at 96 dpi (480 x 320 px)
// under the caption's line and padding (23 pt, 31 px).
func ExampleEncode() {
	fast := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
	slow := []time.Duration{time.Millisecond, 2 * time.Millisecond, 80 * time.Millisecond}
	tile := cdf.Tile{Title: "slow-tail", YLabel: "fraction of reads", Lines: []cdf.Line{
		{Label: "retry on", Latencies: fast, Style: cdf.Ours(0)},
		{Label: "retry off", Latencies: slow, Style: cdf.Ours(1)},
	}, Marks: []cdf.Mark{{Label: "simple budget 300ms", At: 300 * time.Millisecond}}}
	page := cdf.Page{Caption: "2000 req/s for 2s, seed 1", Tiles: []cdf.Tile{tile},
		TileWidth: vg.Points(360), TileHeight: vg.Points(240)}
	var buf bytes.Buffer
	if err := cdf.Encode(&buf, page); err != nil {
		fmt.Println(err)
		return
	}
	img, err := png.Decode(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(img.Bounds().Dx(), "x", img.Bounds().Dy(), "px")
	fmt.Println(cdf.Axis(page.Tiles))
	fmt.Println(cdf.Points(slow))
	// Output:
	// 480 x 351 px
	// 1 500 true
	// [{1 0.3333333333333333} {2 0.6666666666666666} {80 0.9999}]
}
