package retry

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Driver polls a Client on a goroutine of its own, for callers who would
// rather be called back than poll (SPEC R14 allows it; the poll model stays
// the engine's). It calls RecvResponse until nothing is ready, hands each
// response to the callback, then waits for the next tick.
type Driver struct {
	loop *ticker.Loop
}

// StartDriver starts a Driver that polls c every interval (at least 100 µs)
// and calls deliver with each response, on the Driver's goroutine. The
// Response is valid only during the call: deliver must copy what it keeps.
// Timer lateness is then at most one wheel tick plus interval. Stop it with
// Stop. While a Driver runs, nothing else may call RecvResponse on c (the
// Response is one shared value). Errors wrap ErrInvalidConfig for a
// non-positive interval or a nil deliver.
func (c *Client) StartDriver(interval time.Duration, deliver func(*Response)) (*Driver, error) {
	if interval <= 0 || deliver == nil {
		return nil, fmt.Errorf("%w: driver needs a positive interval and a callback", ErrInvalidConfig)
	}
	interval = max(interval, 100*time.Microsecond)
	return &Driver{loop: ticker.Start(interval, func(time.Time) {
		for {
			rsp, ok := c.RecvResponse()
			if !ok {
				return
			}
			deliver(rsp)
		}
	})}, nil
}

// Stop stops the Driver and waits for its goroutine to return; a deliver
// call under way finishes first. It is safe to call more than once.
func (d *Driver) Stop() { d.loop.Stop() }
