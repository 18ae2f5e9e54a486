package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv makes the test binary a fleet child (see TestMain).
const childEnv = "RRCOMPARE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := serveChild(os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testChild() *exec.Cmd {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-scenario", "nope"}, {"-scenario", "settings"}, {"-scenario", "cap"}, {"-clients", "nope"},
		{"-rate", "0"}, {"-retries", "9"}, {"extra"},
		{"-backend", "nope"}, {"-backend", "redis", "-scenario", "cap"}, {"-backend", "redis", "-clients", "failsafe-go"},
		{"-cpu-rate", "0"}, {"-cpu-rate", "x"}, {"-cpu-rate", ","}, {"-cpu-rate", "10000,-5"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb, testChild); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestEveryClient runs every client briefly on a fault scenario and the
// in-flight run, and checks that each answered every read right (the
// checker is sim's), that the JSON has the promised keys, and that
// grpc-go's service config hedgingPolicy made no extra attempt: grpc-go
// v1.85.0 parses it and does not hedge (BENCHMARKS.md's fairness note rests
// on this; if a grpc-go release starts hedging, this test says so).
func TestEveryClient(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-scenario", "blackhole-host,inflight", "-duration", "400ms", "-rate", "500",
		"-inflight", "1000", "-inflight-rate", "2000", "-json"}, &out, &errb, testChild)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*len(kinds) {
		t.Fatalf("%d rows, want %d", len(rows), 2*len(kinds))
	}
	for _, r := range rows {
		for _, k := range []string{"client", "scenario", "requests", "reads", "reads_ok", "extra_attempts_pct", "p50_ms", "p99_ms", "p999_ms",
			"cpu_ns_per_request", "heap_bytes_per_inflight", "records_missing", "records_duplicated", "gc_pause_p99_ms"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v/%v lacks %q", r["client"], r["scenario"], k)
			}
		}
		if v := r["violations"].([]any); len(v) != 0 {
			t.Errorf("%v/%v: %v", r["client"], r["scenario"], v)
		}
		switch r["scenario"] {
		case "blackhole-host":
			// One host of four is dark: a client that re-sends to
			// another host each time (SPEC R13) answers every read; gRPC's
			// round robin may hedge to the dark host again.
			hedges := r["client"] != "grpc-hedging"
			r13 := hedges && r["client"] != "grpc-failsafe"
			if r13 && r["reads_ok"] != r["reads"] {
				t.Errorf("%v: reads ok %v of %v", r["client"], r["reads_ok"], r["reads"])
			}
			if extra := r["extra_attempts_pct"].(float64); (extra > 0) != hedges {
				t.Errorf("%v: %.2f%% extra attempts", r["client"], extra)
			}
		case inflightScenario:
			if r["inflight"].(float64) < 500 || r["heap_bytes_per_inflight"].(float64) <= 0 {
				t.Errorf("%v: %v in flight, %v B each", r["client"], r["inflight"], r["heap_bytes_per_inflight"])
			}
		}
	}
	if !strings.Contains(errb.String(), "grpc-failsafe") {
		t.Errorf("no progress line per client:\n%s", errb.String())
	}
}

// TestRedisClients runs every -backend redis client briefly on real
// replicas with one stopped: each answers every read it answers right
// (sim's checker), and readretry answers them all.
func TestRedisClients(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("redis-server not on PATH")
		}
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-backend", "redis", "-scenario", "blackhole-host", "-duration", "300ms", "-rate", "300", "-json"}, &out, &errb, testChild)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(redisKinds) {
		t.Fatalf("%d rows, want %d", len(rows), len(redisKinds))
	}
	for _, r := range rows {
		if v, _ := r["violations"].([]any); len(v) != 0 {
			t.Errorf("%v: violations %v", r["client"], v)
		}
		if r["client"] == "readretry" && r["reads_ok_pct"].(float64) != 100 {
			t.Errorf("readretry: reads ok %v%%", r["reads_ok_pct"])
		}
	}
}

// TestExitCode: a broken invariant fails the run only when a readretry
// client broke it; a peer's is reported on stderr and leaves the status 0
// (issue 29).
func TestExitCode(t *testing.T) {
	for i, c := range []struct {
		rows []row
		want int
		says string
	}{
		{[]row{{Scenario: "steady", Client: "goroutines"}, {Scenario: "steady", Client: "readretry"}}, 0, ""},
		{[]row{{Scenario: "steady", Client: "grpc-failsafe", Violations: []string{"record doubled"}}}, 0, "(peer): steady with grpc-failsafe"},
		{[]row{{Scenario: "flapping", Client: "readretry-do", Violations: []string{"record missing"}}}, 1, "(readretry): flapping with readretry-do"},
	} {
		var errb bytes.Buffer
		if got := exitCode(c.rows, &errb); got != c.want || !strings.Contains(errb.String(), c.says) {
			t.Errorf("step %d: got %d, %q; want %d, %q", i, got, errb.String(), c.want, c.says)
		}
	}
}
