package tcp

import (
	"encoding/binary"
	"sync/atomic"
)

// ring is a single-producer, single-consumer queue of frames over one byte
// slice: the proxy's reading goroutine copies each received frame in, and
// the goroutine inside Transport.Recv reads it out in place. Nothing is
// locked and nothing is allocated per frame: the producer publishes a frame
// by storing tail, the consumer frees its space by storing head, and Go's
// atomics order the byte copies around those stores.
//
// Layout: every entry starts at an 8-byte boundary with an 8-byte header
// (frame length, entry kind) followed by the frame bytes, padded to 8. An
// entry never wraps: when it does not fit before the end of buf, a pad
// entry fills the rest and the frame starts at offset 0. Because every
// position is a multiple of 8, the space left before the end is either 0 or
// room for at least a header.
//
// A frame larger than half of buf would not always fit; it travels as a
// heap copy through the large channel, with a marker entry in the ring that
// keeps it in order with the frames around it. Such frames are rare (the
// default buffer holds 256 KiB), so the copy is not on the hot path.
type ring struct {
	buf  []byte
	mask uint64

	_    [64]byte
	tail atomic.Uint64 // bytes published; written by the producer only
	_    [56]byte
	head atomic.Uint64 // bytes released; written by the consumer only
	_    [56]byte

	// waiting is set by a producer that found no room; the consumer that
	// releases space then wakes it through space (capacity 1).
	waiting atomic.Bool
	space   chan struct{}
	large   chan []byte   // capacity 1: the heap copy of a marker entry's frame
	waits   atomic.Uint64 // times the producer blocked for room (Stats.RingWaits)
}

const (
	entryHeader = 8
	kindFrame   = 0
	kindPad     = 1
	kindLarge   = 2
	minRingSize = 4 << 10
)

var le = binary.LittleEndian

// newRing returns a ring over size bytes, rounded up to a power of two of at
// least minRingSize.
func newRing(size int) *ring {
	n := minRingSize
	for n < size {
		n <<= 1
	}
	return &ring{
		buf:   make([]byte, n),
		mask:  uint64(n - 1),
		space: make(chan struct{}, 1),
		large: make(chan []byte, 1),
	}
}

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// push copies frame into the ring and publishes it. While the ring is full
// it waits for the consumer to release space; it returns false, publishing
// nothing, if stop is closed first. Producer only.
func (r *ring) push(frame []byte, stop <-chan struct{}) bool {
	size := uint64(len(r.buf))
	n := uint64(len(frame))
	need := entryHeader + align8(n)
	kind := uint32(kindFrame)
	if need > size/2 {
		// The channel holds one frame; a second large frame waits here
		// until the consumer has taken the first marker's.
		select {
		case r.large <- append([]byte(nil), frame...):
		case <-stop:
			return false
		}
		need, kind = entryHeader, kindLarge
	}
	for {
		t := r.tail.Load()
		idx := t & r.mask
		toEnd := size - idx
		total := need
		if need > toEnd {
			total = toEnd + need
		}
		if size-(t-r.head.Load()) < total {
			if !r.waitSpace(total, stop) {
				return false
			}
			continue
		}
		if need > toEnd {
			le.PutUint32(r.buf[idx:], uint32(toEnd))
			le.PutUint32(r.buf[idx+4:], kindPad)
			t += toEnd
			idx = 0
		}
		le.PutUint32(r.buf[idx:], uint32(n))
		le.PutUint32(r.buf[idx+4:], kind)
		if kind == kindFrame {
			copy(r.buf[idx+entryHeader:], frame)
		}
		r.tail.Store(t + need)
		return true
	}
}

// waitSpace blocks until total bytes are free or stop is closed. The
// waiting flag is set before the final check, so a release that the check
// misses sees the flag and wakes us (no lost wake-up).
func (r *ring) waitSpace(total uint64, stop <-chan struct{}) bool {
	size := uint64(len(r.buf))
	r.waiting.Store(true)
	if size-(r.tail.Load()-r.head.Load()) >= total {
		r.waiting.Store(false)
		return true
	}
	r.waits.Add(1)
	select {
	case <-r.space:
		return true
	case <-stop:
		r.waiting.Store(false)
		return false
	}
}

// next returns the oldest published frame and the bytes its entry takes,
// without releasing it; ok is false if the ring is empty. The frame stays
// valid until release. Consumer only.
func (r *ring) next() (frame []byte, entry uint64, ok bool) {
	h := r.head.Load()
	for h != r.tail.Load() {
		idx := h & r.mask
		n := uint64(le.Uint32(r.buf[idx:]))
		switch le.Uint32(r.buf[idx+4:]) {
		case kindPad:
			h += n
			r.release(n)
			continue
		case kindLarge:
			return <-r.large, entryHeader, true
		}
		return r.buf[idx+entryHeader : idx+entryHeader+n : idx+entryHeader+n], entryHeader + align8(n), true
	}
	return nil, 0, false
}

// release frees the space of the entry next returned, entry bytes long, and
// wakes a producer waiting for room. Consumer only.
func (r *ring) release(entry uint64) {
	r.head.Store(r.head.Load() + entry)
	if r.waiting.Load() && r.waiting.CompareAndSwap(true, false) {
		select {
		case r.space <- struct{}{}:
		default:
		}
	}
}

// empty reports whether no entry is published and unreleased.
func (r *ring) empty() bool { return r.head.Load() == r.tail.Load() }
