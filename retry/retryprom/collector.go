package retryprom

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
)

// ErrInvalidConfig is wrapped by every error of New: nothing to export, or
// ConstLabels Prometheus refuses.
var ErrInvalidConfig = errors.New("retryprom: invalid config")

// Config says what a Collector exports. At least one of Client and Budget
// is required.
type Config struct {
	// Client is the engine whose per-zone Stats and ClientStats are
	// exported; nil exports neither.
	Client *retry.Client
	// Zones returns the zones of Client to export, called once per scrape
	// (possibly from several scrapes at once); nil means Client.Zones,
	// every zone the client serves (a zone removed with RemoveZone is no
	// longer exported, SPEC R22). The collector reads the slice
	// during the call and keeps none of it. Zones the client does not know
	// are skipped, and a zone listed twice is exported once.
	Zones func() []retry.Zone
	// Budget is a retry budget whose Stats are exported; nil
	// exports none. The engine's own per-zone storm guards show
	// through readretry_retries_refused_total instead.
	Budget *budget.Budget
	// ConstLabels are added to every metric, to tell several clients or
	// budgets apart in one registry (e.g. {"client": "orders"}). They may
	// not be app_id, zone_id or reason, which the per-zone metrics use.
	ConstLabels prometheus.Labels
}

// zoneMetric is one series per zone: a desc, its type, the reason label
// (a pair shared by every scrape) and the Stats field it reads.
type zoneMetric struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	reason *dto.LabelPair // nil for metrics without a reason label
	slot   int            // index into zoneScrape's counters or gauges
	value  func(*retry.Stats) float64
}

// Collector is a prometheus.Collector over a retry.Client and a
// budget.Budget (see the package doc for the metrics). It is safe for
// concurrent scrapes; create it with New.
type Collector struct {
	client *retry.Client
	zones  func() []retry.Zone
	budget *budget.Budget

	zone            []zoneMetric
	plain, reasoned labelPlan // label layouts of the per-zone series
	nReasoned       int       // per-zone series with a reason label

	unknownZone, malformed *prometheus.Desc
	suspect, suspectMarks  *prometheus.Desc

	bRequests, bGranted, bCancelled, bDenied *prometheus.Desc
	bWinRequests, bWinRetries, bAllowance    *prometheus.Desc
}

// Labels of the per-zone metrics.
const (
	labelApp    = "app_id"
	labelZone   = "zone_id"
	labelReason = "reason"
)

// Values of readretry_retries_total's reason label.
const (
	ReasonTimeout   = "timeout"    // re-sends after a segment ended (SPEC R6, R10)
	ReasonErrorCode = "error_code" // re-sends after a listed error code (SPEC R8)
)

