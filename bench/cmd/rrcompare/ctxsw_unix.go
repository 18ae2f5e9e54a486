//go:build unix

package main

import "syscall"

// contextSwitches returns the process's voluntary and involuntary context
// switches so far (getrusage): each voluntary one is a thread that went to
// sleep with nothing to run, the wake-ups a request pays for.
func contextSwitches() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Nvcsw) + uint64(ru.Nivcsw)
}
