//go:build !linux

package bench

// threadCPU: no per-thread CPU clock here; the cpu-ns/op metric is left out.
func threadCPU() (int64, bool) { return 0, false }
