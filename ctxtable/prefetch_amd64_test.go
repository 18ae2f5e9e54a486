//go:build amd64

package ctxtable

import (
	"testing"
	"unsafe"
)

// TestPrefetchNeverFaults: Lookup and Insert prefetch the blocks after the
// one at hand without checking where the chunk ends (shard.prefetchAfter),
// so prefetch must be a pure hint: no fault on nil, unmapped or kernel
// addresses, past the end of an object, or for a range that wraps around
// the address space. A prefetch written as a load crashes here.
func TestPrefetchNeverFaults(t *testing.T) {
	obj := make([]byte, 100)
	end := uintptr(unsafe.Pointer(unsafe.SliceData(obj))) + uintptr(len(obj))
	for _, c := range []struct {
		name    string
		addr, n uintptr
	}{
		{"nil", 0, 4096},
		{"first page", 64, 256},
		{"past an object's end", end, 1 << 20},
		{"top of user space", 1<<47 - 4096, 8192},
		{"kernel half", 0xffff_8000_0000_0000, 512},
		{"wraps", ^uintptr(0) - 100, 4096},
		{"empty", 0, 0},
	} {
		prefetch(c.addr, c.n) // must return
		t.Logf("%s: ok", c.name)
	}
}
