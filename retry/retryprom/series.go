package retryprom

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/readretry/readretry/retry"
)

// nZoneSeries is the number of series per zone: one per field of
// retry.Stats. nZoneGauges of them are gauges, the rest counters.
const (
	nZoneSeries = 24
	nZoneGauges = 2
)

// Label names as values a dto.LabelPair can point to; shared, read-only.
var (
	nameApp  = labelApp
	nameZone = labelZone
)

// A scrape of many zones is mostly per-zone series, so they do not go
// through prometheus.MustNewConstMetric, which allocates a dozen objects per
// series (the label pairs, their strings, the dto message). Instead each
// zone gets one zoneScrape holding all its series, whose label pairs point
// at the zone's two label values, and whose label slices share the const
// pairs built once by New: the same sharing MustNewConstMetric does for
// const labels. Label slices are in Prometheus order (sorted by name), as
// the registry requires.

// series is one sample of a scrape: a prometheus.Metric whose Write hands
// out the labels and the value built by Collect. Exactly one of counter
// and gauge is set; it points at value.
type series struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	value   float64
	counter *dto.Counter
	gauge   *dto.Gauge
}

// Desc returns the series' descriptor (prometheus.Metric).
func (s *series) Desc() *prometheus.Desc { return s.desc }

// Write fills m with the series' labels and value (prometheus.Metric). The
// labels are shared with the zone's other series and must not be changed,
// as with any constant metric.
func (s *series) Write(m *dto.Metric) error {
	m.Label = s.labels
	m.Counter, m.Gauge = s.counter, s.gauge
	return nil
}

// zoneScrape is everything one zone's series need in one scrape, in one
// allocation.
type zoneScrape struct {
	stats             retry.Stats // here rather than escaping on its own
	app, zone         string
	appPair, zonePair dto.LabelPair
	series            [nZoneSeries]series
	counters          [nZoneSeries - nZoneGauges]dto.Counter
	gauges            [nZoneGauges]dto.Gauge
}

// labelPlan is the label layout of one kind of per-zone series, sorted by
// name: the const pairs in place, nil where a variable label goes.
type labelPlan struct {
	fixed             []*dto.LabelPair
	app, zone, reason int // indexes into fixed; reason is -1 without one
}

// newLabelPlan lays out constPairs with app_id, zone_id and, withReason,
// reason.
func newLabelPlan(constPairs []*dto.LabelPair, withReason bool) labelPlan {
	type slot struct {
		name string
		pair *dto.LabelPair
	}
	slots := []slot{{labelApp, nil}, {labelZone, nil}}
	if withReason {
		slots = append(slots, slot{labelReason, nil})
	}
	for _, p := range constPairs {
		slots = append(slots, slot{p.GetName(), p})
	}
	slices.SortFunc(slots, func(a, b slot) int { return strings.Compare(a.name, b.name) })
	p := labelPlan{fixed: make([]*dto.LabelPair, len(slots)), reason: -1}
	for i, s := range slots {
		p.fixed[i] = s.pair
		switch {
		case s.pair != nil:
		case s.name == labelApp:
			p.app = i
		case s.name == labelZone:
			p.zone = i
		default:
			p.reason = i
		}
	}
	return p
}

// fill writes the layout into dst (of len(p.fixed)) with the variable pairs
// given, and returns it.
func (p *labelPlan) fill(dst []*dto.LabelPair, app, zone, reason *dto.LabelPair) []*dto.LabelPair {
	copy(dst, p.fixed)
	dst[p.app], dst[p.zone] = app, zone
	if p.reason >= 0 {
		dst[p.reason] = reason
	}
	return dst
}
