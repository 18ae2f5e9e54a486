package retry_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
)

// lockedBuffer is a bytes.Buffer a logger and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// TestHostileConfTextBounded: SPEC R22, issue 23's input S20. A route
// update whose conf:// element carries a 10 MB value — a ReadRetryMaxCnt
// of ten million digits (clamped to 8, and logged), a bad command value, a
// bad error code, a negative count, a piece without '=' — reaches the
// errors and the log lines cut to MaxQuotedConf bytes plus its total
// length: every rendered line stays under 1 KiB, where the whole value
// (10.5 MB a line for the clamp, 21 MB for a bad command) went before.
func TestHostileConfTextBounded(t *testing.T) {
	const size = 10_000_000
	digits := strings.Repeat("9", size)
	junk := strings.Repeat("x", size)
	cases := []struct {
		name, conf string
		wantErr    bool
		total      string // the value's length as the cut text gives it
	}{
		{"huge ReadRetryMaxCnt", "conf://ReadRetryMaxCnt=" + digits, false, "(10000000 bytes)"},
		{"bad command value", "conf://ReadRetryCmd=7|" + junk, true, "(10000000 bytes)"},
		{"bad error code", "conf://ReadRetryErrorCode=" + junk, true, "(10000000 bytes)"},
		{"negative count", "conf://ReadRetryMaxCnt=-" + digits, true, "(10000001 bytes)"},
		{"piece without '='", "conf://" + junk, true, "(10000000 bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lockedBuffer{}
			c, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Logger: slog.New(slog.NewJSONHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: 1}, []retry.Proxy{{Host: "h", Port: 1}}, "tcp://h:1;"+tc.conf)
			if tc.wantErr != (err != nil) || err != nil && !errors.Is(err, retry.ErrMalformedConf) {
				t.Fatalf("ApplyRoute: %v, want an error wrapping ErrMalformedConf: %v", err, tc.wantErr)
			}
			if err != nil && (len(err.Error()) > 4*retry.MaxQuotedConf+200 || !strings.Contains(err.Error(), tc.total)) {
				t.Errorf("error of %d bytes (%.80q…), want a cut value and its length %s", len(err.Error()), err.Error(), tc.total)
			}
			lines := logs.lines()
			found := false
			for i, line := range lines {
				if len(line) > 1024 {
					t.Errorf("log line %d: %d bytes (%.120q…)", i, len(line), line)
				}
				found = found || strings.Contains(line, tc.total)
			}
			if !found {
				t.Errorf("no log line gives the value's length %s: %.300q", tc.total, lines)
			}
		})
	}
}