// New returns a Collector for cfg, or an error wrapping ErrInvalidConfig:
// neither Client nor Budget, or ConstLabels that are
// not valid Prometheus labels or clash with the per-zone labels. A Collector
// from New never panics in Collect.
func New(cfg Config) (*Collector, error) {
	if cfg.Client == nil && cfg.Budget == nil {
		return nil, fmt.Errorf("%w: neither Client nor Budget", ErrInvalidConfig)
	}
	if cfg.Client != nil && cfg.Zones == nil {
		cfg.Zones = cfg.Client.Zones
	}
	for _, l := range []string{labelApp, labelZone, labelReason} {
		if _, ok := cfg.ConstLabels[l]; ok {
			return nil, fmt.Errorf("%w: ConstLabels may not use %q, a per-zone label", ErrInvalidConfig, l)
		}
	}
	c := &Collector{client: cfg.Client, zones: cfg.Zones, budget: cfg.Budget}
	var bad error
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		d := prometheus.NewDesc("readretry_"+name, help, labels, cfg.ConstLabels)
		// A Desc keeps its construction error (a bad const label); building
		// one metric from it surfaces the error here, so that Collect's
		// MustNewConstMetric cannot panic.
		lv := []string{"0", "0", "0"}[:len(labels)]
		if _, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, 0, lv...); err != nil && bad == nil {
			bad = err
		}
		return d
	}
	if cfg.Client != nil {
		c.zone = zoneMetrics(desc)
		var constPairs []*dto.LabelPair
		for name, value := range cfg.ConstLabels {
			constPairs = append(constPairs, &dto.LabelPair{Name: new(name), Value: new(value)})
		}
		c.plain, c.reasoned = newLabelPlan(constPairs, false), newLabelPlan(constPairs, true)
		for _, m := range c.zone {
			if m.reason != nil {
				c.nReasoned++
			}
		}
		c.unknownZone = desc("unknown_zone_frames_total", "Response frames whose sequence number names no zone of the client.")
		c.malformed = desc("malformed_frames_total", "Response frames that failed to parse, in every zone.")
		c.suspect = desc("suspect_proxies", "Proxies suspect now: their latest attempt timed out or could not be sent, and nothing from them has parsed since.")
		c.suspectMarks = desc("proxy_suspect_marks_total", "Times a healthy proxy became suspect.")
	}
	if cfg.Budget != nil {
		c.bRequests = desc("budget_requests_total", "Requests (first attempts) the retry budget recorded.")
		c.bGranted = desc("budget_retries_granted_total", "Retries the retry budget granted, cancelled ones included.")
		c.bCancelled = desc("budget_retries_cancelled_total", "Granted retries given back unsent.")
		c.bDenied = desc("budget_retries_denied_total", "Retries the retry budget refused.")
		c.bWinRequests = desc("budget_window_requests", "Requests in the retry budget's current window.")
		c.bWinRetries = desc("budget_window_retries", "Retries granted, and not cancelled, in the retry budget's current window.")
		c.bAllowance = desc("budget_window_allowance", "Most retries the current window allows: ratio times the window's requests plus the floor.")
	}
	if bad != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, bad)
	}
	return c, nil
}

