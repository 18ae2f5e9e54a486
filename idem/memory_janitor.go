package idem

import (
	"fmt"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Janitor advances a Memory store's expiry wheel from one goroutine, so
// that an idle store returns the memory of expired entries. It is
// optional: operations reclaim lazily. Stop it to end the goroutine.
type Janitor struct {
	loop *ticker.Loop
}

// NewJanitor starts a goroutine that calls m.Expire with m's clock every
// interval (> 0; a second is plenty: expiry itself does not depend on it).
// Errors wrap ErrInvalidConfig for a nil store or a non-positive interval.
func NewJanitor(m *Memory, interval time.Duration) (*Janitor, error) {
	if m == nil || interval <= 0 {
		return nil, fmt.Errorf("%w: janitor needs a store and a positive interval, got %v", ErrInvalidConfig, interval)
	}
	return &Janitor{loop: ticker.Start(interval, func(time.Time) { m.Expire(m.clockNow()) })}, nil
}

// Stop ends the janitor and waits for its goroutine to return. It may be
// called more than once.
func (j *Janitor) Stop() { j.loop.Stop() }
