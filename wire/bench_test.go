package wire

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

var (
	sinkInt   int
	sinkU64   uint64
	sinkBytes []byte
)

// tenRecordResponse is a batch answer with ten 100-byte values: a typical
// packet of a complex read.
func tenRecordResponse() []byte {
	var rb ResponseBuilder
	rb.Start(nil, ResponseHeader{Command: CmdBatchGet, Seq: 77, AsyncID: 78, HaveMore: true, Packet: 2})
	v := bytes.Repeat([]byte("v"), 100)
	for i := 0; i < 10; i++ {
		_ = rb.AddRecord(uint64(i), 0, []byte(fmt.Sprintf("key-%04d", i)), v)
	}
	return rb.Frame()
}

// BenchmarkParseResponse: check and view a 10-record response (SPEC R18:
// decode in place, 0 allocs/op).
func BenchmarkParseResponse(b *testing.B) {
	frame := tenRecordResponse()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := ParseResponse(frame)
		if err != nil {
			b.Fatal(err)
		}
		sinkU64 += r.Seq()
	}
}

// BenchmarkIterateRecords: walk the records of a parsed 10-record response,
// reading each one's tag and value: with the RecordScanner (Scan) and with
// the Record-valued RecordIter (Records). ns/record is per record.
// (Declared in the for statement the scanner is copied every iteration,
// and the scan costs about as much as Records.)
func BenchmarkIterateRecords(b *testing.B) {
	frame := tenRecordResponse()
	r, err := ParseResponse(frame)
	if err != nil {
		b.Fatal(err)
	}
	records := float64(r.RecordCount())
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			s := r.Scan()
			for s.Next() {
				n += len(s.Value()) + int(s.Tag())
			}
			sinkInt += n
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/records, "ns/record")
	})
	b.Run("record", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for it := r.Records(); ; {
				rec, ok := it.Next()
				if !ok {
					break
				}
				n += len(rec.Value) + int(rec.Tag)
			}
			sinkInt += n
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/records, "ns/record")
	})
}

// BenchmarkRebuildPartial: a 100-key batch with 50 keys missing rebuilt into
// a reused buffer (SPEC R11).
func BenchmarkRebuildPartial(b *testing.B) {
	orig, err := AppendBatchRequest(nil, hdr(CmdBatchGet), batchKeys(100))
	if err != nil {
		b.Fatal(err)
	}
	answered := make(Bitset, BitsetLen(100))
	for i := 0; i < 100; i += 2 {
		answered.Set(uint32(i))
	}
	buf := make([]byte, 0, len(orig))
	b.SetBytes(int64(len(orig)))
	b.ReportAllocs()
	for b.Loop() {
		out, n, err := AppendPartialBatch(buf[:0], orig, answered, 1)
		if err != nil || n != 50 {
			b.Fatal(err, n)
		}
		sinkBytes = out
	}
}

// BenchmarkResume: rebuild an index read resuming at a position.
func BenchmarkResume(b *testing.B) {
	orig, _ := AppendIndexRequest(nil, hdr(CmdGetByPartKey), []byte("guild:42"), 0, 0)
	buf := make([]byte, 0, len(orig))
	b.SetBytes(int64(len(orig)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := AppendResume(buf[:0], orig, 1000, 1)
		if err != nil {
			b.Fatal(err)
		}
		sinkBytes = out
	}
}

// BenchmarkAppendKeyRequest: pack a simple read into a reused buffer.
func BenchmarkAppendKeyRequest(b *testing.B) {
	h := hdr(CmdGet)
	key := []byte("user:123456")
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		out, err := AppendKeyRequest(buf[:0], h, key)
		if err != nil {
			b.Fatal(err)
		}
		sinkBytes = out
	}
}

// loopReader replays one buffer forever.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// BenchmarkStreamReader: frames per second through Reader from an in-memory stream.
func BenchmarkStreamReader(b *testing.B) {
	frame := tenRecordResponse()
	var stream []byte
	for i := 0; i < 64; i++ {
		stream, _ = AppendStreamFrame(stream, frame)
	}
	r := NewReader(&loopReader{data: stream}, 0)
	b.SetBytes(int64(len(frame) + StreamPrefixSize))
	b.ReportAllocs()
	for b.Loop() {
		f, err := r.Next()
		if err != nil && err != io.EOF {
			b.Fatal(err)
		}
		sinkInt += len(f)
	}
}
