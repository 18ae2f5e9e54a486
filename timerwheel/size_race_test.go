//go:build race

package timerwheel

// Under the race detector (about 10× slower) the long tests run smaller;
// the full sizes run in normal mode and in the benchmarks.
const (
	propertyOps   = 1500
	sameTickCount = 50_000
	selfResched   = 100_000
)

const raceEnabled = true
