package tcp_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// A transport talking to a loopback echo server: the logical proxy
// {Host: "host-1", Port: 7} is resolved to the server's ephemeral port,
// a frame goes out, and the poller waits for the echo instead of spinning.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan struct{})
	go func() { // the echo server: one connection, frames back as they come
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		r := wire.NewReader(nc, 0)
		for {
			f, err := r.Next()
			if err != nil {
				return
			}
			out, _ := wire.AppendStreamFrame(nil, f)
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
	}()

	tr, _ := tcp.New(tcp.Config{
		Resolve: func(p retry.Proxy) (string, error) { return ln.Addr().String(), nil },
		Logger:  quiet,
	})
	proxy := retry.Proxy{Host: "host-1", Port: 7}
	if err := tr.Open(1, proxy); err != nil {
		fmt.Println("open:", err)
	}
	// Open never waits on the network; a caller that wants the first
	// connection in place before it sends waits for it.
	if err := tr.WaitDialed(context.Background()); err != nil {
		fmt.Println("wait:", err)
	}
	fmt.Println("available:", tr.Available(1))
	if err := tr.Send(1, []byte("hello, proxy")); err != nil {
		fmt.Println("send:", err)
	}
	for !tr.Wait(time.Second) {
	}
	frame, from, ok := tr.Recv()
	fmt.Printf("recv ok=%v from=%d frame=%q\n", ok, from, frame)

	_ = tr.Close()
	_ = ln.Close()
	<-done
	fmt.Println("after close, send:", tr.Send(1, []byte("x")))
	// Output:
	// available: true
	// recv ok=true from=1 frame="hello, proxy"
	// after close, send: tcp: transport closed: retry: proxy unavailable
}
