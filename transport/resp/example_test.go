package resp_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp"
	"github.com/readretry/readretry/wire"
)

// An engine over RESP: two replicas, of which the first answers -LOADING
// (it is still loading its data set) and the second answers. The LOADING
// reply becomes the zone's listed error code, so the engine re-sends the
// GET to the other replica at once (SPEC R8) and the caller sees one
// good answer after two attempts. The replicas here are two tiny loopback
// servers speaking just enough RESP for GET; the tests use real
// redis-server processes (package resptest).
func Example() {
	loading := serveGET("-LOADING Redis is loading the dataset in memory\r\n")
	ready := serveGET("$5\r\nalice\r\n")
	defer loading.Close()
	defer ready.Close()

	addrs := map[string]string{"replica-a": loading.Addr().String(), "replica-b": ready.Addr().String()}
	tr, _ := resp.New(resp.Config{
		Resolve: func(p retry.Proxy) (string, error) { return addrs[p.Host], nil },
		Logger:  quiet,
	})
	defer tr.Close()
	c, _ := retry.New(retry.Config{Transport: tr, Logger: quiet})
	defer c.Close()

	zone := retry.Zone{AppID: 1, ZoneID: 1}
	// The first Send goes to the first replica of the route (round robin
	// from the start).
	_ = c.ApplyRoute(zone, []retry.Proxy{{Host: "replica-a", Port: 6379}, {Host: "replica-b", Port: 6379}},
		"conf://ReadRetryCmd=7|23|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	_ = c.SetReadRetryTimeout(time.Second, 2*time.Second)
	_ = tr.WaitDialed(context.Background()) // ApplyRoute does not wait on dials

	var res retry.Result
	err := c.Do(context.Background(), zone, &retry.Request{Command: wire.CmdGet, Key: []byte("user:1")}, &res)
	rec := res.Record(0)
	fmt.Printf("err=%v code=%d attempts=%d %s=%s\n", err, res.Code(), res.Attempts(), rec.Key, rec.Value)

	// A write is refused by the transport (ErrWriteRefused, which wraps
	// retry.ErrRequestRefused): Do returns that error at once, no replica
	// sees it, and writes go to the master another way.
	err = c.Do(context.Background(), zone, &retry.Request{Command: wire.CmdInsert, Key: []byte("k"), Value: []byte("v")}, nil)
	fmt.Println("write:", err)
	fmt.Println("transient replica errors:", tr.Stats().ReplicaTransient)
	// Output:
	// err=<nil> code=0 attempts=2 user:1=alice
	// write: resp: writes are not sent to replicas: retry: request refused by the transport
	// transient replica errors: 1
}

// serveGET accepts connections on loopback and answers every command
// with reply; it ends when the listener is closed.
func serveGET(reply string) net.Listener {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					// A command is an array header, then a length line and
					// an argument line per argument: answer after the last.
					if strings.HasPrefix(line, "*") {
						var n int
						fmt.Sscanf(line, "*%d", &n)
						for range 2 * n {
							if _, err := br.ReadString('\n'); err != nil {
								return
							}
						}
						if _, err := nc.Write([]byte(reply)); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return ln
}
