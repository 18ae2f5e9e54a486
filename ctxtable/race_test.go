//go:build race

package ctxtable

// raceEnabled scales the heavy tests down under the race detector, which
// makes every memory access several times slower; the full sizes run in
// normal mode and in the benchmarks.
const raceEnabled = true
