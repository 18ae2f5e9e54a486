package timerwheel

import "math/bits"

// freeSet holds the indexes of freed timers as a hierarchy of bitmaps: bit i
// of level 0 is set when timer i is free, bit j of level k+1 when word j of
// level k is non-zero; the top level is a single word. take always returns
// the lowest free index. Word w of level 0 is exactly block w of the slab,
// which is how a lane takes a whole block at once (takeWord).
//
// Lowest-first reuse, rather than a LIFO free list, is for locality: a LIFO
// list hands out timers in the order they were freed, which after a few
// million timers is a random walk over the slab, so the timers of one slot
// end up scattered and Advance takes a cache (and TLB) miss per timer —
// measured at about ten times the cost per fired timer at 500,000 pending.
// It also keeps live timers at low indexes, so the slab's top chunks empty
// out after a burst and can be given back (shard.maybeShrink).
//
// The set grows and shrinks with the slab (grow, shrink): it costs one bit
// per timer the slab holds, nothing up front.
type freeSet struct {
	levels [][]uint64 // levels[0] has one bit per timer; the last has one word
	// low is a word of levels[0] below which all words are zero; when it
	// is non-zero itself, take needs one load instead of a walk down the
	// levels (the common case: a timer cancelled and its index reused).
	low uint32
}

// init empties the set and sizes it for n timers.
func (f *freeSet) init(n uint32) {
	f.levels = f.levels[:0]
	f.low = 0
	f.grow(n)
}

// grow makes room for indexes below n; the new indexes are not free.
func (f *freeSet) grow(n uint32) {
	words := int(max((n+63)/64, 1))
	for k := 0; ; k++ {
		if k == len(f.levels) {
			level := make([]uint64, words)
			if k > 0 && f.levels[k-1][0] != 0 {
				// A level added on top: its bit 0 stands for the old top
				// word, the only one that could be non-zero.
				level[0] = 1
			}
			f.levels = append(f.levels, level)
		} else if len(f.levels[k]) < words {
			f.levels[k] = append(f.levels[k], make([]uint64, words-len(f.levels[k]))...)
		}
		if words == 1 {
			return
		}
		words = (words + 63) / 64
	}
}

// shrink drops the indexes at and above n, whose words the caller cleared
// (clearWord), keeping the top level a single word.
func (f *freeSet) shrink(n uint32) {
	words := int(max((n+63)/64, 1))
	for k := range f.levels {
		f.levels[k] = shrunk(f.levels[k][:min(words, len(f.levels[k]))])
		words = (words + 63) / 64
	}
	for len(f.levels) > 1 && len(f.levels[len(f.levels)-2]) <= 1 {
		f.levels = f.levels[:len(f.levels)-1]
	}
	f.low = min(f.low, uint32(len(f.levels[0])-1))
}

// add marks timer i free.
func (f *freeSet) add(i uint32) {
	f.low = min(f.low, i>>6)
	for _, level := range f.levels {
		w := &level[i>>6]
		was := *w
		*w = was | 1<<(i&63)
		if was != 0 {
			return // the levels above already know this word is non-empty
		}
		i >>= 6
	}
}

// word returns the free timers of block w.
func (f *freeSet) word(w uint32) uint64 { return f.levels[0][w] }

// addWord marks the timers of block w named by m free.
func (f *freeSet) addWord(w uint32, m uint64) {
	if m == 0 {
		return
	}
	f.low = min(f.low, w)
	was := f.levels[0][w]
	f.levels[0][w] = was | m
	if was == 0 && len(f.levels) > 1 {
		f.add1(1, w)
	}
}

// add1 sets bit i of level k and propagates upward.
func (f *freeSet) add1(k int, i uint32) {
	for ; k < len(f.levels); k++ {
		w := &f.levels[k][i>>6]
		was := *w
		*w = was | 1<<(i&63)
		if was != 0 {
			return
		}
		i >>= 6
	}
}

// clearWord removes every timer of block w from the set and returns them.
func (f *freeSet) clearWord(w uint32) uint64 {
	m := f.levels[0][w]
	if m == 0 {
		return 0
	}
	f.levels[0][w] = 0
	i := w
	for k := 1; k < len(f.levels); k++ {
		x := &f.levels[k][i>>6]
		*x &^= 1 << (i & 63)
		if *x != 0 {
			break
		}
		i >>= 6
	}
	return m
}

// lowestWord returns the lowest block with a free timer.
func (f *freeSet) lowestWord() (uint32, bool) {
	if int(f.low) < len(f.levels[0]) && f.levels[0][f.low] != 0 {
		return f.low, true
	}
	top := len(f.levels) - 1
	if f.levels[top][0] == 0 {
		return 0, false
	}
	var i uint32
	for k := top; k >= 1; k-- {
		i = i<<6 | uint32(bits.TrailingZeros64(f.levels[k][i]))
	}
	f.low = i
	return i, true
}

// takeWord removes and returns every free timer of the lowest block that
// has one: the block's number and the bits of its free timers.
func (f *freeSet) takeWord() (uint32, uint64, bool) {
	w, ok := f.lowestWord()
	if !ok {
		return 0, 0, false
	}
	return w, f.clearWord(w), true
}

// take removes and returns the lowest free timer, or false if none is.
func (f *freeSet) take() (uint32, bool) {
	w, ok := f.lowestWord()
	if !ok {
		return 0, false
	}
	m := f.levels[0][w]
	b := uint32(bits.TrailingZeros64(m))
	if m &^= 1 << b; m != 0 {
		f.levels[0][w] = m
	} else {
		f.clearWord(w)
	}
	return w<<6 | b, true
}
