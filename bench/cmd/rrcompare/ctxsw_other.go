//go:build !unix

package main

// contextSwitches is not measured on this system.
func contextSwitches() uint64 { return 0 }
