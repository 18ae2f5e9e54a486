package retryprom_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/retryprom"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock the test moves while scrapes read it (the budget's
// Stats reads its clock), hence atomic.
type fakeClock struct{ ns atomic.Int64 }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) Now() time.Time       { return epoch.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Add(d time.Duration)  { c.ns.Add(int64(d)) }
func (c *fakeClock) Since() time.Duration { return time.Duration(c.ns.Load()) }
func zoneLabels(z retry.Zone) (app, zone string) {
	return strconv.FormatUint(uint64(z.AppID), 10), strconv.FormatUint(uint64(z.ZoneID), 10)
}

// servedZone returns a client whose one zone (1/1) routes to one
// retrytest proxy that answers every read, with read retry on (GET
// listed, budgets 1 s), and a collector of that zone. The client is closed
// when t ends.
func servedZone(t *testing.T) (*retry.Client, retry.Zone, *retryprom.Collector) {
	t.Helper()
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := retry.Proxy{Host: "10.0.0.1", Port: 9000}
	tr.SetHandler(p, retrytest.Serve(retrytest.Data{}, 0))
	zone := retry.Zone{AppID: 1, ZoneID: 1}
	if err := c.ApplyRoute(zone, []retry.Proxy{p}, "tcp://10.0.0.9:9000;conf://ReadRetryCmd=7&ReadRetryMaxCnt=2"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadRetryTimeout(time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	col, err := retryprom.New(retryprom.Config{Client: c, Zones: func() []retry.Zone { return []retry.Zone{zone} }})
	if err != nil {
		t.Fatal(err)
	}
	return c, zone, col
}

// scrape GETs url and parses the Prometheus text format.
func scrape(t *testing.T, client *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape: Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: not the text format: %v", err)
	}
	return fams
}

// value returns the sample of family name whose labels are exactly labels
// (name, value pairs, in any order), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for _, lp := range m.GetLabel() {
			found := false
			for i := 0; i < len(labels); i += 2 {
				found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		default:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// zoneSeries are the 24 per-zone series by name (reason in brackets).
var zoneSeries = []string{
	"reads_sent_total", "writes_sent_total", "reads_without_context_total", "contexts", "contexts_peak",
	"context_cap_hits_total", "retries_total[timeout]", "retries_total[error_code]", "retries_no_proxy_total",
	"retries_refused_total", "exhausted_total", "records_failed_total", "duplicates_dropped_total", "unknown_seq_packets_total",
	"stray_packets_total", "malformed_packets_total", "records_resent_total", "wait_timeouts_total",
	"responses_delivered_total", "final_results_total", "do_abandoned_total", "abandoned_responses_total",
	"send_failures_total", "probes_total",
}

// checkZone compares every per-zone series of z with want (absent: 0).
func checkZone(t *testing.T, fams map[string]*dto.MetricFamily, when string, z retry.Zone, want map[string]float64) {
	t.Helper()
	app, zone := zoneLabels(z)
	for k := range want {
		found := false
		for _, s := range zoneSeries {
			found = found || s == k
		}
		if !found {
			t.Fatalf("want names unknown series %q", k)
		}
	}
	for _, s := range zoneSeries {
		name, labels := s, []string{"app_id", app, "zone_id", zone}
		if i := strings.IndexByte(s, '['); i >= 0 {
			name = s[:i]
			labels = append(labels, "reason", s[i+1:len(s)-1])
		}
		got, ok := value(fams, "readretry_"+name, labels...)
		if !ok {
			t.Errorf("%s: zone %v: no series %s", when, z, s)
			continue
		}
		if got != want[s] {
			t.Errorf("%s: zone %v: %s = %v, want %v", when, z, s, got, want[s])
		}
	}
}

// TestScrapeWorkload drives a known workload through the engine on the
// in-memory transport with a fake clock, scrapes /metrics over HTTP from a
// real registry during and after it, and checks every series against what
// the requirements say the workload must produce.
//
// The client: budgets 3 s / 6 s (SPEC R1), simple reads retried
// (ReadRetryCmd=7|103|15), -7953 listed, ReadRetryMaxCnt=2, so a simple
// read re-sends at 500 ms and 1500 ms and gives up at 3000 ms (SPEC R6,
// R9); a context cap of 3 per zone (SPEC R2); WaitTimeout 2 s; a storm
// guard of ratio 1 without floor: a zone re-sends at most as many times as
// it has reads in the window (SPEC R19, B4).
func TestScrapeWorkload(t *testing.T) {
	clk := &fakeClock{}
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Poller: retry.PollHand,
		Transport: tr, Logger: slog.New(slog.DiscardHandler), Clock: clk.Now, WaitTimeout: 2 * time.Second,
		RetryBudget: budget.Config{Ratio: 1, MinRetriesPerSecond: budget.NoFloor},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadRetryTimeout(3*time.Second, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	c.SetReadRetryMaxContextCountPerZone(3)

	const conf = "tcp://10.0.0.9:9000;conf://ReadRetryCmd=7|103|15&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2"
	zA, zB, zC, zD := retry.Zone{AppID: 7, ZoneID: 1}, retry.Zone{AppID: 7, ZoneID: 2}, retry.Zone{AppID: 8, ZoneID: 1}, retry.Zone{AppID: 8, ZoneID: 2}
	pA, pB, pC, pD := retry.Proxy{Host: "a", Port: 1}, retry.Proxy{Host: "b", Port: 1}, retry.Proxy{Host: "c", Port: 1}, retry.Proxy{Host: "d", Port: 1}
	// a answers everything at once, "dup" twice; b and d are silent; c
	// answers -7953 (listed).
	serve := retrytest.Serve(retrytest.Data{}, 0)
	tr.SetHandler(pA, func(req wire.Request, r *retrytest.Replier) {
		serve(req, r)
		if string(req.Key()) == "dup" {
			serve(req, r)
		}
	})
	tr.SetHandler(pC, retrytest.Fail(-7953))
	for _, zp := range []struct {
		z retry.Zone
		p retry.Proxy
	}{{zA, pA}, {zB, pB}, {zC, pC}, {zD, pD}} {
		if err := c.ApplyRoute(zp.z, []retry.Proxy{zp.p}, conf); err != nil {
			t.Fatal(err)
		}
	}

	b, err := budget.New(budget.Config{Ratio: 0.2, MinRetriesPerSecond: budget.NoFloor, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	unrouted := retry.Zone{AppID: 9, ZoneID: 9}
	col, err := retryprom.New(retryprom.Config{Client: c, Budget: b,
		// zA twice and a zone never routed: each exported once, the latter not at all.
		Zones: func() []retry.Zone { return []retry.Zone{zD, zA, unrouted, zC, zB, zA} }})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry() // also checks Collect against Describe
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	url := srv.URL + "/metrics"

	send := func(z retry.Zone, cmd wire.Command, async uint64, keys ...string) uint64 {
		t.Helper()
		req := retry.Request{Command: cmd, Table: "t", AsyncID: async}
		if cmd == wire.CmdBatchGet {
			for _, k := range keys {
				req.Keys = append(req.Keys, []byte(k))
			}
		} else {
			req.Key = []byte(keys[0])
		}
		seq, err := c.Send(z, &req)
		if err != nil {
			t.Fatalf("Send %v %v: %v", z, keys, err)
		}
		return seq
	}
	// Zone A: three simple reads take the 3 contexts, a fourth goes out
	// without one (cap), a batch read (23, not listed) without one, two writes.
	seqK1 := send(zA, wire.CmdGet, 1, "k1")
	send(zA, wire.CmdGet, 2, "k2")
	send(zA, wire.CmdGet, 3, "dup")
	send(zA, wire.CmdGet, 4, "k4")
	send(zA, wire.CmdBatchGet, 5, "k5", "k6")
	send(zA, wire.CmdInsert, 6, "w1")
	lastA := send(zA, wire.CmdInsert, 7, "w2")
	// Zone B: two simple reads and a write, all unanswered.
	seqB1 := send(zB, wire.CmdGet, 11, "kb1")
	send(zB, wire.CmdGet, 12, "kb2")
	send(zB, wire.CmdInsert, 13, "wb")
	// Zone C: one simple read answered -7953.
	send(zC, wire.CmdGet, 21, "kc")
	// Zone D: one simple read; its only proxy goes down right after.
	send(zD, wire.CmdGet, 31, "kd")
	tr.SetAvailable(pD, false)

	// The standalone budget (SPEC B4, ratio 0.2, no floor): 10 requests
	// allow 2 retries in the window. A reserved retry given back frees its
	// place, so of three more tries two are granted and one denied.
	for range 10 {
		b.Request()
	}
	r, ok := b.Reserve()
	if !ok {
		t.Fatal("budget refused the first retry")
	}
	r.Cancel()
	granted := 0
	for range 3 {
		if b.TryRetry() {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("budget granted %d of 3, want 2 (SPEC B4)", granted)
	}

	// Before any poll: contexts are held, nothing is final yet.
	fams := scrape(t, srv.Client(), url)
	checkZone(t, fams, "before polling", zA, map[string]float64{"reads_sent_total": 5, "writes_sent_total": 2,
		"reads_without_context_total": 2, "contexts": 3, "contexts_peak": 3, "context_cap_hits_total": 1})
	checkZone(t, fams, "before polling", zB, map[string]float64{"reads_sent_total": 2, "writes_sent_total": 1,
		"contexts": 2, "contexts_peak": 2})
	checkZone(t, fams, "before polling", zC, map[string]float64{"reads_sent_total": 1, "contexts": 1, "contexts_peak": 1})
	checkZone(t, fams, "before polling", zD, map[string]float64{"reads_sent_total": 1, "contexts": 1, "contexts_peak": 1})

	// Faulty frames (SPEC §6): an answer to B's first read from a proxy it
	// was never sent to (F5); a sequence number zone A never issued (F3);
	// one naming a zone the client does not have (R17); a frame of zone A
	// with a byte after its body, and bytes that are no frame at all (F1).
	frame := func(seq, async uint64) []byte {
		return wire.AppendResponse(nil, wire.ResponseHeader{Command: wire.CmdGet, Seq: seq, AsyncID: async, Attempt: 1})
	}
	tr.Deliver(pA, frame(seqB1, 11))
	tr.Deliver(pA, frame(lastA+1000, 99))
	tr.Deliver(pA, frame(uint64(50)<<40|1, 99))
	tr.Deliver(pA, append(frame(seqK1, 1), 0))
	tr.Deliver(pA, []byte("this is not a frame, not at all"))

	// Poll every 100 ms of fake time up to 4 s, past every budget.
	finals := map[retry.Zone][]int32{}
	for {
		for {
			rsp, ok := c.RecvResponse()
			if !ok {
				break
			}
			if !rsp.HaveMore() {
				finals[rsp.Zone()] = append(finals[rsp.Zone()], rsp.Result())
			}
		}
		if clk.Since() >= 4*time.Second {
			break
		}
		clk.Add(100 * time.Millisecond)
	}
	// The results themselves, so that a wrong count below is not a wrong workload.
	for z, want := range map[retry.Zone][]int32{
		zA: {0, 0, 0, 0, 0, 0, 0},
		zB: {retry.ResultReadRetryTimeout, retry.ResultReadRetryTimeout, retry.ResultWaitRspTimeout},
		zC: {-7953}, zD: {retry.ResultReadRetryTimeout},
	} {
		got := finals[z]
		sort.Slice(got, func(i, j int) bool { return got[i] > got[j] })
		sort.Slice(want, func(i, j int) bool { return want[i] > want[j] })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("zone %v final results %v, want %v", z, got, want)
		}
	}

	fams = scrape(t, srv.Client(), url)
	// Zone A: 5 reads (4 simple, 1 batch), 2 writes; 2 reads without a
	// context (the capped one, the unlisted batch); every answer at once, so
	// 7 responses, 7 final results, no retry; the second "dup" answer
	// dropped (R7/R12); one unknown sequence number (F3), one malformed frame
	// naming it (F1).
	checkZone(t, fams, "after", zA, map[string]float64{"reads_sent_total": 5, "writes_sent_total": 2,
		"reads_without_context_total": 2, "contexts_peak": 3, "context_cap_hits_total": 1,
		"duplicates_dropped_total": 1, "unknown_seq_packets_total": 1, "malformed_packets_total": 1,
		"responses_delivered_total": 7, "final_results_total": 7})
	// Zone B: at 500 ms each read's segment ends: 2 reads allow 2 retries,
	// both granted and sent (records re-sent 2). At 1500 ms both want a
	// second: refused (R19), they wait to 3000 ms and give up (R9): 2
	// exhausted. The write ends at WaitTimeout, 2 s. One stray answer (F5).
	checkZone(t, fams, "after", zB, map[string]float64{"reads_sent_total": 2, "writes_sent_total": 1, "contexts_peak": 2,
		"retries_total[timeout]": 2, "retries_refused_total": 2, "exhausted_total": 2, "stray_packets_total": 1,
		"records_resent_total": 2, "wait_timeouts_total": 1, "responses_delivered_total": 3, "final_results_total": 3})
	// Zone C: -7953 re-sends at once (R8), granted (1 read, 1 retry); the
	// second -7953 asks again: refused, so the answer is held and, every
	// attempt having answered, delivered as exhausted (R8, R19).
	checkZone(t, fams, "after", zC, map[string]float64{"reads_sent_total": 1, "contexts_peak": 1,
		"retries_total[error_code]": 1, "retries_refused_total": 1, "exhausted_total": 1, "records_resent_total": 1,
		"responses_delivered_total": 1, "final_results_total": 1})
	// Zone D: at 500 ms the retry is granted but no proxy is available
	// (counted as a timeout retry and as no-proxy, nothing re-sent, R13); at
	// 1500 ms refused; at 3000 ms exhausted.
	checkZone(t, fams, "after", zD, map[string]float64{"reads_sent_total": 1, "contexts_peak": 1,
		"retries_total[timeout]": 1, "retries_no_proxy_total": 1, "retries_refused_total": 1, "exhausted_total": 1,
		"responses_delivered_total": 1, "final_results_total": 1})
	// Client-wide: the frame of an unknown zone; two frames that did not
	// parse; proxies b and d suspect, each marked once, when their reads'
	// first segments ended unanswered (R13 round 3: a and c answered).
	for name, want := range map[string]float64{
		"readretry_unknown_zone_frames_total": 1, "readretry_malformed_frames_total": 2,
		"readretry_suspect_proxies": 2, "readretry_proxy_suspect_marks_total": 2,
		// The budget: 10 requests, 3 grants (one given back), 1 denial; the
		// window holds the 10 requests and 2 retries, allowing 0.2 × 10.
		"readretry_budget_requests_total": 10, "readretry_budget_retries_granted_total": 3,
		"readretry_budget_retries_cancelled_total": 1, "readretry_budget_retries_denied_total": 1,
		"readretry_budget_window_requests": 10, "readretry_budget_window_retries": 2, "readretry_budget_window_allowance": 2,
	} {
		if got, ok := value(fams, name); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}

	// Exactly the four routed zones, once each; types and help as documented.
	for name, f := range fams {
		if !strings.HasPrefix(name, "readretry_") {
			t.Errorf("family %s lacks the readretry_ prefix", name)
		}
		wantType := dto.MetricType_COUNTER
		if !strings.HasSuffix(name, "_total") {
			wantType = dto.MetricType_GAUGE
		}
		if f.GetType() != wantType {
			t.Errorf("%s is a %v, want %v", name, f.GetType(), wantType)
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
		if name == "readretry_retries_total" {
			if n := len(f.GetMetric()); n != 8 {
				t.Errorf("%s has %d series, want 4 zones x 2 reasons", name, n)
			}
		} else if f.GetMetric()[0].GetLabel() != nil && len(f.GetMetric()) != 4 {
			t.Errorf("%s has %d series, want 4 zones", name, len(f.GetMetric()))
		}
	}
	if n := len(fams); n != 23+4+7 {
		t.Errorf("%d families, want 34", n)
	}
	if requests, _ := c.InFlight(zB); requests != 0 {
		t.Errorf("zone B still tracks %d requests", requests)
	}
}

// TestEveryStatsField: each field of retry.Stats is exported by exactly one
// series with its own value (SPEC R17: no counter is written without also
// being readable). A field added to Stats and not to the collector fails
// here.
func TestEveryStatsField(t *testing.T) {
	typ := reflect.TypeFor[retry.Stats]()
	if typ.NumField() != len(zoneSeries) {
		t.Fatalf("retry.Stats has %d fields, the collector exports %d per-zone series", typ.NumField(), len(zoneSeries))
	}
	var s retry.Stats
	v := reflect.ValueOf(&s).Elem()
	want := map[float64]string{}
	for i := range typ.NumField() {
		val := 1000 + i
		switch v.Field(i).Kind() {
		case reflect.Uint64:
			v.Field(i).SetUint(uint64(val))
		case reflect.Int64:
			v.Field(i).SetInt(int64(val))
		default:
			t.Fatalf("field %s is a %v", typ.Field(i).Name, v.Field(i).Kind())
		}
		want[float64(val)] = typ.Field(i).Name
	}
	got := retryprom.ExportStatsValues(&s)
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	seen := map[float64]bool{}
	for _, g := range got {
		if want[g] == "" || seen[g] {
			t.Fatalf("value %v is not one field's own (values %v)", g, got)
		}
		seen[g] = true
	}
}

func TestNewErrors(t *testing.T) {
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	zones := func() []retry.Zone { return nil }
	for name, cfg := range map[string]retryprom.Config{
		"nothing":        {},
		"zone label":     {Client: c, Zones: zones, ConstLabels: prometheus.Labels{"zone_id": "1"}},
		"reason label":   {Client: c, Zones: zones, ConstLabels: prometheus.Labels{"reason": "x"}},
		"bad label name": {Client: c, Zones: zones, ConstLabels: prometheus.Labels{"__reserved": "x"}},
		"bad value":      {Client: c, Zones: zones, ConstLabels: prometheus.Labels{"client": "\xff"}},
	} {
		if col, err := retryprom.New(cfg); !errors.Is(err, retryprom.ErrInvalidConfig) || col != nil {
			t.Errorf("%s: %v, %v; want ErrInvalidConfig", name, col, err)
		}
	}
	col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones, ConstLabels: prometheus.Labels{"client": "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	// With a zone-less client, only the four client-wide series.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 4 {
		t.Fatalf("%d families, want 4", len(fams))
	}
	for _, f := range fams {
		if l := f.GetMetric()[0].GetLabel(); len(l) != 1 || l[0].GetName() != "client" || l[0].GetValue() != "orders" {
			t.Errorf("%s: labels %v", f.GetName(), l)
		}
	}
}

// constCollector is a Collector whose Collect is the plain one built from
// prometheus.MustNewConstMetric: the reference for TestSameAsConstMetrics.
type constCollector struct{ *retryprom.Collector }

func (c constCollector) Collect(ch chan<- prometheus.Metric) { c.CollectConst(ch) }

// gatherText gathers reg and encodes it in the text format.
func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&sb, f); err != nil {
			t.Fatal(err)
		}
	}
	return sb.String()
}

// TestSameAsConstMetrics: the series Collect builds without
// MustNewConstMetric (shared label pairs, one allocation per zone) gather
// to exactly what MustNewConstMetric gives, with const labels that sort
// before, between and after the per-zone labels, through a pedantic
// registry that checks every series against its Desc.
func TestSameAsConstMetrics(t *testing.T) {
	c, zones := zonesClient(t, 250, 1000)
	clk := &fakeClock{}
	b, err := budget.New(budget.Config{Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b.Request()
	b.TryRetry()
	col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones, Budget: b,
		ConstLabels: prometheus.Labels{"a": "1", "client": "orders", "retry": "on", "zz": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	fast, slow := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	fast.MustRegister(col)
	slow.MustRegister(constCollector{col})
	got, want := gatherText(t, fast), gatherText(t, slow)
	if got != want {
		t.Fatalf("Collect and MustNewConstMetric differ:\n--- Collect\n%.3000s\n--- const\n%.3000s", got, want)
	}
	if n := strings.Count(got, "\nreadretry_"); n != 250*24+4+7 {
		t.Fatalf("%d series, want %d", n, 250*24+4+7)
	}
	if !strings.Contains(got, `readretry_retries_total{a="1",app_id="1000",client="orders",reason="timeout",retry="on",zone_id="1000",zz="2"} 0`) {
		t.Fatalf("no retries series with the labels in order:\n%.2000s", got)
	}
	// Write hands out labels already sorted by name, so that the registry
	// need not copy and sort them per series.
	ch := make(chan prometheus.Metric, 64)
	go func() { col.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		if !sort.SliceIsSorted(d.Label, func(i, j int) bool { return d.Label[i].GetName() < d.Label[j].GetName() }) {
			t.Fatalf("%s: labels not sorted: %v", m.Desc(), d.Label)
		}
	}
}

// TestConcurrentScrapes: scrapes from two goroutines while the engine
// sends and polls (run with -race); counters never go back between two
// scrapes, and the last scrape after the work sees all of it.
func TestConcurrentScrapes(t *testing.T) {
	c, zone, col := servedZone(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	finals := func() float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Error(err)
			return 0
		}
		for _, f := range fams {
			if f.GetName() == "readretry_final_results_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Error("no readretry_final_results_total")
		return 0
	}
	const n = 2000
	stop := make(chan struct{})
	errs := make(chan string, 2)
	for range 2 {
		go func() {
			last := 0.0
			for {
				select {
				case <-stop:
					errs <- ""
					return
				default:
				}
				if v := finals(); v < last {
					errs <- "final results went back"
					return
				} else {
					last = v
				}
			}
		}()
	}
	for i := range n {
		if _, err := c.Send(zone, &retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
		for {
			if _, ok := c.RecvResponse(); !ok {
				break
			}
		}
	}
	close(stop)
	for range 2 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
	if v := finals(); v != n {
		t.Fatalf("final results %v, want %d", v, n)
	}
}

// TestDefaultZones: without Config.Zones the collector exports every zone
// the client has a route for (Client.Zones), including one routed after
// the collector was made.
func TestDefaultZones(t *testing.T) {
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: retrytest.NewTransport(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	px := []retry.Proxy{{Host: "a", Port: 1}}
	_ = c.ApplyRoute(retry.Zone{AppID: 1, ZoneID: 1}, px, "")
	col, err := retryprom.New(retryprom.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.ApplyRoute(retry.Zone{AppID: 2, ZoneID: 7}, px, "")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	zones := exportedZones(t, reg)
	if len(zones) != 2 || !zones["1/1"] || !zones["2/7"] {
		t.Fatalf("zones exported: %v, want 1/1 and 2/7", zones)
	}
	// A removed zone's series go with it (SPEC R22): a client that sees
	// zones come and go does not grow its scrape without end.
	if err := c.RemoveZone(retry.Zone{AppID: 1, ZoneID: 1}); err != nil {
		t.Fatal(err)
	}
	if zones := exportedZones(t, reg); len(zones) != 1 || !zones["2/7"] {
		t.Fatalf("zones exported after removing 1/1: %v, want 2/7", zones)
	}
}

// exportedZones returns the app/zone pairs of readretry_contexts' series.
func exportedZones(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "readretry_contexts" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var app, zone string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "app_id":
					app = l.GetValue()
				case "zone_id":
					zone = l.GetValue()
				}
			}
			zones[app+"/"+zone] = true
		}
	}
	return zones
}

// TestHelpIsPlain checks that no HELP text carries a requirement ID: an
// operator reads HELP on a dashboard without the repository, so the IDs
// stay in doc comments (SPEC Layout round 3, DESIGN "runtime text").
func TestHelpIsPlain(t *testing.T) {
	c, zone, _ := servedZone(t)
	b, err := budget.New(budget.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// With a budget, so that its series are described too.
	col, err := retryprom.New(retryprom.Config{Client: c, Budget: b, Zones: func() []retry.Zone { return []retry.Zone{zone} }})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 256)
	go func() { col.Describe(ch); close(ch) }()
	id := regexp.MustCompile(`\bSPEC\b|\b[RGBMINF][0-9]{1,2}[a-z]?\b`)
	n := 0
	for d := range ch {
		n++
		if m := id.FindString(d.String()); m != "" {
			t.Errorf("HELP names %q: %s", m, d)
		}
	}
	if n == 0 {
		t.Fatal("Describe sent no descriptor")
	}
}
