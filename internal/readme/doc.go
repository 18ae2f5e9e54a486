// Package readme holds no code: its tests keep the repository's front page
// honest. Every ```go block of README.md is a snippet that compiles (and,
// where it needs no network, runs) in a test of this package or of
// retry/call/grpccall, equal byte for byte to the README's text; README.md
// stays a front door — under 12 KiB, no link outside the repository, every
// relative link resolving — and BENCHMARKS.md names the command behind each
// block of figures (SPEC Layout round 3, issue 29).
package readme
