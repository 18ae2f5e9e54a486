package sim

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// benchSink keeps results observable.
var benchSink int

var quiet = slog.New(slog.DiscardHandler)

// BenchmarkLoopbackRead measures a simple read through the whole stack —
// engine, transport/tcp, a sim proxy answering at once on loopback, and
// back — with 64 reads in flight, read retry on and off. ns/op is per read
// (throughput, not latency); allocs/op counts the proxy too, which runs in
// the same process.
func BenchmarkLoopbackRead(b *testing.B) {
	for _, on := range []bool{true, false} {
		name := "retry-off"
		if on {
			name = "retry-on"
		}
		b.Run(name, func(b *testing.B) {
			fleet, err := StartFleet(FleetConfig{Hosts: 2, Ports: 1, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer fleet.Close()
			tr, err := tcp.New(tcp.Config{Resolve: fleet.Resolve, Backoff: backoff.Constant{Wait: time.Millisecond}, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, Poller: retry.PollHand})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.ApplyRoute(Zone, fleet.Labels(), ConfList(2)); err != nil {
				b.Fatal(err)
			}
			if err := tr.WaitDialed(context.Background()); err != nil {
				b.Fatal(err)
			}
			if on {
				if err := c.SetReadRetryTimeout(time.Second, 2*time.Second); err != nil {
					b.Fatal(err)
				}
			}
			key := fleet.Data().AppendKey(nil, 42)
			req := retry.Request{Command: wire.CmdGet, Table: "players", Key: key, UserBuffer: []byte("user")}
			const window = 64
			sent, done := 0, 0
			b.ReportAllocs()
			b.ResetTimer()
			for done < b.N {
				for sent < b.N && sent-done < window {
					req.AsyncID = uint64(sent + 1)
					if _, err := c.Send(Zone, &req); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				rsp, ok := c.RecvResponse()
				if !ok {
					tr.Wait(time.Millisecond)
					continue
				}
				if rsp.Result() != 0 || rsp.RecordCount() != 1 {
					b.Fatalf("result %d, %d records", rsp.Result(), rsp.RecordCount())
				}
				benchSink += rsp.RecordCount()
				done++
			}
			b.StopTimer()
			st, _ := c.Stats(Zone)
			b.ReportMetric(float64(st.RetriesTimeout+st.RetriesErrorCode)/float64(b.N), "retries/op")
		})
	}
}
