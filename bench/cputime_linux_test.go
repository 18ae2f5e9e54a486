package bench

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time the calling OS thread has used, in ns, and
// whether it could be read.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}
