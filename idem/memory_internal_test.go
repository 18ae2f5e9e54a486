package idem

import (
	"testing"
	"unsafe"
)

// TestLayout pins the sizes the package comment and the README quote.
func TestLayout(t *testing.T) {
	if n := unsafe.Sizeof(memSlot{}); n != 64 {
		t.Errorf("memSlot is %d bytes, documented as 64", n)
	}
	for _, c := range []struct{ n, class int }{{1, 0}, {16, 0}, {17, 1}, {36, 2}, {64, 2}, {65, 3}, {128, 3}, {129, 4}, {MaxKeyLen, 4}} {
		if got := keyClass(c.n); got != c.class || 16<<got < c.n {
			t.Errorf("keyClass(%d) = %d, want %d", c.n, got, c.class)
		}
	}
	if keyClass(MaxKeyLen) >= keyClasses {
		t.Error("the longest key has no arena class")
	}
}
