// Package ticker runs one function periodically on one goroutine of its own,
// until stopped. It is the single background loop of the module: the
// timing wheel's Driver, the engine's Driver and the idempotency store's
// Janitor are each a Loop around their own step, so stopping, waiting and
// leak-freedom are written (and tested) once.
package ticker

import (
	"sync"
	"time"
)

// Loop calls a step function every interval on one goroutine until Stop.
// The zero Loop is not usable; make one with Start.
type Loop struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start starts a goroutine that calls step with the tick's time every
// interval (> 0; Start panics otherwise, so callers check it and return
// their package's ErrInvalidConfig first). The first call comes one
// interval after Start. step runs on the loop's goroutine only, one call at
// a time; a slow step delays the next tick rather than piling them up
// (time.Ticker drops ticks for slow receivers).
func Start(interval time.Duration, step func(now time.Time)) *Loop {
	if interval <= 0 {
		panic("ticker: non-positive interval")
	}
	l := &Loop{stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(interval, step)
	return l
}

func (l *Loop) run(interval time.Duration, step func(time.Time)) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			step(now)
		case <-l.stop:
			return
		}
	}
}

// Stop ends the loop and waits until its goroutine has returned: no step
// is running or will start once Stop returns. It may be called more than
// once and from several goroutines; it must not be called from step (it
// would wait for itself).
func (l *Loop) Stop() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}
