// Package layout holds no code: its test keeps the import table of
// docs/design.md equal to what `go list` says of every package in every
// module of the repository, so that the design document cannot drift from
// the code (SPEC Layout round 3). Run
//
//	go test ./internal/layout -update
//
// after adding a package or an import between packages, and commit the
// rewritten table.
package layout
