//go:build !race

package ctxtable

const raceEnabled = false
