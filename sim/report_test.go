package sim

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteTableFits120: with the widest figures a run can print (every
// scenario's name, six-digit counts, second-long tails) the default table
// fits 120 columns; the wide one (rrsim -v) adds requests, peak-ctx and
// B/ctx (issue 29).
func TestWriteTableFits120(t *testing.T) {
	var reports []Report
	for _, sc := range Scenarios() {
		for _, on := range []bool{true, false} {
			reports = append(reports, Report{Scenario: sc.Name, Retry: on, Requests: 999_999,
				ReadRetryTimeouts: 999_999, WaitTimeouts: 999_999, P50Ms: 1016, P99Ms: 1016, P999Ms: 1016,
				AttemptsPerReq: 3, RetriesRefused: 999_999, DuplicatesDropped: 999_999,
				RecordsMissing: 99, RecordsDuplicated: 99, PeakContexts: 999_999, BytesPerContext: 99_999})
		}
	}
	for _, wide := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteTable(&b, reports, wide); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		if len(lines) != len(reports)+1 {
			t.Fatalf("wide=%v: %d lines, want %d", wide, len(lines), len(reports)+1)
		}
		if got := strings.Contains(lines[0], "B/ctx"); got != wide {
			t.Errorf("wide=%v: header %q", wide, lines[0])
		}
		for _, l := range lines {
			if n := len([]rune(l)); !wide && n > 120 {
				t.Errorf("%d columns, want <= 120: %q", n, l)
			}
		}
		if !strings.Contains(lines[1], "99/99") {
			t.Errorf("miss/dbl column: %q", lines[1])
		}
	}
}
