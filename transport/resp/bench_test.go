package resp_test

import (
	"bufio"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp"
)

// BenchmarkGet measures one GET round trip against a real replica on
// loopback: through the engine and this transport (Do, one request at a
// time), and through the baseline of a bare synchronous RESP exchange on
// one connection (write the command, read the reply line and bulk), in the
// same run. The ratio is the engine's and transport's cost over the
// protocol's own; loopback round trips dominate both.
func BenchmarkGet(b *testing.B) {
	r := shared.get(b)
	d := r.Data
	b.Run("engine+resp", func(b *testing.B) {
		c, _ := setup(b, r, resp.Config{}, time.Second, 2*time.Second)
		req := getReq(d, 7)
		var res retry.Result
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Do(context.Background(), zone, req, &res); err != nil {
				b.Fatal(err)
			}
		}
		if err := checkGet(d, 7, &res); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("bare-resp", func(b *testing.B) {
		nc, err := net.Dial("tcp", r.Servers[0].Addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		cmd := []byte("*2\r\n$3\r\nGET\r\n$3\r\nk:7\r\n")
		br := bufio.NewReader(nc)
		val := make([]byte, 0, 64)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := nc.Write(cmd); err != nil {
				b.Fatal(err)
			}
			if _, err := br.ReadSlice('\n'); err != nil {
				b.Fatal(err)
			}
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			val = append(val[:0], line[:len(line)-2]...)
		}
		if string(val) != d.Value(7) {
			b.Fatalf("got %q", val)
		}
	})
}

// BenchmarkParallelGet is the same GET from many goroutines at once: the
// transport pipelines them on one connection per replica (three replicas),
// against the baseline of a pool of bare connections, one per goroutine,
// each exchanging synchronously.
func BenchmarkParallelGet(b *testing.B) {
	r := shared.get(b)
	d := r.Data
	b.Run("engine+resp", func(b *testing.B) {
		c, _ := setup(b, r, resp.Config{}, time.Second, 2*time.Second)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := getReq(d, 7)
			var res retry.Result
			for pb.Next() {
				if err := c.Do(context.Background(), zone, req, &res); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("bare-resp", func(b *testing.B) {
		addrs := r.Addrs()
		b.ReportAllocs()
		var n atomic.Int32
		b.RunParallel(func(pb *testing.PB) {
			nc, err := net.Dial("tcp", addrs[int(n.Add(1))%len(addrs)])
			if err != nil {
				b.Error(err)
				return
			}
			defer nc.Close()
			cmd := []byte("*2\r\n$3\r\nGET\r\n$3\r\nk:7\r\n")
			br := bufio.NewReader(nc)
			for pb.Next() {
				if _, err := nc.Write(cmd); err != nil {
					b.Error(err)
					return
				}
				if _, err := br.ReadSlice('\n'); err != nil {
					b.Error(err)
					return
				}
				if _, err := br.ReadSlice('\n'); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
