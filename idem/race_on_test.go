//go:build race

package idem_test

// raceEnabled: the race detector changes allocation counts, so allocation
// tests skip themselves under -race.
const raceEnabled = true
