package retryprom_test

import (
	"bufio"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retryprom"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// An SDK's client with read retry on, and the three lines that export its
// counters. With the default registry they read
//
//	col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones})
//	prometheus.MustRegister(col)
//	http.Handle("/metrics", promhttp.Handler())
//
// Proxy a is silent, so the read is re-sent to b after 500 ms (SPEC R6).
func Example() {
	tr := retrytest.NewTransport()
	a := retry.Proxy{Host: "10.0.0.1", Port: 9000}
	b := retry.Proxy{Host: "10.0.0.2", Port: 9000}
	tr.SetHandler(b, retrytest.Serve(retrytest.Data{}, 0))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Logger: slog.New(slog.DiscardHandler),
		Clock: func() time.Time { return now }})
	defer c.Close()
	zone := retry.Zone{AppID: 2, ZoneID: 3}
	_ = c.ApplyRoute(zone, []retry.Proxy{a, b},
		"tcp://10.0.0.9:9000;conf://ReadRetryCmd=7|103|15&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	zones := func() []retry.Zone { return []retry.Zone{zone} } // the zones the SDK has routed

	reg, mux := prometheus.NewRegistry(), http.NewServeMux()
	col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones})
	if err != nil {
		panic(err)
	}
	reg.MustRegister(col)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	_, _ = c.Send(zone, &retry.Request{Command: wire.CmdGet, Table: "players", Key: []byte("alice")})
	for range 10 {
		now = now.Add(100 * time.Millisecond)
		c.RecvResponse()
	}

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"readretry_reads_sent_total", "readretry_retries_total", "readretry_final_results_total", "readretry_contexts{"} {
			if strings.HasPrefix(line, name) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// readretry_contexts{app_id="2",zone_id="3"} 0
	// readretry_final_results_total{app_id="2",zone_id="3"} 1
	// readretry_reads_sent_total{app_id="2",zone_id="3"} 1
	// readretry_retries_total{app_id="2",reason="error_code",zone_id="3"} 0
	// readretry_retries_total{app_id="2",reason="timeout",zone_id="3"} 1
}
