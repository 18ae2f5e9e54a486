//go:build race

package call

// raceEnabled: the race detector changes allocation counts (sync.Pool drops
// items at random), so allocation tests skip themselves under -race.
const raceEnabled = true
