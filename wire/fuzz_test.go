package wire

import (
	"bytes"
	"testing"
)

// seedFrames returns one valid frame of every body kind and a response, the
// seed corpus shared by the fuzz targets.
func seedFrames() [][]byte {
	var out [][]byte
	b, _ := AppendKeyRequest(nil, hdr(CmdGet), []byte("user:1"))
	out = append(out, b)
	b, _ = AppendWriteRequest(nil, hdr(CmdInsert), []byte("k"), []byte("v"))
	out = append(out, b)
	b, _ = AppendIndexRequest(nil, hdr(CmdGetByPartKey), []byte("p"), 3, 10)
	out = append(out, b)
	b, _ = AppendBatchRequest(nil, hdr(CmdBatchGet), batchKeys(5))
	out = append(out, b)
	var rb ResponseBuilder
	rb.Start(nil, ResponseHeader{Command: CmdBatchGet, Seq: 1, AsyncID: 2, HaveMore: true, Packet: 1})
	_ = rb.AddRecord(1, 0, []byte("k"), []byte("v"))
	_ = rb.AddRecord(4, -1, nil, nil)
	out = append(out, rb.Frame())
	return out
}

// rebuildRequest encodes the parsed view again with the builders.
func rebuildRequest(r Request) ([]byte, error) {
	h := RequestHeader{Command: r.Command(), Flags: r.Flags(), Seq: r.Seq(), AsyncID: r.AsyncID(),
		Attempt: r.Attempt(), AppID: r.AppID(), ZoneID: r.ZoneID(), Table: string(r.Table())}
	switch r.Body() {
	case BodyKey:
		return AppendKeyRequest(nil, h, r.Key())
	case BodyKeyValue:
		return AppendWriteRequest(nil, h, r.Key(), r.Value())
	case BodyIndex:
		return AppendIndexRequest(nil, h, r.Key(), r.Position(), r.Limit())
	}
	// Batch: the builder numbers keys 0..n-1, so rebuild by hand to keep
	// the frame's own indexes.
	out, err := AppendBatchRequest(nil, h, [][]byte{nil})
	if err != nil {
		return nil, err
	}
	out = out[:len(out)-12]
	out = le.AppendUint32(out, uint32(r.KeyCount()))
	for it := r.Keys(); ; {
		idx, k, ok := it.Next()
		if !ok {
			break
		}
		out = le.AppendUint32(out, idx)
		out = appendBytes(out, k)
	}
	return out, nil
}

// FuzzParseRequest: no input panics; an accepted frame encodes back to the
// same bytes (the format has exactly one reading of each frame).
func FuzzParseRequest(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRequest(data)
		if err != nil {
			return
		}
		n := 0
		for it := r.Keys(); ; n++ {
			if _, _, ok := it.Next(); !ok {
				break
			}
		}
		if n != r.KeyCount() {
			t.Fatalf("iterated %d keys, count %d", n, r.KeyCount())
		}
		again, err := rebuildRequest(r)
		if err != nil {
			t.Fatalf("rebuild of an accepted frame: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("round trip differs:\n in %x\nout %x", data, again)
		}
	})
}

// FuzzParseResponse: no input panics; an accepted frame's fields survive a
// rebuild with ResponseBuilder.
func FuzzParseResponse(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseResponse(data)
		if err != nil {
			return
		}
		var rb ResponseBuilder
		rb.Start(nil, ResponseHeader{Command: r.Command(), Seq: r.Seq(), AsyncID: r.AsyncID(), Result: r.Result(),
			HaveMore: r.HaveMore(), Attempt: r.Attempt(), Packet: r.Packet(), Cursor: r.Cursor()})
		s, it := r.Scan(), r.Records()
		for s.Next() {
			if err := rb.AddRecord(s.Tag(), s.Result(), s.Key(), s.Value()); err != nil {
				t.Fatal(err)
			}
			// The Record-valued iterator reads the same records.
			if rec, ok := it.Next(); !ok || rec.Tag != s.Tag() || rec.Result != s.Result() ||
				!bytes.Equal(rec.Key, s.Key()) || !bytes.Equal(rec.Value, s.Value()) {
				t.Fatalf("Records and Scan disagree at record %d", rb.Records())
			}
		}
		if _, ok := it.Next(); ok || s.Len() != 0 || it.Len() != 0 {
			t.Fatal("Records has records after Scan's last")
		}
		if rb.Records() != r.RecordCount() || len(rb.Frame()) != len(data) {
			t.Fatalf("records %d/%d, len %d/%d", rb.Records(), r.RecordCount(), len(rb.Frame()), len(data))
		}
		// Only the flag bits and the reserved byte that readers ignore may differ.
		a, b := rb.Frame(), data
		if !bytes.Equal(a[:rspFlags], b[:rspFlags]) || !bytes.Equal(a[rspAttempt:], b[rspAttempt:]) {
			t.Fatalf("rebuild differs:\n in %x\nout %x", b, a)
		}
	})
}

