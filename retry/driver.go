package retry

import (
	"fmt"
	"sync"
	"time"
)

// Driver polls a Client on a goroutine of its own, for callers who would
// rather be called back than poll (SPEC R14 allows it; the poll model stays
// the engine's). It calls RecvResponse until nothing is ready, hands each
// response to the callback, then waits for the next tick.
type Driver struct {
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// StartDriver starts a Driver that polls c every interval (at least 100 µs)
// and calls deliver with each response, on the Driver's goroutine. The
// Response is valid only during the call: deliver must copy what it keeps.
// Timer lateness is then at most one wheel tick plus interval. Stop it with
// Stop. While a Driver runs, nothing else may call RecvResponse on c (the
// Response is one shared value). Errors wrap ErrBadConfig for a
// non-positive interval or a nil deliver.
func (c *Client) StartDriver(interval time.Duration, deliver func(*Response)) (*Driver, error) {
	if interval <= 0 || deliver == nil {
		return nil, fmt.Errorf("%w: driver needs a positive interval and a callback", ErrBadConfig)
	}
	interval = max(interval, 100*time.Microsecond)
	d := &Driver{stop: make(chan struct{}), done: make(chan struct{})}
	go d.run(c, interval, deliver)
	return d, nil
}

func (d *Driver) run(c *Client, interval time.Duration, deliver func(*Response)) {
	defer close(d.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			rsp, ok := c.RecvResponse()
			if !ok {
				break
			}
			deliver(rsp)
		}
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
	}
}

// Stop stops the Driver and waits for its goroutine to return; a deliver
// call under way finishes first. It is safe to call more than once.
func (d *Driver) Stop() {
	d.once.Do(func() { close(d.stop) })
	<-d.done
}
