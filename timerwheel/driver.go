package timerwheel

import (
	"fmt"
	"sync"
	"time"
)

// Driver advances a wheel from one background goroutine on a time.Ticker,
// for callers who do not poll (SPEC R14 allows an optional driver; the
// engine's default is the caller's own RecvResponse loop). Lateness is at
// most one tick plus the interval. Stop it to release the goroutine.
type Driver struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewDriver starts a goroutine that calls w.Advance(time.Now(), fire)
// every interval (> 0; typically the wheel's Tick) until Stop. fire runs on
// that goroutine, under the rules of Advance. Errors wrap ErrConfig.
func NewDriver(w *Wheel, interval time.Duration, fire func(id uint64)) (*Driver, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: nil wheel", ErrConfig)
	}
	if interval <= 0 {
		return nil, fmt.Errorf("%w: driver interval %v must be positive", ErrConfig, interval)
	}
	d := &Driver{stop: make(chan struct{}), done: make(chan struct{})}
	go d.run(w, interval, fire)
	return d, nil
}

func (d *Driver) run(w *Wheel, interval time.Duration, fire func(id uint64)) {
	defer close(d.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			// One clock read per tick, not per timer.
			w.Advance(time.Now(), fire)
		case <-d.stop:
			return
		}
	}
}

// Stop ends the driver and waits until its goroutine has returned, so no
// fire call is running or will start once Stop returns. It may be called
// more than once and from several goroutines; it must not be called from
// fire (it would wait for itself).
func (d *Driver) Stop() {
	d.once.Do(func() { close(d.stop) })
	<-d.done
}
