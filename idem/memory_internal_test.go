package idem

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"testing"
	"unsafe"
)

// TestLayout pins the sizes the package comment and BENCHMARKS.md quote.
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

// BenchmarkIndex measures the shard's hand-written index (open addressing
// over []uint32, backward-shift deletion) against a plain
// map[uint64]uint32 on the store's mix (issue 21 §3): per op a claim of a
// new key (a miss, then an insert), a repeat (a hit, keys compared), and
// the release of the key claimed `live` ops earlier (a hit, then a
// delete), with `live` entries held. Both keep the same slots and key
// arena and compare the key bytes on a hit; only the index differs. The
// map variant ignores 64-bit hash collisions, which favours it.
func BenchmarkIndex(b *testing.B) {
	seed := maphash.MakeSeed()
	for _, live := range []int{1 << 10, 1 << 14} {
		n := 4 * live
		keys := make([][]byte, n)
		hashes := make([]uint64, n)
		for i := range keys {
			keys[i] = []byte(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
			hashes[i] = maphash.Bytes(seed, keys[i])
		}
		newShard := func() *memShard {
			return &memShard{index: make([]uint32, 16)}
		}
		// add claims keys[i] in sh's slots (the part both variants share).
		add := func(sh *memShard, i int) uint32 {
			var slot uint32
			if f := len(sh.free); f > 0 {
				slot = sh.free[f-1]
				sh.free = sh.free[:f-1]
			} else {
				slot = uint32(len(sh.slots))
				sh.slots = append(sh.slots, memSlot{})
			}
			s := &sh.slots[slot]
			s.hash = hashes[i]
			s.keyOff = sh.keys.alloc(len(keys[i]))
			s.keyLen = uint16(len(keys[i]))
			copy(sh.keys.buf[s.keyOff:], keys[i])
			sh.count++
			return slot
		}
		drop := func(sh *memShard, slot uint32) {
			s := &sh.slots[slot]
			sh.keys.release(s.keyOff, int(s.keyLen))
			*s = memSlot{}
			sh.free = append(sh.free, slot)
			sh.count--
		}
		equal := func(sh *memShard, slot uint32, key []byte) bool {
			s := &sh.slots[slot]
			return bytes.Equal(sh.keys.buf[s.keyOff:s.keyOff+uint32(s.keyLen)], key)
		}
		b.Run(fmt.Sprintf("hand/live=%d", live), func(b *testing.B) {
			sh := newShard()
			held := make([]uint32, n)
			i := 0
			op := func() {
				k := i % n
				if _, ok := sh.find(hashes[k], false, keys[k]); ok {
					b.Fatal("new key found")
				}
				held[k] = add(sh, k)
				sh.place(held[k])
				if _, ok := sh.find(hashes[k], false, keys[k]); !ok {
					b.Fatal("repeat not found")
				}
				if i >= live {
					o := (i - live) % n
					slot, ok := sh.find(hashes[o], false, keys[o])
					if !ok {
						b.Fatal("old key not found")
					}
					sh.unplace(slot)
					drop(sh, slot)
				}
				i++
			}
			for range 2 * n {
				op()
			}
			b.ReportAllocs()
			for b.Loop() {
				op()
			}
		})
		b.Run(fmt.Sprintf("map/live=%d", live), func(b *testing.B) {
			sh := newShard()
			index := make(map[uint64]uint32)
			find := func(h uint64, key []byte) (uint32, bool) {
				v, ok := index[h]
				if !ok || !equal(sh, v-1, key) {
					return 0, false
				}
				return v - 1, true
			}
			i := 0
			op := func() {
				k := i % n
				if _, ok := find(hashes[k], keys[k]); ok {
					b.Fatal("new key found")
				}
				slot := add(sh, k)
				index[hashes[k]] = slot + 1
				if _, ok := find(hashes[k], keys[k]); !ok {
					b.Fatal("repeat not found")
				}
				if i >= live {
					o := (i - live) % n
					slot, ok := find(hashes[o], keys[o])
					if !ok {
						b.Fatal("old key not found")
					}
					delete(index, hashes[o])
					drop(sh, slot)
				}
				i++
			}
			for range 2 * n {
				op()
			}
			b.ReportAllocs()
			for b.Loop() {
				op()
			}
		})
	}
}
