//go:build !race

package timerwheel

// Sizes of the long tests without the race detector: the full figures of
// the issue (500,000 timers in one tick, a million self-reschedules).
const (
	propertyOps   = 3000
	sameTickCount = 500_000
	selfResched   = 1_000_000
)

const raceEnabled = false
