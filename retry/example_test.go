package retry_test

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
)

// The seed's usage, in Go: a client polled by its caller (PollHand), a
// route carrying the directory's conf:// element, read retry on, a Send,
// and the RecvResponse loop. Most Go code wants Do instead (ExampleClient_Do). Proxy b answers; proxy a is
// silent, so the read is quietly re-sent to b after x = 500 ms.
func Example() {
	tr := retrytest.NewTransport()
	a := retry.Proxy{Host: "10.0.0.1", Port: 9000}
	b := retry.Proxy{Host: "10.0.0.2", Port: 9000}
	tr.SetHandler(b, retrytest.Serve(retrytest.Data{}, 0))

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := retry.New(retry.Config{
		Transport: tr,
		Poller:    retry.PollHand, // the caller's RecvResponse loop drives the engine
		Logger:    slog.New(slog.DiscardHandler),
		Clock:     func() time.Time { return now },
	})
	zone := retry.Zone{AppID: 2, ZoneID: 3}
	_ = c.ApplyRoute(zone, []retry.Proxy{a, b},
		"tcp://10.0.0.9:9000;conf://ReadRetryCmd=7|103|15&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	_ = c.SetReadRetryTimeout(3000*time.Millisecond, 6000*time.Millisecond)

	fmt.Println("schedule:", retry.SimpleDeadlines(3000*time.Millisecond, 2))
	seq, _ := c.Send(zone, &retry.Request{Command: wire.CmdGet, Table: "players", Key: []byte("alice"),
		AsyncID: 42, UserBuffer: []byte("my context")})

	for i := 0; i < 10; i++ {
		now = now.Add(100 * time.Millisecond)
		rsp, ok := c.RecvResponse()
		if !ok {
			continue
		}
		it := rsp.Records()
		rec, _ := it.Next()
		fmt.Printf("t=%v seq ok=%v async=%d user=%q result=%d attempts=%d value=%s\n",
			now.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), rsp.Seq() == seq, rsp.AsyncID(),
			rsp.UserBuffer(), rsp.Result(), rsp.Attempts(), rec.Value)
	}
	// Output:
	// schedule: [500ms 1.5s 3s]
	// t=500ms seq ok=true async=42 user="my context" result=0 attempts=2 value=value-of-alice
}

// A client that runs for months (SPEC R22): each deploy moves the zone's
// proxies to new endpoints, and the old ones are released in the transport
// once their reads have ended; a zone that goes away is removed, and its
// read still in flight ends with the read retry timeout, as if its budget
// had run out.
func ExampleClient_RemoveZone() {
	tr := retrytest.NewTransport()
	tr.SetDefaultHandler(retrytest.Serve(retrytest.Data{}, 0))
	c, _ := retry.New(retry.Config{Transport: tr, Poller: retry.PollHand, Logger: slog.New(slog.DiscardHandler)})
	defer c.Close()
	_ = c.SetReadRetryTimeout(3*time.Second, 6*time.Second)
	zone := retry.Zone{AppID: 2, ZoneID: 3}
	for deploy := range 100 {
		route := []retry.Proxy{{Host: fmt.Sprintf("10.1.%d.1", deploy), Port: 9000}, {Host: fmt.Sprintf("10.1.%d.2", deploy), Port: 9000}}
		_ = c.ApplyRoute(zone, route, "conf://ReadRetryMaxCnt=2")
		_, _ = c.Send(zone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
		c.RecvResponse() // the answer
		c.RecvResponse() // releases the last deploy's proxies
	}
	fmt.Printf("after 100 deploys: %+v, %d proxies open in the transport\n", c.ProxyStats(), tr.Proxies())

	tr.SetDefaultHandler(nil) // new proxies are silent
	_ = c.ApplyRoute(zone, []retry.Proxy{{Host: "10.2.0.1", Port: 9000}}, "conf://ReadRetryMaxCnt=2")
	_, _ = c.Send(zone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")})
	_ = c.RemoveZone(zone)
	rsp, _ := c.RecvResponse()
	fmt.Println("read in flight:", rsp.Result(), "zones:", c.Zones())
	c.RecvResponse()
	fmt.Printf("after RemoveZone: %+v\n", c.ProxyStats())
	// Output:
	// after 100 deploys: {Live:2 Draining:0 Free:2}, 2 proxies open in the transport
	// read in flight: -19219 zones: []
	// after RemoveZone: {Live:0 Draining:0 Free:4}
}
