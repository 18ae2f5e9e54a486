package idem

import "slices"

// keyArena holds keys in power-of-two cells of 16 to 256 bytes, recycled
// through a free list per size: pointer-free, and no allocation once every
// size in use has a free cell.
type keyArena struct {
	buf  []byte
	free [keyClasses][]uint32
}

const keyClasses = 5 // cells of 16, 32, 64, 128 and 256 bytes

func keyClass(n int) int {
	c := 0
	for 16<<c < n {
		c++
	}
	return c
}

func (a *keyArena) alloc(n int) uint32 {
	c := keyClass(n)
	if f := a.free[c]; len(f) > 0 {
		a.free[c] = f[:len(f)-1]
		return f[len(f)-1]
	}
	off := len(a.buf)
	a.buf = slices.Grow(a.buf, 16<<c)[:off+16<<c]
	return uint32(off)
}

func (a *keyArena) release(off uint32, n int) {
	c := keyClass(n)
	a.free[c] = append(a.free[c], off)
}
