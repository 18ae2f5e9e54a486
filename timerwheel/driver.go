package timerwheel

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Driver advances a wheel from one background goroutine on a time.Ticker,
// for callers who do not poll (SPEC R14 allows an optional driver; the
// engine's default is the caller's own RecvResponse loop). Lateness is at
// most one tick plus the interval. Stop it to release the goroutine.
type Driver struct {
	loop *ticker.Loop
}

// NewDriver starts a goroutine that calls w.Advance(time.Now(), fire)
// every interval (> 0; typically the wheel's Tick) until Stop. fire runs on
// that goroutine, under the rules of Advance. Errors wrap ErrInvalidConfig.
func NewDriver(w *Wheel, interval time.Duration, fire func(id uint64)) (*Driver, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil wheel", ErrInvalidConfig)
	}
	if interval <= 0 {
		return nil, fmt.Errorf("%w: driver interval %v must be positive", ErrInvalidConfig, interval)
	}
	// One clock read per tick, not per timer.
	return &Driver{loop: ticker.Start(interval, func(now time.Time) { w.Advance(now, fire) })}, nil
}

// Stop ends the driver and waits until its goroutine has returned, so no
// fire call is running or will start once Stop returns. It may be called
// more than once and from several goroutines; it must not be called from
// fire (it would wait for itself).
func (d *Driver) Stop() { d.loop.Stop() }