// FuzzRoundTrip: whatever the field values, what a builder writes parses back
// to the same fields.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint32(7), uint32(0), uint64(1), uint64(2), uint16(0), uint32(3), uint32(4), "t", []byte("k"), []byte("v"), uint64(5), uint32(6))
	f.Add(uint32(23), uint32(1), uint64(0), uint64(0), uint16(9), uint32(0), uint32(0), "", []byte("a\x00b"), []byte{}, uint64(0), uint32(0))
	f.Add(uint32(25), uint32(0), uint64(1<<63), uint64(1), uint16(65535), uint32(1), uint32(1), "tbl", []byte{}, []byte("x"), uint64(1<<40), uint32(1))
	f.Add(uint32(3), uint32(0), uint64(1), uint64(1), uint16(1), uint32(1), uint32(1), "tbl", []byte{1}, []byte("x"), uint64(0), uint32(0))
	f.Fuzz(func(t *testing.T, cmd, flags uint32, seq, async uint64, attempt uint16, app, zone uint32, table string,
		key, value []byte, pos uint64, limit uint32) {
		h := RequestHeader{Command: Command(cmd), Flags: flags, Seq: seq, AsyncID: async, Attempt: attempt,
			AppID: app, ZoneID: zone, Table: table}
		var b []byte
		var err error
		var keys [][]byte
		switch h.Command.Body() {
		case BodyKey:
			b, err = AppendKeyRequest(nil, h, key)
		case BodyKeyValue:
			b, err = AppendWriteRequest(nil, h, key, value)
		case BodyIndex:
			b, err = AppendIndexRequest(nil, h, key, pos, limit)
		case BodyBatch:
			keys = [][]byte{key, value, key}
			b, err = AppendBatchRequest(nil, h, keys)
		default:
			if _, err = AppendKeyRequest(nil, h, key); err == nil {
				t.Fatal("unknown command accepted")
			}
			return
		}
		if len(table) > MaxTableName {
			if err == nil {
				t.Fatal("long table accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseRequest(b)
		if err != nil {
			t.Fatal(err)
		}
		if r.Command() != h.Command || r.Flags() != flags || r.Seq() != seq || r.AsyncID() != async ||
			r.Attempt() != attempt || r.AppID() != app || r.ZoneID() != zone || string(r.Table()) != table {
			t.Fatal("header fields differ")
		}
		switch h.Command.Body() {
		case BodyKey:
			if !bytes.Equal(r.Key(), key) {
				t.Fatal("key")
			}
		case BodyKeyValue:
			if !bytes.Equal(r.Key(), key) || !bytes.Equal(r.Value(), value) {
				t.Fatal("key/value")
			}
		case BodyIndex:
			if !bytes.Equal(r.Key(), key) || r.Position() != pos || r.Limit() != limit {
				t.Fatal("index body")
			}
		case BodyBatch:
			it := r.Keys()
			for i, k := range keys {
				idx, got, ok := it.Next()
				if !ok || idx != uint32(i) || !bytes.Equal(got, k) {
					t.Fatalf("batch key %d", i)
				}
			}
		}
	})
}

// FuzzRebuildPartial: on any frame and any bitset, a partial rebuild either
// fails leaving dst unchanged, or writes exactly the unanswered keys of a
// valid batch request, in order, with their original indexes and bytes.
// Resume rebuilds get the same treatment.
func FuzzRebuildPartial(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s, []byte{0x0a}, uint64(4), uint16(1))
	}
	big, _ := AppendBatchRequest(nil, hdr(CmdPBBatchFieldGet), batchKeys(40))
	f.Add(big, []byte{0xff, 0x00, 0x55}, uint64(0), uint16(2))
	f.Fuzz(func(t *testing.T, frame, bits []byte, pos uint64, attempt uint16) {
		dst := []byte("dst")
		out, n, err := AppendPartialBatch(dst, frame, Bitset(bits), attempt)
		if err != nil {
			if string(out) != "dst" {
				t.Fatalf("dst changed on error %v", err)
			}
		} else {
			orig, perr := ParseRequest(frame)
			if perr != nil {
				t.Fatalf("rebuilt from a frame ParseRequest rejects: %v", perr)
			}
			r, perr := ParseRequest(out[3:])
			if perr != nil {
				t.Fatalf("rebuild does not parse: %v", perr)
			}
			if r.Seq() != orig.Seq() || r.AsyncID() != orig.AsyncID() || r.Attempt() != attempt ||
				r.Flags()&FlagResend == 0 || r.KeyCount() != n {
				t.Fatal("rebuilt header")
			}
			got := r.Keys()
			for it := orig.Keys(); ; {
				idx, k, ok := it.Next()
				if !ok {
					break
				}
				if Bitset(bits).Has(idx) {
					continue
				}
				gi, gk, ok := got.Next()
				if !ok || gi != idx || !bytes.Equal(gk, k) {
					t.Fatalf("key %d missing or changed", idx)
				}
			}
			if _, _, ok := got.Next(); ok {
				t.Fatal("rebuild holds an answered key")
			}
		}

		out, err = AppendResume(dst, frame, pos, attempt)
		if err != nil {
			if string(out) != "dst" {
				t.Fatalf("dst changed on resume error %v", err)
			}
			return
		}
		orig, _ := ParseRequest(frame)
		r, perr := ParseRequest(out[3:])
		if perr != nil || r.Position() != pos || !bytes.Equal(r.Key(), orig.Key()) || r.Attempt() != attempt {
			t.Fatalf("resume rebuild wrong: %v", perr)
		}
		if orig.Limit() != 0 && uint64(r.Limit())+(pos-orig.Position()) != uint64(orig.Limit()) {
			t.Fatal("resume limit")
		}
	})
}
