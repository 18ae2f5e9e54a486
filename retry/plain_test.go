package retry_test

// Requests without a read retry context: writes, reads with retry off or over the cap (SPEC R3,
// R12).

import (
	"log/slog"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// TestPlainRequestOverallCap: a request without read retry whose proxy
// keeps sending "more packets follow" every 50 ms ends with
// ResultWaitRspTimeout after Config.MaxWaitTotal (16 × the 100 ms wait
// timeout by default), however many packets came (issue 17 item 12).
func TestPlainRequestOverallCap(t *testing.T) {
	clock := newFakeClock()
	tr := retrytest.NewTransport()
	tr.SetLog(true)
	c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler), WaitTimeout: 100 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyRoute(testZone, hostProxies("a"), ""); err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdInsert, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	req := tr.Sent()[0]
	var end time.Duration
	packets := 0
	for ; end == 0 && clock.Now().Sub(start) < time.Hour; clock.Add(ms) {
		if clock.Now().Sub(start)%(50*ms) == 0 {
			tr.Replay(req, func(r wire.Request, rp *retrytest.Replier) {
				rp.Start(r, retry.ResultOK, true, uint32(packets), 0)
				rp.Send()
			})
			packets++
		}
		for {
			rsp, ok := c.RecvResponse()
			if !ok {
				break
			}
			if !rsp.HaveMore() {
				if rsp.Result() != retry.ResultWaitRspTimeout {
					t.Fatalf("final result %d", rsp.Result())
				}
				end = clock.Now().Sub(start)
			}
		}
	}
	if end != 1600*ms {
		t.Fatalf("ended at %v after %d packets, want 1.6s", end, packets)
	}
}

// TestPlainDuplicatePacketDropped: a multi-packet answer to a request without
// read retry (retry off for it, or over the cap) whose middle packet arrives
// twice must deliver each record once (SPEC R12: "Duplicate packets
// (hedged attempts, network duplicates, late answers after the final
// result) are dropped and counted"; §6: "late and duplicated packets ...
// never a lost or doubled record"). Found by rrsim -scenario duplicates,
// retry off: onPlain handed every packet to the caller as it was, so a
// duplicated packet's records were delivered twice (1,276 duplicated
// records in a 2 s run at 2000 req/s with 5% of packets sent twice), while
// read retry on gave 0 under the same faults.
//
// A duplicate of a plain request's packet can be recognised without any
// per-record state: a plain request has one attempt (0), whose packets
// arrive in order on one connection, so a packet whose index is below the
// next one expected is a duplicate.
func TestPlainDuplicatePacketDropped(t *testing.T) {
	for _, cmd := range []wire.Command{wire.CmdGetByPartKey, wire.CmdBatchGet} {
		t.Run(cmd.String(), func(t *testing.T) {
			tr := retrytest.NewTransport()
			p := retry.Proxy{Host: "10.0.0.1", Port: 9000}
			serve := retrytest.Serve(retrytest.Data{StreamLen: 6}, 2) // three packets of two records
			tr.SetLog(true)                                           // the proxy is silent: the test answers
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			c, err := retry.New(retry.Config{Poller: retry.PollHand, Transport: tr, Logger: slog.New(slog.DiscardHandler), Clock: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			zone := retry.Zone{AppID: 1, ZoneID: 1}
			if err := c.ApplyRoute(zone, []retry.Proxy{p}, ""); err != nil {
				t.Fatal(err)
			}
			req := retry.Request{Command: cmd, Table: "t", Key: []byte("p1"), AsyncID: 5, UserBuffer: []byte("ub")}
			if cmd.Body() == wire.BodyBatch {
				req.Key = nil
				for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
					req.Keys = append(req.Keys, []byte(k))
				}
			}
			if _, err := c.Send(zone, &req); err != nil {
				t.Fatal(err)
			}
			sent := tr.Sent()
			if len(sent) != 1 {
				t.Fatalf("%d frames sent, want 1", len(sent))
			}
			// Capture the three packets, then deliver 0, 0 again, 1, 2.
			capture := retrytest.NewTransport()
			capture.SetHandler(p, serve)
			if err := capture.Open(1, p); err != nil {
				t.Fatal(err)
			}
			if err := capture.Send(1, sent[0].Frame); err != nil {
				t.Fatal(err)
			}
			var packets [][]byte
			for {
				f, _, ok := capture.Recv()
				if !ok {
					break
				}
				packets = append(packets, append([]byte(nil), f...))
			}
			if len(packets) != 3 {
				t.Fatalf("%d packets, want 3", len(packets))
			}
			for _, i := range []int{0, 0, 1, 2} {
				tr.Deliver(p, packets[i])
			}

			seen := map[uint64]int{}
			finals := 0
			for {
				rsp, ok := c.RecvResponse()
				if !ok {
					break
				}
				for it := rsp.Records(); ; {
					rec, ok := it.Next()
					if !ok {
						break
					}
					seen[rec.Tag]++
				}
				if !rsp.HaveMore() {
					finals++
				}
			}
			if finals != 1 {
				t.Fatalf("%d final results, want 1", finals)
			}
			for tag := uint64(0); tag < 6; tag++ {
				if seen[tag] != 1 {
					t.Errorf("record %d delivered %d times, want once (SPEC R12)", tag, seen[tag])
				}
			}
			st, _ := c.Stats(zone)
			if st.DuplicatesDropped == 0 {
				t.Errorf("DuplicatesDropped = 0, want the duplicated packet counted")
			}
		})
	}
}
