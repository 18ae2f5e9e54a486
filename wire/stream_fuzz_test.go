package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

// refStream decodes a length-prefixed stream as Reader.Next documents it,
// written independently of Reader: the frames, then the error the stream
// ends with (io.EOF between frames, io.ErrUnexpectedEOF inside one,
// ErrTooLarge for a length above max).
func refStream(data []byte, max int) (frames [][]byte, end error) {
	for {
		switch {
		case len(data) == 0:
			return frames, io.EOF
		case len(data) < StreamPrefixSize:
			return frames, io.ErrUnexpectedEOF
		}
		n := uint64(binary.LittleEndian.Uint32(data))
		if n > uint64(max) {
			return frames, ErrTooLarge
		}
		if uint64(len(data)-StreamPrefixSize) < n {
			return frames, io.ErrUnexpectedEOF
		}
		frames = append(frames, data[StreamPrefixSize:StreamPrefixSize+n])
		data = data[StreamPrefixSize+n:]
	}
}

var errTransient = errors.New("transient read error")

// partsReader returns its parts in order, one Read per part (a part larger
// than the buffer takes several). With failAt ≥ 0 it returns errTransient
// once, before part failAt. With eofWithData the last part comes with
// io.EOF, as some readers do.
type partsReader struct {
	parts       [][]byte
	failAt      int
	eofWithData bool
	i           int
}

func (r *partsReader) Read(p []byte) (int, error) {
	for r.i < len(r.parts) && len(r.parts[r.i]) == 0 {
		r.i++
	}
	if r.failAt >= 0 && r.i >= r.failAt {
		r.failAt = -1
		return 0, errTransient
	}
	if r.i >= len(r.parts) {
		return 0, io.EOF
	}
	n := copy(p, r.parts[r.i])
	r.parts[r.i] = r.parts[r.i][n:]
	if len(r.parts[r.i]) == 0 {
		r.i++
		if r.eofWithData && r.i == len(r.parts) {
			return n, io.EOF
		}
	}
	return n, nil
}

// countingReader counts the bytes its reader has delivered.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// checkReader reads src to its end through a Reader with limit max and
// compares with the reference decoding: the same frames in order, the same
// final error, which stays. A transient error from src is passed through
// at most once per transient and loses no byte. The buffer never outgrows
// twice the bytes that have arrived (or its first 64 KiB), whatever the
// length prefixes declare (SPEC R22).
func checkReader(t *testing.T, name string, src io.Reader, max int, want [][]byte, end error, transients int) {
	t.Helper()
	cr := &countingReader{r: src}
	r := NewReader(cr, max)
	var got int
	for {
		f, err := r.Next()
		if len(r.buf) > readerBufSize && len(r.buf) > 2*cr.n {
			t.Fatalf("%s: a %d-byte buffer after %d bytes arrived", name, len(r.buf), cr.n)
		}
		if errors.Is(err, errTransient) {
			if transients--; transients < 0 {
				t.Fatalf("%s: transient error returned twice", name)
			}
			continue
		}
		if err != nil {
			if !errors.Is(err, end) {
				t.Fatalf("%s: after %d frames: %v, want %v", name, got, err, end)
			}
			break
		}
		if got >= len(want) || !bytes.Equal(f, want[got]) {
			t.Fatalf("%s: frame %d of %d: %d bytes, differs from the reference", name, got, len(want), len(f))
		}
		got++
	}
	if got != len(want) {
		t.Fatalf("%s: %d frames, want %d", name, got, len(want))
	}
	if _, err := r.Next(); !errors.Is(err, end) {
		t.Fatalf("%s: end not sticky: %v, then %v", name, end, err)
	}
}

// maxSplitLen bounds the inputs split at every byte boundary, and read one
// byte at a time: each split is a new Reader with its 64 KiB buffer. Longer
// inputs are split at splitsLong boundaries spread over them.
const (
	maxSplitLen = 512
	splitsLong  = 128
)

