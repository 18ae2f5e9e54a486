package retryprom_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retryprom"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// zonesClient returns a client with n routed zones, AppIDs and ZoneIDs from
// base up (base+i/100, base+i%100), one read sent and answered in each so
// that the counters are not all zero.
func zonesClient(tb testing.TB, n int, base uint32) (*retry.Client, func() []retry.Zone) {
	tb.Helper()
	tr := retrytest.NewTransport()
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Logger: slog.New(slog.DiscardHandler), MaxWaitingPerZone: 16, Shards: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	c.SetReadRetryMaxContextCountPerZone(16)
	p := retry.Proxy{Host: "10.0.0.1", Port: 9000}
	tr.SetHandler(p, retrytest.Serve(retrytest.Data{}, 0))
	zones := make([]retry.Zone, n)
	for i := range zones {
		zones[i] = retry.Zone{AppID: base + uint32(i/100), ZoneID: base + uint32(i%100)}
		if err := c.ApplyRoute(zones[i], []retry.Proxy{p}, "tcp://10.0.0.9:9000;conf://ReadRetryCmd=7&ReadRetryMaxCnt=2"); err != nil {
			tb.Fatal(err)
		}
		if _, err := c.Send(zones[i], &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
			tb.Fatal(err)
		}
	}
	for {
		if _, ok := c.RecvResponse(); !ok {
			break
		}
	}
	return c, func() []retry.Zone { return zones }
}

var sinkSeries int

// drain runs collect b.N times into a channel a goroutine empties, as a
// registry does, and returns ns per call and series per call.
func drain(b *testing.B, collect func(chan<- prometheus.Metric)) (ns, series float64) {
	ch := make(chan prometheus.Metric, 1024)
	done := make(chan int)
	go func() {
		n := 0
		for range ch {
			n++
		}
		done <- n
	}()
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		collect(ch)
	}
	ns = float64(time.Since(start).Nanoseconds()) / float64(b.N)
	close(ch)
	n := <-done
	sinkSeries += n
	series = float64(n) / float64(b.N)
	b.ReportMetric(series, "series/op")
	return ns, series
}

// BenchmarkCollect is one scrape of 1,000 zones (24,005 series with the
// client-wide ones). const-metrics is the baseline in the same run: the
// same series made with prometheus.MustNewConstMetric, as a collector
// usually does; collect reports its time as a ratio of it (x-const).
// gather is what promhttp does before encoding: Collect plus the
// registry's own work, against the same with MustNewConstMetric; http is
// the whole endpoint, text encoding included.
func BenchmarkCollect(b *testing.B) {
	c, zones := zonesClient(b, 1000, 1000) // 4-digit label values, as many SDKs' IDs
	col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones})
	if err != nil {
		b.Fatal(err)
	}
	var base float64
	b.Run("const-metrics", func(b *testing.B) {
		base, _ = drain(b, col.CollectConst)
	})
	b.Run("collect", func(b *testing.B) {
		ns, _ := drain(b, col.Collect)
		if base > 0 {
			b.ReportMetric(ns/base, "x-const")
		}
	})
	gather := func(b *testing.B, c prometheus.Collector) float64 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		b.ReportAllocs()
		n := 0
		start := time.Now()
		for b.Loop() {
			fams, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			n += len(fams)
		}
		sinkSeries += n
		return float64(time.Since(start).Nanoseconds()) / float64(b.N)
	}
	var gatherBase float64
	b.Run("gather-const-metrics", func(b *testing.B) {
		gatherBase = gather(b, constCollector{col})
	})
	b.Run("gather", func(b *testing.B) {
		if ns := gather(b, col); gatherBase > 0 {
			b.ReportMetric(ns/gatherBase, "x-const")
		}
	})
	// The whole endpoint: Gather and the text encoding promhttp writes.
	b.Run("http", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(col)
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		b.ReportAllocs()
		size := 0
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatal(rec.Code)
			}
			size = rec.Body.Len()
		}
		b.ReportMetric(float64(size), "bytes/scrape")
	})
}