// zoneMetrics returns the per-zone series in export order, one per Stats
// field, with descs made by desc.
func zoneMetrics(desc func(name, help string, labels ...string) *prometheus.Desc) []zoneMetric {
	var ms []zoneMetric
	counters, gauges := 0, 0
	add := func(d *prometheus.Desc, typ prometheus.ValueType, reason string, value func(*retry.Stats) float64) {
		m := zoneMetric{desc: d, typ: typ, value: value}
		if reason != "" {
			m.reason = &dto.LabelPair{Name: new(labelReason), Value: new(reason)}
		}
		if typ == prometheus.GaugeValue {
			m.slot, gauges = gauges, gauges+1
		} else {
			m.slot, counters = counters, counters+1
		}
		ms = append(ms, m)
	}
	counter := func(name, help string, value func(*retry.Stats) float64) {
		add(desc(name, help, labelApp, labelZone), prometheus.CounterValue, "", value)
	}
	gauge := func(name, help string, value func(*retry.Stats) float64) {
		add(desc(name, help, labelApp, labelZone), prometheus.GaugeValue, "", value)
	}
	counter("reads_sent_total", "Reads (the eight read commands) accepted by Send.",
		func(s *retry.Stats) float64 { return float64(s.ReadsSent) })
	counter("writes_sent_total", "Writes accepted by Send; never retried.",
		func(s *retry.Stats) float64 { return float64(s.WritesSent) })
	counter("reads_without_context_total", "Reads sent without a read retry context: retry off for them, or the zone's context cap reached.",
		func(s *retry.Stats) float64 { return float64(s.ReadsWithoutContext) })
	gauge("contexts", "Read retry contexts the zone holds now.",
		func(s *retry.Stats) float64 { return float64(s.Contexts) })
	gauge("contexts_peak", "Most read retry contexts the zone has held at once.",
		func(s *retry.Stats) float64 { return float64(s.PeakContexts) })
	counter("context_cap_hits_total", "Reads sent without a context because the zone held its cap of contexts.",
		func(s *retry.Stats) float64 { return float64(s.CapHits) })
	retries := desc("retries_total", "Re-sends of reads, by reason: timeout, a segment ended without an answer; error_code, an answer with a listed error code. Includes retries no proxy could take.",
		labelApp, labelZone, labelReason)
	add(retries, prometheus.CounterValue, ReasonTimeout, func(s *retry.Stats) float64 { return float64(s.RetriesTimeout) })
	add(retries, prometheus.CounterValue, ReasonErrorCode, func(s *retry.Stats) float64 { return float64(s.RetriesErrorCode) })
	counter("retries_no_proxy_total", "Retries, counted in readretry_retries_total, that found no available proxy to take them.",
		func(s *retry.Stats) float64 { return float64(s.RetriesNoProxy) })
	counter("retries_refused_total", "Re-sends the zone's storm guard refused: not sent, not in readretry_retries_total.",
		func(s *retry.Stats) float64 { return float64(s.RetriesRefused) })
	counter("exhausted_total", "Reads that gave up: ended with -19219 (read retry timeout) or a held listed error code, or delivered records no attempt answered well.",
		func(s *retry.Stats) float64 { return float64(s.Exhausted) })
	counter("records_failed_total", "Records delivered with a listed error code of their own because no attempt answered them well.",
		func(s *retry.Stats) float64 { return float64(s.RecordsFailed) })
	counter("duplicates_dropped_total", "Packets and records dropped because their request already had them or had ended.",
		func(s *retry.Stats) float64 { return float64(s.DuplicatesDropped) })
	counter("unknown_seq_packets_total", "Packets whose sequence number the zone never sent.",
		func(s *retry.Stats) float64 { return float64(s.UnknownSeq) })
	counter("stray_packets_total", "Packets from a proxy the request was never sent to, or with another async ID.",
		func(s *retry.Stats) float64 { return float64(s.StrayPackets) })
	counter("malformed_packets_total", "Frames naming this zone that failed to parse.",
		func(s *retry.Stats) float64 { return float64(s.MalformedPackets) })
	counter("records_resent_total", "Keys re-sent by partial batch re-sends, and whole simple reads and index resumes re-sent.",
		func(s *retry.Stats) float64 { return float64(s.RecordsResent) })
	counter("wait_timeouts_total", "Requests without a read retry context that ended with -16659 (wait timeout).",
		func(s *retry.Stats) float64 { return float64(s.WaitTimeouts) })
	counter("responses_delivered_total", "Responses handed to the caller, every packet of a multi-packet answer counted.",
		func(s *retry.Stats) float64 { return float64(s.Delivered) })
	counter("final_results_total", "Final results: exactly one per request sent.",
		func(s *retry.Stats) float64 { return float64(s.FinalResults) })
	counter("do_abandoned_total", "Do calls that returned because their context ended before the final result.",
		func(s *retry.Stats) float64 { return float64(s.DoAbandoned) })
	counter("abandoned_responses_total", "Responses of abandoned Do calls that arrived afterwards and were dropped.",
		func(s *retry.Stats) float64 { return float64(s.AbandonedResponses) })
	counter("send_failures_total", "Transport Send errors; each moved the request to the next proxy.",
		func(s *retry.Stats) float64 { return float64(s.SendFailures) })
	counter("probes_total", "Copies of reads sent to a suspect proxy as probes: each an extra attempt of a read that also went to a healthy proxy.",
		func(s *retry.Stats) float64 { return float64(s.Probes) })
	if len(ms) != nZoneSeries || gauges != nZoneGauges {
		panic("retryprom: nZoneSeries or nZoneGauges is out of date") // caught by every test
	}
	return ms
}

// Describe sends the descriptors of every metric the collector exports
// (prometheus.Collector).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for i, m := range c.zone {
		if i > 0 && c.zone[i-1].desc == m.desc {
			continue // readretry_retries_total's second reason
		}
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{c.unknownZone, c.malformed, c.suspect, c.suspectMarks,
		c.bRequests, c.bGranted, c.bCancelled, c.bDenied, c.bWinRequests, c.bWinRetries, c.bAllowance} {
		if d != nil {
			ch <- d
		}
	}
}

