//go:build race

package budget

// raceEnabled: the race detector changes allocation counts and sizes, so
// allocation tests skip themselves under -race.
const raceEnabled = true
