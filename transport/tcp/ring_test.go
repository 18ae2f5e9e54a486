package tcp

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
)

// frameFor returns frame i of a ring test: its index then a pattern, n
// bytes in all (at least 8).
func frameFor(i, n int) []byte {
	n = max(n, 8)
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, uint64(i))
	for j := 8; j < n; j++ {
		b[j] = byte(i + j)
	}
	return b
}

// runRing pushes frames of the given sizes through a ring of ringSize bytes
// from a producer goroutine and checks that the consumer gets each one,
// intact and in order, holding each until the next (as Recv does).
func runRing(t testing.TB, ringSize int, sizes []int) {
	r := newRing(ringSize)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, n := range sizes {
			if !r.push(frameFor(i, n), stop) {
				return
			}
		}
	}()
	var held uint64
	for i := 0; i < len(sizes); {
		if held != 0 {
			r.release(held)
			held = 0
		}
		f, entry, ok := r.next()
		if !ok {
			runtime.Gosched()
			continue
		}
		if want := frameFor(i, sizes[i]); !bytes.Equal(f, want) {
			close(stop)
			<-done
			t.Fatalf("frame %d: got %d bytes %x..., want %d bytes", i, len(f), f[:min(len(f), 16)], len(want))
		}
		held = entry
		i++
	}
	r.release(held)
	<-done
	if !r.empty() {
		t.Fatal("ring not empty at the end")
	}
}

func TestRingOrderAndWrap(t *testing.T) {
	var sizes []int
	for i := 0; i < 5000; i++ {
		sizes = append(sizes, 8+(i*37)%700)
	}
	runRing(t, 4<<10, sizes)
}

func TestRingLargeFrames(t *testing.T) {
	// Frames above half the ring take the heap path and stay in order with
	// the small ones around them.
	sizes := []int{100, 3000, 8, 2041, 2048, 2049, 4096, 9000, 16, 3000, 3000, 5}
	runRing(t, 4<<10, sizes)
}

func TestRingStopWhileFull(t *testing.T) {
	r := newRing(4 << 10)
	stop := make(chan struct{})
	for r.push(frameFor(0, 1000), nil) {
		if r.tail.Load()-r.head.Load() > 3000 {
			break
		}
	}
	done := make(chan bool)
	go func() { done <- r.push(frameFor(1, 1500), stop) }()
	close(stop)
	if <-done {
		t.Fatal("push into a full ring returned true after stop")
	}
	if r.waits.Load() != 1 { // the push into the full ring waited once
		t.Fatalf("waits = %d", r.waits.Load())
	}
}

func TestNewRingSize(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192}, {1 << 20, 1 << 20}} {
		if got := len(newRing(c.in).buf); got != c.want {
			t.Errorf("newRing(%d): %d bytes, want %d", c.in, got, c.want)
		}
	}
}

// FuzzRing drives the ring with arbitrary frame sizes (two bytes each, up to
// 16 KiB, so that the pad and the large-frame paths are both reached) and
// checks that every frame comes out intact and in order.
func FuzzRing(f *testing.F) {
	f.Add([]byte{0, 1, 255, 7, 8, 0, 0, 16, 1, 2})
	f.Add([]byte{0xff, 0x3f, 0, 8, 0xf8, 0x07, 0x00, 0x08, 0x01, 0x08})
	f.Add(bytes.Repeat([]byte{0x37, 0x03}, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		var sizes []int
		for i := 0; i+1 < len(data) && len(sizes) < 512; i += 2 {
			sizes = append(sizes, int(binary.LittleEndian.Uint16(data[i:]))&(16<<10-1))
		}
		runRing(t, 4<<10, sizes)
	})
}
