// Package bench holds side-by-side benchmarks of readretry's parts against
// peer libraries (timing wheels, concurrent maps, retry libraries). It is a
// separate module so that the peers never enter the library's go.mod: run
// `cd bench && go test -run '^$' -bench . -benchmem` and compare the ratios
// within one run (BENCHMARKS.md gives each table with its command).
package bench
