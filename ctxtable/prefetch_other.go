//go:build !amd64

package ctxtable

// prefetch is a no-op where the package has no prefetch instruction in
// assembly: the table is correct without it, only slower when a shard's
// answers interleave several streams (see shard.prefetchAfter).
func prefetch(addr, n uintptr) {}
