package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readretry/readretry/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quick are flags for short runs.
var quick = []string{"-duration", "300ms", "-rate", "300", "-simple", "100ms", "-complex", "200ms", "-wait", "300ms"}

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "nope"}, {"-rate", "0"}, {"-retries", "9"}, {"-profile", "drop=2"}, {"extra"}, {"-duration", "x"},
		{"-backend", "nope"}, {"-backend", "redis", "-profile", "drop=1"}, {"-backend", "redis", "-scenario", "cap"},
	} {
		if code, _, stderr := runArgs(t, args...); code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, _, stderr := runArgs(t, "-h"); code != 0 || !strings.Contains(stderr, "blackhole-host") {
		t.Errorf("-h: exit %d, %q", code, stderr)
	}
}

// TestTableAndPlot runs two scenarios and checks the table, the targets,
// the progress lines and the PNG.
func TestTableAndPlot(t *testing.T) {
	pngPath := filepath.Join(t.TempDir(), "cdf.png")
	code, out, stderr := runArgs(t, append([]string{"-scenario", "steady,blackhole-host", "-plot", pngPath}, quick...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"scenario", "retry", "rd-ok%", "-19219", "p99.9", "att/req", "miss/dbl", "refused",
		"steady", "blackhole-host", "target", "blackhole-host reads ok", "exactly once", "latency CDFs written"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > 120 && !strings.HasPrefix(line, "target") && !strings.HasPrefix(line, "note") {
			t.Errorf("table line of %d columns, want <= 120: %q", n, line)
		}
	}
	if strings.Count(out, " on ") < 2 || strings.Count(out, " off ") < 2 {
		t.Errorf("want a retry-on and a retry-off line per scenario:\n%s", out)
	}
	if !strings.Contains(stderr, "[1/2] steady") || !strings.Contains(stderr, "[2/2] blackhole-host") {
		t.Errorf("progress lines missing: %q", stderr)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Fatalf("plot is %v", b)
	}
}

// TestJSON checks the keys issue 6 asks for.
func TestJSON(t *testing.T) {
	code, out, stderr := runArgs(t, append([]string{"-scenario", "all-down", "-json"}, quick...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var reports []map[string]any
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("not one JSON array: %v\n%s", err, out)
	}
	if len(reports) != 2 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, k := range []string{"scenario", "retry", "requests", "reads", "final_results", "ok", "reads_ok", "read_retry_timeouts",
		"retries", "duplicates_dropped", "records_missing", "records_duplicated", "p50_ms", "p99_ms", "p999_ms", "peak_contexts"} {
		for _, r := range reports {
			if _, ok := r[k]; !ok {
				t.Errorf("report lacks key %q", k)
			}
		}
	}
	if reports[0]["retry"] != true || reports[0]["read_retry_timeouts"] != reports[0]["reads"] {
		t.Errorf("all-down retry on: %v reads, %v -19219", reports[0]["reads"], reports[0]["read_retry_timeouts"])
	}
}

// TestExitStatus: a broken invariant exits 1 and names it; a run that
// cannot start exits 2.
func TestExitStatus(t *testing.T) {
	defer func(f func(context.Context, sim.Scenario, sim.Options) ([]sim.Report, error)) { runScenario = f }(runScenario)
	runScenario = func(_ context.Context, sc sim.Scenario, o sim.Options) ([]sim.Report, error) {
		return []sim.Report{
			{Scenario: sc.Name, Retry: true, Requests: 10, FinalResults: 10, OK: 10},
			{Scenario: sc.Name, Retry: false, Requests: 10, FinalResults: 9, OK: 9, FinalsMissing: 1,
				Violations: []string{"final result missing: async id 7"}},
		}, nil
	}
	code, out, stderr := runArgs(t, "-scenario", "steady")
	if code != 1 || !strings.Contains(stderr, "INVARIANT BROKEN: steady (retry off): final result missing") || !strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	runScenario = func(context.Context, sim.Scenario, sim.Options) ([]sim.Report, error) {
		return nil, errors.New("no ports left")
	}
	if code, _, stderr := runArgs(t, "-scenario", "steady"); code != 2 || !strings.Contains(stderr, "no ports left") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestCustomProfile(t *testing.T) {
	code, out, stderr := runArgs(t, append([]string{"-profile", "latency=1ms/20ms,error=0.1", "-hosts", "2", "-ports", "1"}, quick...)...)
	if code != 0 || !strings.Contains(out, "custom") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
}

// Example runs the main job on one scenario with -json and prints the facts
// that do not depend on timing.
func Example() {
	var out bytes.Buffer
	code := run(context.Background(), []string{"-scenario", "all-down", "-count", "100", "-rate", "1000", "-seed", "3",
		"-simple", "60ms", "-complex", "120ms", "-wait", "150ms", "-json"}, &out, io.Discard)
	var reports []struct {
		Scenario          string `json:"scenario"`
		Retry             bool   `json:"retry"`
		Requests          int    `json:"requests"`
		Reads             int    `json:"reads"`
		ReadRetryTimeouts int    `json:"read_retry_timeouts"`
		RecordsMissing    int    `json:"records_missing"`
		RecordsDuplicated int    `json:"records_duplicated"`
	}
	_ = json.Unmarshal(out.Bytes(), &reports)
	fmt.Println("exit status", code)
	for _, r := range reports {
		fmt.Printf("%s retry=%v requests=%d reads=%d read_retry_timeouts=%d missing=%d duplicated=%d\n",
			r.Scenario, r.Retry, r.Requests, r.Reads, r.ReadRetryTimeouts, r.RecordsMissing, r.RecordsDuplicated)
	}
	// Output:
	// exit status 0
	// all-down retry=true requests=100 reads=91 read_retry_timeouts=91 missing=0 duplicated=0
	// all-down retry=false requests=100 reads=91 read_retry_timeouts=0 missing=0 duplicated=0
}
