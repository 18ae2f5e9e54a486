package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/readretry/readretry/sim"
)

// lockedBuffer is a bytes.Buffer that run writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sample returns the value of the series of family name that has all the
// labels given (name, value pairs), or -1.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for i := 0; i < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if ok {
			if f.GetType() == dto.MetricType_GAUGE {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// TestMetrics runs rrsim with -metrics on 127.0.0.1:0 and scrapes
// /metrics over HTTP during the run: the engine's counters of both modes'
// clients, labelled by scenario and mode, and the process's metrics. When
// run returns, the endpoint is gone.
func TestMetrics(t *testing.T) {
	var out, errb lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"-metrics", "127.0.0.1:0", "-scenario", "steady", "-duration", "2s",
			"-rate", "300", "-simple", "100ms", "-complex", "200ms", "-wait", "300ms"}, &out, &errb)
	}()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	re := regexp.MustCompile(`metrics at (http://127\.0\.0\.1:[0-9]+/metrics)`)
	var url string
	for url == "" {
		if m := re.FindStringSubmatch(errb.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no metrics address on stderr: %q", errb.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var fams map[string]*dto.MetricFamily
	zone := []string{"app_id", "1", "zone_id", "1", "scenario", "steady"}
	for {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err = p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %s, %v", resp.Status, err)
		}
		on := sample(fams, "readretry_reads_sent_total", append(zone, "retry", "on")...)
		off := sample(fams, "readretry_reads_sent_total", append(zone, "retry", "off")...)
		if on > 0 && off > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads sent: on %v, off %v", on, off)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, mode := range []string{"on", "off"} {
		for _, name := range []string{"readretry_final_results_total", "readretry_contexts", "readretry_retries_refused_total"} {
			if v := sample(fams, name, append(zone, "retry", mode)...); v < 0 {
				t.Errorf("no %s for retry=%s", name, mode)
			}
		}
	}
	if sample(fams, "readretry_contexts_peak", append(zone, "retry", "off")...) != 0 {
		t.Error("the retry-off client holds read retry contexts")
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "readretry_malformed_frames_total"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	// A browser pointed at the address lands on /metrics.
	resp, err := client.Get(strings.TrimSuffix(url, "metrics"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("readretry_reads_sent_total")) {
		t.Errorf("GET /: %s, %.200s", resp.Status, body)
	}

	if c := <-code; c != 0 {
		t.Fatalf("exit %d\n%s\n%s", c, out.String(), errb.String())
	}
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("metrics still served after the run")
	}
}

// TestMetricsBadAddr: an address that cannot be listened on is a usage
// error (exit 2) before any scenario runs.
func TestMetricsBadAddr(t *testing.T) {
	code, out, stderr := runArgs(t, append([]string{"-metrics", "127.0.0.1:notaport"}, quick...)...)
	if code != 2 || !strings.Contains(stderr, "-metrics") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestMetricsHookOrder: the hook goes after the scenario's own events at 0,
// which still apply before the first request (sim.Run applies leading
// profile events at 0 before it starts), and before the later ones.
func TestMetricsHookOrder(t *testing.T) {
	m := &metricsServer{live: &liveClients{}}
	sc := sim.Scenario{Name: "x", Events: []sim.Event{{At: 0, Select: sim.HostSel(0)}, {At: 0.5, Select: sim.HostSel(1)}}}
	got := m.hook(sc).Events
	if len(got) != 3 || got[0].Client != nil || got[0].At != 0 || got[1].Client == nil || got[1].At != 0 || got[2].At != 0.5 {
		t.Fatalf("events %+v", got)
	}
	if len(sc.Events) != 2 {
		t.Fatal("hook changed the caller's scenario")
	}
}
