package resptest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// CutProxy is a loopback TCP proxy in front of a server that cuts each
// connection after the server has sent a given number of bytes through it:
// a replica that dies in the middle of a reply stream, at a byte count the
// test chooses rather than at whatever moment a kill lands. Bytes from the
// client pass unchanged. Make it with NewCutProxy and end it with Close.
type CutProxy struct {
	ln     net.Listener
	target string
	after  atomic.Int64 // bytes server → client per connection before the cut; <= 0: never
	cuts   atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// NewCutProxy listens on a free loopback port and forwards to target,
// cutting each connection after `after` bytes from the server (0 = never).
func NewCutProxy(target string, after int) (*CutProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.after.Store(int64(after))
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *CutProxy) Addr() string { return p.ln.Addr().String() }

// SetAfter changes the cut point for connections accepted from now on;
// 0 means never cut.
func (p *CutProxy) SetAfter(n int) { p.after.Store(int64(n)) }

// Cuts returns how many connections the proxy has cut.
func (p *CutProxy) Cuts() int64 { return p.cuts.Load() }

func (p *CutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *CutProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *CutProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			client.Close()
			server.Close()
			continue
		}
		after := p.after.Load()
		p.wg.Add(2)
		go func() { // client → server, unchanged
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			p.untrack(server)
		}()
		go func() { // server → client, cut after `after` bytes
			defer p.wg.Done()
			defer p.untrack(client)
			defer p.untrack(server)
			if after <= 0 {
				_, _ = io.Copy(client, server)
				return
			}
			if n, _ := io.CopyN(client, server, after); n == after {
				p.cuts.Add(1)
			}
		}()
	}
}

// Close stops the proxy, closes every connection through it and waits for
// its goroutines.
func (p *CutProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
