package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/sim/cdf"
)

// TestPlotPage: the picture carries the run's parameters in its caption,
// marks x, the budgets and the wait timeout in every tile (a capacity
// run's own budgets in its tile), and draws retry on and off in two of
// readretry's styles (issue 29). x is the first segment of a simple read,
// 2T/((n+1)(n+2)) (SPEC R6): 2·200ms/(4·5) = 20 ms, and 2·33s/20 = 3.3 s.
func TestPlotPage(t *testing.T) {
	opt := sim.Options{Duration: 3 * time.Second, Rate: 1234, Hosts: 5, Ports: 3, Seed: 42,
		SimpleBudget: 200 * time.Millisecond, ComplexBudget: 700 * time.Millisecond, MaxRetries: 3,
		WaitTimeout: 1500 * time.Millisecond, Backend: sim.BackendProxies}
	var scs []sim.Scenario
	for _, n := range []string{"steady", "blackhole-two-hosts", "capacity", "settings"} {
		sc, err := sim.LookupScenario(n)
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	on := []time.Duration{time.Millisecond, 2 * time.Millisecond}
	off := []time.Duration{3 * time.Millisecond}
	reports := []sim.Report{
		{Scenario: "steady", Retry: true, Latencies: on}, {Scenario: "steady", Latencies: off},
		{Scenario: "blackhole-two-hosts", Latencies: off}, {Scenario: "blackhole-two-hosts", Retry: true, Latencies: on},
		{Scenario: "capacity", Retry: true, Latencies: on},
		{Scenario: "settings", Retry: true, Latencies: on}, {Scenario: "settings", Latencies: off},
	}
	pg := plotPage(reports, scs, opt)
	for _, want := range []string{"1234 req/s", "for 3s", "5 hosts x 3 ports", "seed 42", "200ms simple", "700ms complex",
		"3 retries", "x 20ms", "wait timeout 1.5s", "backend proxies"} {
		if !strings.Contains(pg.Caption, want) {
			t.Errorf("caption lacks %q: %q", want, pg.Caption)
		}
	}
	if got := strings.Count(pg.Caption, "\n"); got != 1 {
		t.Errorf("caption of %d lines, want 2: %q", got+1, pg.Caption)
	}
	wantTitles := []string{"steady", "blackhole-two-hosts (2 hosts)", "capacity (budgets 33s/33s)", "settings (settings change mid-run; marks at the start)"}
	if len(pg.Tiles) != len(wantTitles) {
		t.Fatalf("%d tiles, want %d", len(pg.Tiles), len(wantTitles))
	}
	ms := time.Millisecond
	usual := []cdf.Mark{{Label: "x 20ms", At: 20 * ms}, {Label: "simple 200ms", At: 200 * ms}, {Label: "complex 700ms", At: 700 * ms}, {Label: "wait 1.5s", At: 1500 * ms}}
	capacity := []cdf.Mark{{Label: "x 3.3s", At: 3300 * ms}, {Label: "simple 33s", At: 33 * time.Second}, {Label: "complex 33s", At: 33 * time.Second}, {Label: "wait 1.5s", At: 1500 * ms}}
	for i, tl := range pg.Tiles {
		if tl.Title != wantTitles[i] {
			t.Errorf("tile %d title %q, want %q", i, tl.Title, wantTitles[i])
		}
		want := usual
		if i == 2 {
			want = capacity
		}
		if !slices.Equal(tl.Marks, want) {
			t.Errorf("tile %s marks %v, want %v", tl.Title, tl.Marks, want)
		}
		if len(tl.Lines) != 2 || tl.Lines[0].Label != "retry on" || tl.Lines[1].Label != "retry off" {
			t.Fatalf("tile %s lines %+v", tl.Title, tl.Lines)
		}
		if !slices.Equal(tl.Lines[0].Latencies, on) {
			t.Errorf("tile %s: retry on has %v, want %v", tl.Title, tl.Lines[0].Latencies, on)
		}
		if wantOff := off; i == 2 {
			if len(tl.Lines[1].Latencies) != 0 {
				t.Errorf("capacity runs retry on only, retry off has %v", tl.Lines[1].Latencies)
			}
		} else if !slices.Equal(tl.Lines[1].Latencies, wantOff) {
			t.Errorf("tile %s: retry off has %v, want %v", tl.Title, tl.Lines[1].Latencies, wantOff)
		}
		a, b := tl.Lines[0].Style, tl.Lines[1].Style
		if a.Color == b.Color || slices.Equal(a.Dashes, b.Dashes) {
			t.Errorf("tile %s: retry on and off drawn alike: %+v, %+v", tl.Title, a, b)
		}
	}
}
