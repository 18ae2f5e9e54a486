package retryprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/readretry/readretry/retry"
)

// ExportStatsValues returns the value of every per-zone series for s, in
// export order.
func ExportStatsValues(s *retry.Stats) []float64 {
	ms := zoneMetrics(func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("readretry_"+name, help, labels, nil)
	})
	out := make([]float64, len(ms))
	for i, m := range ms {
		out[i] = float64(m.value(s))
	}
	return out
}

// CollectConst is Collect the plain way, one prometheus.MustNewConstMetric
// per series: the reference the tests compare Collect with, and the
// benchmarks' baseline.
func (c *Collector) CollectConst(ch chan<- prometheus.Metric) {
	if c.client != nil {
		for _, z := range c.sortedZones() {
			st, err := c.client.Stats(z)
			if err != nil {
				continue
			}
			app, zone := strconv.FormatUint(uint64(z.AppID), 10), strconv.FormatUint(uint64(z.ZoneID), 10)
			for i := range c.zone {
				m := &c.zone[i]
				if m.reason != nil {
					ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(&st), app, zone, m.reason.GetValue())
				} else {
					ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(&st), app, zone)
				}
			}
		}
	}
	c.collectRest(ch)
}
