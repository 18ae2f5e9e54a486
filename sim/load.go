package sim

import (
	"context"
	"time"
)

// OpenLoop is the runs' open-loop generator: from start it calls issue for
// request IDs 1, 2, … at rate per second — every millisecond, each ID due
// by then — whatever has come back, so that a slow client meets the same
// offered load as a fast one and latency is honest. It returns when limit
// IDs are issued, duration has passed, or ctx ends, with the longest the
// loop ran late beyond its 1 ms tick (a busy or paused machine shows there;
// issue runs on the calling goroutine, so a slow issue shows too).
func OpenLoop(ctx context.Context, start time.Time, rate int, duration time.Duration, limit uint64, issue func(id uint64)) (stall time.Duration) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	next := uint64(1)
	prev := time.Now()
	for {
		now := time.Now()
		stall = max(stall, stallSince(prev, now, time.Millisecond))
		el := now.Sub(start)
		due := min(uint64(el.Seconds()*float64(rate))+1, limit)
		for ; next <= due; next++ {
			issue(next)
		}
		if due >= limit || el >= duration {
			return stall
		}
		prev = time.Now()
		select {
		case <-tick.C:
		case <-ctx.Done():
			return stall
		}
	}
}
