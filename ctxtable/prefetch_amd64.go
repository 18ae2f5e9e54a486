package ctxtable

// prefetch asks the CPU to bring the n bytes from addr into all cache
// levels (PREFETCHT0 per 64-byte line). It is a hint with no effect on
// what any load returns: it never faults, whatever the address (nil,
// unmapped, past the end of an object), and it is not ordered with locked
// instructions, so a mutex released after it does not wait for the memory.
// addr is a uintptr, not a pointer: nothing is read from it in Go's sense,
// and it may lie outside any object.
//
//go:noescape
func prefetch(addr, n uintptr)
