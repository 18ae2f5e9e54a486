package main

import (
	"bytes"
	"image/color"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/sim/cdf"
)

// TestPlotPage: rrcompare's picture carries the run's parameters, marks
// x, the budgets and the wait timeout in every tile, and draws each
// client in its own style (issue 29). x is the first segment of a simple
// read, 2T/((n+1)(n+2)) (SPEC R6): 2·200ms/(4·5) = 20 ms.
func TestPlotPage(t *testing.T) {
	var errb bytes.Buffer
	cfg, err := parseFlags([]string{"-scenario", "steady,cpu,slow-tail,inflight", "-duration", "3s", "-rate", "1234", "-seed", "42",
		"-simple", "200ms", "-complex", "700ms", "-retries", "3", "-wait", "1500ms", "-cpu-rate", "7000"}, &errb)
	if err != nil {
		t.Fatal(err, errb.String())
	}
	lat := []time.Duration{time.Millisecond, 3 * time.Millisecond}
	var rows []row
	for _, sc := range []string{"steady", "cpu@7000", "slow-tail", inflightScenario} {
		for _, k := range cfg.kinds {
			rows = append(rows, row{Client: k.name, Scenario: sc, latencies: lat})
		}
	}
	pg := plotPage(rows, cfg)
	for _, want := range []string{"rrcompare", "backend proxies", "1234 req/s", "for 3s", "4 hosts x 2 ports", "seed 42", "200ms simple",
		"700ms complex", "3 re-sends", "x 20ms", "wait timeout 1.5s", "cpu@N"} {
		if !strings.Contains(pg.Caption, want) {
			t.Errorf("caption lacks %q: %q", want, pg.Caption)
		}
	}
	ms := time.Millisecond
	wantMarks := []cdf.Mark{{Label: "x 20ms", At: 20 * ms}, {Label: "simple 200ms", At: 200 * ms}, {Label: "complex 700ms", At: 700 * ms}, {Label: "wait 1.5s", At: 1500 * ms}}
	var titles []string
	for _, tl := range pg.Tiles {
		titles = append(titles, tl.Title)
		if !slices.Equal(tl.Marks, wantMarks) {
			t.Errorf("tile %s marks %v, want %v", tl.Title, tl.Marks, wantMarks)
		}
		if len(tl.Lines) != len(cfg.kinds) {
			t.Errorf("tile %s: %d lines, want one per client (%d)", tl.Title, len(tl.Lines), len(cfg.kinds))
		}
	}
	if want := []string{"steady", "cpu@7000", "slow-tail"}; !slices.Equal(titles, want) {
		t.Errorf("tiles %v, want %v (no inflight)", titles, want)
	}
}

// TestClientStyles: every client of either backend has a style of its
// own — colour and dash pattern both differ — and readretry's variants
// are drawn thicker than every peer.
func TestClientStyles(t *testing.T) {
	var names []string
	for _, k := range slices.Concat(kinds, redisKinds) {
		if !slices.Contains(names, k.name) {
			names = append(names, k.name)
		}
	}
	same := func(a, b color.Color) bool {
		r1, g1, b1, a1 := a.RGBA()
		r2, g2, b2, a2 := b.RGBA()
		return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
	}
	for i, a := range names {
		sa := clientStyle(a)
		if sa.Color == nil {
			t.Errorf("%s has no colour", a)
			continue
		}
		for _, b := range names[i+1:] {
			sb := clientStyle(b)
			if sb.Color != nil && same(sa.Color, sb.Color) {
				t.Errorf("%s and %s share a colour", a, b)
			}
			if slices.Equal(sa.Dashes, sb.Dashes) {
				t.Errorf("%s and %s share a dash pattern %v", a, b, sa.Dashes)
			}
			if ours(a) && !ours(b) && sa.Width <= sb.Width {
				t.Errorf("readretry variant %s (%v) not thicker than peer %s (%v)", a, sa.Width, b, sb.Width)
			}
		}
	}
	if !ours("readretry-adaptive") || ours("goroutines") {
		t.Fatal("ours() misclassifies")
	}
}
