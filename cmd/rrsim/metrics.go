package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retryprom"
	"github.com/readretry/readretry/sim"
)

// metricsServer serves -metrics: GET /metrics in the Prometheus text
// format, for a browser or a Prometheus server pointed at it during a run.
// It exports the engine's counters (SPEC R17) of the running scenario's
// clients through retryprom, labelled scenario=NAME and retry="on" or
// "off", and the Go runtime's and the process's metrics.
type metricsServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
	live *liveClients
	url  string // "http://host:port/metrics"
}

// startMetrics listens on addr (host:port; port 0 picks one) and serves
// until close.
func startMetrics(addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics: %w", err)
	}
	live := &liveClients{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(live, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	mux.Handle("GET /{$}", http.RedirectHandler("/metrics", http.StatusFound))
	m := &metricsServer{ln: ln, live: live, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		url: "http://" + ln.Addr().String() + "/metrics"}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln) // http.ErrServerClosed after close
	}()
	return m, nil
}

// close stops the server and its connections and waits for it.
func (m *metricsServer) close() {
	_ = m.srv.Close()
	<-m.done
}

// hook returns sc with an event that hands each client of the run to the
// server as soon as the run starts: an event at 0 with Client set, placed
// after the scenario's own events at 0 so that their profiles still apply
// before the first request. (A capacity scenario drops its events, so its
// client is not exported; see run.)
func (m *metricsServer) hook(sc sim.Scenario) sim.Scenario {
	name := sc.Name
	ev := sim.Event{At: 0, Client: func(c *retry.Client, zone retry.Zone, _ []retry.Proxy, retryOn bool) error {
		return m.live.add(name, retryOn, c, zone)
	}}
	i := 0
	for i < len(sc.Events) && sc.Events[i].At == 0 {
		i++
	}
	events := make([]sim.Event, 0, len(sc.Events)+1)
	events = append(append(append(events, sc.Events[:i]...), ev), sc.Events[i:]...)
	sc.Events = events
	return sc
}

// liveClients is a prometheus.Collector over the clients of the scenario
// running now: one retryprom.Collector per mode. Its set of metrics
// changes with each scenario, so it is an unchecked collector (Describe
// sends nothing), which a registry allows.
type liveClients struct {
	mu   sync.Mutex
	cols []liveCol
}

type liveCol struct {
	scenario string
	retryOn  bool
	col      *retryprom.Collector
}

// add exports c (one zone) as the client of scenario in mode retryOn,
// replacing the clients of earlier scenarios and a previous one of the
// same mode.
func (l *liveClients) add(scenario string, retryOn bool, c *retry.Client, zone retry.Zone) error {
	mode := "off"
	if retryOn {
		mode = "on"
	}
	zones := []retry.Zone{zone}
	col, err := retryprom.New(retryprom.Config{Client: c, Zones: func() []retry.Zone { return zones },
		ConstLabels: prometheus.Labels{"scenario": scenario, "retry": mode}})
	if err != nil {
		return errors.Join(errors.New("rrsim -metrics"), err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.cols[:0]
	for _, lc := range l.cols {
		if lc.scenario == scenario && lc.retryOn != retryOn {
			kept = append(kept, lc)
		}
	}
	l.cols = append(kept, liveCol{scenario, retryOn, col})
	return nil
}

// Describe sends nothing: an unchecked collector (prometheus.Collector).
func (l *liveClients) Describe(chan<- *prometheus.Desc) {}

// Collect collects the current clients (prometheus.Collector).
func (l *liveClients) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	cols := make([]*retryprom.Collector, len(l.cols))
	for i, lc := range l.cols {
		cols[i] = lc.col
	}
	l.mu.Unlock()
	for _, c := range cols {
		c.Collect(ch)
	}
}