// FuzzReader: Reader decodes any byte stream exactly as the reference does,
// whatever the reads look like — the whole stream at once, one byte at a
// time, split in two at every byte boundary (spread boundaries for long
// inputs), a transient error at any point — with lengths that are cut short
// or above the limit.
func FuzzReader(f *testing.F) {
	var valid []byte
	for _, fr := range seedFrames() {
		valid, _ = AppendStreamFrame(valid, fr)
	}
	empty, _ := AppendStreamFrame(nil, nil)
	f.Add(valid, uint16(0), uint16(7))
	f.Add(append(append([]byte{}, empty...), empty...), uint16(3), uint16(0))
	f.Add(valid[:len(valid)-1], uint16(0), uint16(20))                              // body cut short
	f.Add(valid[:2], uint16(0), uint16(1))                                          // length cut short
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2}, uint16(0), uint16(3))               // oversize length
	f.Add([]byte{5, 0, 0, 0, 1, 2, 3, 4, 5}, uint16(4), uint16(5))                  // one above the limit
	f.Add([]byte{4, 0, 0, 0, 1, 2, 3, 4, 9}, uint16(4), uint16(5))                  // at the limit, then a cut length
	f.Add([]byte{0, 0, 1, 0, 1}, uint16(0), uint16(2))                              // 64 KiB declared, 1 byte there
	f.Add(append([]byte{0, 0, 1, 0}, make([]byte, 65536)...), uint16(0), uint16(9)) // larger than the first buffer
	f.Fuzz(func(t *testing.T, data []byte, limit, split uint16) {
		// The default limit (MaxFrameSize), and a small one from the input.
		small := 1 + int(limit)%4096
		for _, max := range []int{0, small} {
			effective := max
			if max == 0 {
				effective = MaxFrameSize
			}
			want, end := refStream(data, effective)
			checkReader(t, "whole", bytes.NewReader(data), max, want, end, 0)
			checkReader(t, "eof with data", &partsReader{parts: [][]byte{bytes.Clone(data)}, failAt: -1, eofWithData: true}, max, want, end, 0)
			if len(data) <= maxSplitLen {
				checkReader(t, "one byte", iotest.OneByteReader(bytes.NewReader(data)), max, want, end, 0)
			}
			// A transient error at one boundary chosen by the input.
			at := int(split) % (len(data) + 1)
			checkReader(t, "transient", &partsReader{parts: [][]byte{bytes.Clone(data[:at]), bytes.Clone(data[at:])}, failAt: 1}, max, want, end, 1)
		}
		want, end := refStream(data, small)
		step := 1
		if len(data) > maxSplitLen {
			step = len(data)/splitsLong + 1
		}
		for at := 0; at <= len(data); at += step {
			parts := [][]byte{bytes.Clone(data[:at]), bytes.Clone(data[at:])}
			checkReader(t, "split", &partsReader{parts: parts, failAt: -1}, small, want, end, 0)
		}
	})
}

// stallReader returns prefix, then errStalled forever: a peer that sent a
// length prefix and stopped, as seen through a connection with a read
// deadline.
type stallReader struct{ prefix []byte }

var errStalled = errors.New("read deadline exceeded")

func (s *stallReader) Read(p []byte) (int, error) {
	if len(s.prefix) == 0 {
		return 0, errStalled
	}
	n := copy(p, s.prefix)
	s.prefix = s.prefix[n:]
	return n, nil
}

// TestReaderDeclaredLengthCostsNothing: a 4-byte prefix declaring a
// 16 MiB frame (MaxFrameSize, so it is accepted) with no body, or with a
// trickle of it, costs the connection no more than the Reader's first
// buffer: the buffer grows with the bytes that arrive (SPEC R22). Before,
// it allocated the declared 16 MiB at once. The bound, far below the
// 16 MiB declared, is twice the first buffer (room for the runtime's own
// allocations during the test) plus four times the bytes sent.
func TestReaderDeclaredLengthCostsNothing(t *testing.T) {
	prefix := binary.LittleEndian.AppendUint32(nil, MaxFrameSize)
	for _, body := range []int{0, 1000, 100_000} {
		src := &stallReader{prefix: append(prefix, make([]byte, body)...)}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := NewReader(src, 0)
		for range 3 {
			if f, err := r.Next(); !errors.Is(err, errStalled) {
				t.Fatalf("body %d: Next = %d bytes, %v; want the stall's error", body, len(f), err)
			}
		}
		runtime.ReadMemStats(&after)
		limit := uint64(2*readerBufSize + 4*(StreamPrefixSize+body))
		if got := after.TotalAlloc - before.TotalAlloc; got > limit {
			t.Errorf("body %d of a declared %d: %d bytes allocated, want at most %d", body, MaxFrameSize, got, limit)
		}
		if r.Buffered() != StreamPrefixSize+body {
			t.Errorf("body %d: %d bytes buffered, want %d (nothing lost)", body, r.Buffered(), StreamPrefixSize+body)
		}
	}
}