// Collect reads the snapshots and sends one metric per series
// (prometheus.Collector). It takes no lock the engine or the budget takes.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.client != nil {
		c.collectZones(ch)
	}
	c.collectRest(ch)
}

// collectRest sends the client-wide and the budget's series, a few constant
// metrics without variable labels.
func (c *Collector) collectRest(ch chan<- prometheus.Metric) {
	if c.client != nil {
		cs := c.client.ClientStats()
		ch <- prometheus.MustNewConstMetric(c.unknownZone, prometheus.CounterValue, float64(cs.UnknownZoneFrames))
		ch <- prometheus.MustNewConstMetric(c.malformed, prometheus.CounterValue, float64(cs.MalformedFrames))
		ch <- prometheus.MustNewConstMetric(c.suspect, prometheus.GaugeValue, float64(cs.SuspectProxies))
		ch <- prometheus.MustNewConstMetric(c.suspectMarks, prometheus.CounterValue, float64(cs.SuspectMarks))
	}
	if c.budget != nil {
		s := c.budget.Stats()
		ch <- prometheus.MustNewConstMetric(c.bRequests, prometheus.CounterValue, float64(s.Requests))
		ch <- prometheus.MustNewConstMetric(c.bGranted, prometheus.CounterValue, float64(s.Retries))
		ch <- prometheus.MustNewConstMetric(c.bCancelled, prometheus.CounterValue, float64(s.Cancelled))
		ch <- prometheus.MustNewConstMetric(c.bDenied, prometheus.CounterValue, float64(s.Denied))
		ch <- prometheus.MustNewConstMetric(c.bWinRequests, prometheus.GaugeValue, float64(s.WindowRequests))
		ch <- prometheus.MustNewConstMetric(c.bWinRetries, prometheus.GaugeValue, float64(s.WindowRetries))
		ch <- prometheus.MustNewConstMetric(c.bAllowance, prometheus.GaugeValue, s.Allowance)
	}
}

// sortedZones returns the zones Zones lists, sorted, each once.
func (c *Collector) sortedZones() []retry.Zone {
	zones := slices.Clone(c.zones())
	slices.SortFunc(zones, func(a, b retry.Zone) int {
		return cmp.Or(cmp.Compare(a.AppID, b.AppID), cmp.Compare(a.ZoneID, b.ZoneID))
	})
	return slices.Compact(zones)
}

// collectZones sends the per-zone series of every zone Zones lists that the
// client knows, each zone once.
func (c *Collector) collectZones(ch chan<- prometheus.Metric) {
	zones := c.sortedZones()
	np, nr := len(c.plain.fixed), len(c.reasoned.fixed)
	for _, z := range zones {
		st, err := c.client.Stats(z)
		if err != nil {
			continue // not routed (yet): nothing to export
		}
		sc := &zoneScrape{stats: st}
		sc.app, sc.zone = strconv.FormatUint(uint64(z.AppID), 10), strconv.FormatUint(uint64(z.ZoneID), 10)
		sc.appPair.Name, sc.appPair.Value = &nameApp, &sc.app
		sc.zonePair.Name, sc.zonePair.Value = &nameZone, &sc.zone
		buf := make([]*dto.LabelPair, np+c.nReasoned*nr)
		plain := c.plain.fill(buf[:np:np], &sc.appPair, &sc.zonePair, nil)
		buf = buf[np:]
		for i := range c.zone {
			m, x := &c.zone[i], &sc.series[i]
			x.desc, x.labels, x.value = m.desc, plain, m.value(&sc.stats)
			if m.reason != nil {
				x.labels = c.reasoned.fill(buf[:nr:nr], &sc.appPair, &sc.zonePair, m.reason)
				buf = buf[nr:]
			}
			if m.typ == prometheus.GaugeValue {
				g := &sc.gauges[m.slot]
				g.Value, x.gauge = &x.value, g
			} else {
				k := &sc.counters[m.slot]
				k.Value, x.counter = &x.value, k
			}
			ch <- x
		}
	}
}
