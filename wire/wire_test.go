package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func hdr(cmd Command) RequestHeader {
	return RequestHeader{
		Command: cmd, Flags: 0x10, Seq: 0x0102030405060708, AsyncID: 0xA1A2A3A4A5A6A7A8,
		Attempt: 0, AppID: 42, ZoneID: 7, Table: "players",
	}
}

func mustParseRequest(t testing.TB, b []byte) Request {
	t.Helper()
	r, err := ParseRequest(b)
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	return r
}

func checkHeaderFields(t *testing.T, r Request, h RequestHeader) {
	t.Helper()
	if r.Command() != h.Command || r.Flags() != h.Flags || r.Seq() != h.Seq || r.AsyncID() != h.AsyncID ||
		r.Attempt() != h.Attempt || r.AppID() != h.AppID || r.ZoneID() != h.ZoneID || string(r.Table()) != h.Table {
		t.Fatalf("header mismatch: got cmd=%v flags=%x seq=%x async=%x attempt=%d app=%d zone=%d table=%q, want %+v",
			r.Command(), r.Flags(), r.Seq(), r.AsyncID(), r.Attempt(), r.AppID(), r.ZoneID(), r.Table(), h)
	}
}

// TestRequestLayout pins the byte layout the package comment documents
// (SPEC R18): a change to the format must change this test.
func TestRequestLayout(t *testing.T) {
	h := RequestHeader{Command: CmdGet, Flags: 1, Seq: 2, AsyncID: 3, Attempt: 4, AppID: 5, ZoneID: 6, Table: "t"}
	b, err := AppendKeyRequest(nil, h, []byte("ab"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'R', 'R', 1, 1, // magic, version, type
		7, 0, 0, 0, // command
		1, 0, 0, 0, // flags
		2, 0, 0, 0, 0, 0, 0, 0, // seq
		3, 0, 0, 0, 0, 0, 0, 0, // async ID
		4, 0, // attempt
		5, 0, 0, 0, // AppID
		6, 0, 0, 0, // ZoneID
		1, 't', // table
		2, 0, 0, 0, 'a', 'b', // key
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("layout\n got %v\nwant %v", b, want)
	}
}

func TestResponseLayout(t *testing.T) {
	var rb ResponseBuilder
	rb.Start(nil, ResponseHeader{Command: CmdBatchGet, Seq: 2, AsyncID: 3, Result: -1, HaveMore: true, Attempt: 4, Packet: 5, Cursor: 6})
	if err := rb.AddRecord(9, -2, []byte("k"), []byte("vv")); err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'R', 'R', 1, 2,
		23, 0, 0, 0,
		2, 0, 0, 0, 0, 0, 0, 0,
		3, 0, 0, 0, 0, 0, 0, 0,
		0xff, 0xff, 0xff, 0xff, // result -1
		1, 0, // flags, reserved
		4, 0, // attempt
		5, 0, 0, 0, // packet
		1, 0, 0, 0, // count
		6, 0, 0, 0, 0, 0, 0, 0, // cursor
		9, 0, 0, 0, 0, 0, 0, 0, // tag
		0xfe, 0xff, 0xff, 0xff, // record result -2
		1, 0, 0, 0, 'k',
		2, 0, 0, 0, 'v', 'v',
	}
	if !bytes.Equal(rb.Bytes(), want) {
		t.Fatalf("layout\n got %v\nwant %v", rb.Bytes(), want)
	}
}

func TestRequestRoundTrip(t *testing.T) {
	t.Run("simple", func(t *testing.T) {
		for _, cmd := range []Command{CmdGet, CmdPBFieldGet, CmdListGet} {
			h := hdr(cmd)
			b, err := AppendKeyRequest([]byte("prefix"), h, []byte("user:1"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b[:6]) != "prefix" {
				t.Fatal("dst prefix lost")
			}
			r := mustParseRequest(t, b[6:])
			checkHeaderFields(t, r, h)
			if string(r.Key()) != "user:1" || r.Value() != nil || r.KeyCount() != 0 || r.Body() != BodyKey {
				t.Fatalf("body: key=%q value=%q count=%d", r.Key(), r.Value(), r.KeyCount())
			}
			if it := r.Keys(); it.Len() != 0 {
				t.Fatal("simple read has batch keys")
			}
		}
	})
	t.Run("write", func(t *testing.T) {
		for _, cmd := range []Command{CmdInsert, CmdReplace, CmdUpdate, CmdDelete} {
			h := hdr(cmd)
			b, err := AppendWriteRequest(nil, h, []byte("k"), []byte("value"))
			if err != nil {
				t.Fatal(err)
			}
			r := mustParseRequest(t, b)
			checkHeaderFields(t, r, h)
			if string(r.Key()) != "k" || string(r.Value()) != "value" || r.Position() != 0 || r.Limit() != 0 {
				t.Fatalf("body: %q %q", r.Key(), r.Value())
			}
		}
	})
	t.Run("index", func(t *testing.T) {
		for _, cmd := range []Command{CmdGetByPartKey, CmdListGetAll} {
			h := hdr(cmd)
			b, err := AppendIndexRequest(nil, h, []byte("guild:9"), 17, 100)
			if err != nil {
				t.Fatal(err)
			}
			r := mustParseRequest(t, b)
			checkHeaderFields(t, r, h)
			if string(r.Key()) != "guild:9" || r.Position() != 17 || r.Limit() != 100 || r.Value() != nil {
				t.Fatalf("body: %q pos=%d limit=%d", r.Key(), r.Position(), r.Limit())
			}
		}
	})
	t.Run("batch", func(t *testing.T) {
		keys := [][]byte{[]byte("a"), {}, []byte("ccc"), bytes.Repeat([]byte("d"), 300)}
		for _, cmd := range []Command{CmdBatchGet, CmdPBBatchFieldGet, CmdListGetBatch} {
			h := hdr(cmd)
			b, err := AppendBatchRequest(nil, h, keys)
			if err != nil {
				t.Fatal(err)
			}
			r := mustParseRequest(t, b)
			checkHeaderFields(t, r, h)
			if r.KeyCount() != len(keys) || r.Key() != nil {
				t.Fatalf("count %d", r.KeyCount())
			}
			it := r.Keys()
			for i := range keys {
				if it.Len() != len(keys)-i {
					t.Fatalf("Len %d at %d", it.Len(), i)
				}
				idx, k, ok := it.Next()
				if !ok || idx != uint32(i) || !bytes.Equal(k, keys[i]) {
					t.Fatalf("key %d: idx=%d key=%q ok=%v", i, idx, k, ok)
				}
			}
			if _, _, ok := it.Next(); ok {
				t.Fatal("iterator past the end")
			}
		}
	})
}

func TestBuilderErrors(t *testing.T) {
	long := strings.Repeat("t", MaxTableName+1)
	cases := []struct {
		name string
		fn   func() ([]byte, error)
		want error
	}{
		{"key wrong body", func() ([]byte, error) { return AppendKeyRequest([]byte("x"), hdr(CmdBatchGet), nil) }, ErrWrongBody},
		{"key unknown cmd", func() ([]byte, error) { return AppendKeyRequest([]byte("x"), hdr(999), nil) }, ErrUnknownCommand},
		{"write wrong body", func() ([]byte, error) { return AppendWriteRequest([]byte("x"), hdr(CmdGet), nil, nil) }, ErrWrongBody},
		{"index wrong body", func() ([]byte, error) { return AppendIndexRequest([]byte("x"), hdr(CmdGet), nil, 0, 0) }, ErrWrongBody},
		{"batch wrong body", func() ([]byte, error) { return AppendBatchRequest([]byte("x"), hdr(CmdGet), [][]byte{nil}) }, ErrWrongBody},
		{"batch empty", func() ([]byte, error) { return AppendBatchRequest([]byte("x"), hdr(CmdBatchGet), nil) }, ErrCountRange},
		{"batch too many", func() ([]byte, error) {
			return AppendBatchRequest([]byte("x"), hdr(CmdBatchGet), make([][]byte, MaxBatchKeys+1))
		}, ErrCountRange},
		{"table too long", func() ([]byte, error) {
			h := hdr(CmdGet)
			h.Table = long
			return AppendKeyRequest([]byte("x"), h, nil)
		}, ErrTooLarge},
		{"frame too large", func() ([]byte, error) {
			return AppendKeyRequest([]byte("x"), hdr(CmdGet), make([]byte, MaxFrameSize))
		}, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.fn()
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if string(b) != "x" {
				t.Fatalf("dst changed on error: %q", b)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	good, _ := AppendBatchRequest(nil, hdr(CmdBatchGet), [][]byte{[]byte("a"), []byte("b")})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrShortFrame},
		{"3 bytes", good[:3], ErrShortFrame},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"version", mut(func(b []byte) []byte { b[2] = 2; return b }), ErrBadVersion},
		{"response type", mut(func(b []byte) []byte { b[3] = typeResponse; return b }), ErrFrameType},
		{"header cut", good[:RequestHeaderSize-1], ErrShortFrame},
		{"table cut", good[:RequestHeaderSize+3], ErrShortFrame},
		{"unknown command", mut(func(b []byte) []byte { b[reqCommand] = 200; return b }), ErrUnknownCommand},
		{"zero keys", mut(func(b []byte) []byte { le.PutUint32(b[RequestHeaderSize+7:], 0); return b }), ErrCountRange},
		{"count too big", mut(func(b []byte) []byte { le.PutUint32(b[RequestHeaderSize+7:], 3); return b }), ErrCountRange},
		{"count huge", mut(func(b []byte) []byte { le.PutUint32(b[RequestHeaderSize+7:], 0xffffffff); return b }), ErrCountRange},
		{"key length huge", mut(func(b []byte) []byte { le.PutUint32(b[RequestHeaderSize+7+4+4:], 0xfffffff0); return b }), ErrShortFrame},
		{"trailing", append(append([]byte(nil), good...), 0), ErrTrailingBytes},
		{"last byte cut", good[:len(good)-1], ErrShortFrame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseRequest(c.frame); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	// Every truncation of every body kind is an error, never a panic.
	frames := [][]byte{good}
	for _, cmd := range []Command{CmdGet, CmdInsert, CmdGetByPartKey} {
		var b []byte
		switch cmd.Body() {
		case BodyKey:
			b, _ = AppendKeyRequest(nil, hdr(cmd), []byte("key"))
		case BodyKeyValue:
			b, _ = AppendWriteRequest(nil, hdr(cmd), []byte("key"), []byte("val"))
		case BodyIndex:
			b, _ = AppendIndexRequest(nil, hdr(cmd), []byte("key"), 1, 2)
		}
		frames = append(frames, b)
	}
	for _, f := range frames {
		for n := 0; n < len(f); n++ {
			if _, err := ParseRequest(f[:n]); err == nil {
				t.Fatalf("truncation to %d of %d parsed", n, len(f))
			}
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	h := ResponseHeader{Command: CmdGetByPartKey, Seq: 99, AsyncID: 1234, Result: 0, HaveMore: true, Attempt: 2, Packet: 3, Cursor: 110}
	var rb ResponseBuilder
	rb.Start([]byte("keep"), h)
	for i := 0; i < 10; i++ {
		if err := rb.AddRecord(uint64(100+i), int32(-i), []byte(fmt.Sprint("k", i)), bytes.Repeat([]byte{byte(i)}, i)); err != nil {
			t.Fatal(err)
		}
	}
	if rb.Records() != 10 || rb.Len() != len(rb.Frame()) || string(rb.Bytes()[:4]) != "keep" {
		t.Fatalf("builder state: records=%d len=%d", rb.Records(), rb.Len())
	}
	r, err := ParseResponse(rb.Frame())
	if err != nil {
		t.Fatal(err)
	}
	if r.Command() != h.Command || r.Seq() != h.Seq || r.AsyncID() != h.AsyncID || r.Result() != h.Result ||
		r.HaveMore() != h.HaveMore || r.Attempt() != h.Attempt || r.Packet() != h.Packet || r.Cursor() != h.Cursor || r.RecordCount() != 10 {
		t.Fatalf("header mismatch")
	}
	it := r.Records()
	for i := 0; i < 10; i++ {
		rec, ok := it.Next()
		if !ok || rec.Tag != uint64(100+i) || rec.Result != int32(-i) || string(rec.Key) != fmt.Sprint("k", i) ||
			!bytes.Equal(rec.Value, bytes.Repeat([]byte{byte(i)}, i)) {
			t.Fatalf("record %d: %+v ok=%v", i, rec, ok)
		}
	}
	if _, ok := it.Next(); ok || it.Len() != 0 {
		t.Fatal("iterator past the end")
	}

	// An error answer without records, HaveMore off.
	e := AppendResponse(nil, ResponseHeader{Command: CmdGet, Seq: 1, AsyncID: 2, Result: -7953})
	r, err = ParseResponse(e)
	if err != nil || r.Result() != -7953 || r.HaveMore() || r.RecordCount() != 0 {
		t.Fatalf("error answer: %v %d", err, r.Result())
	}
}

func TestParseResponseErrors(t *testing.T) {
	var rb ResponseBuilder
	rb.Start(nil, ResponseHeader{Command: CmdBatchGet, Seq: 1})
	_ = rb.AddRecord(0, 0, []byte("k"), []byte("v"))
	_ = rb.AddRecord(1, 0, []byte("k2"), []byte("v2"))
	good := rb.Frame()
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrShortFrame},
		{"magic", mut(func(b []byte) []byte { b[1] = 0; return b }), ErrBadMagic},
		{"version", mut(func(b []byte) []byte { b[2] = 0; return b }), ErrBadVersion},
		{"request type", mut(func(b []byte) []byte { b[3] = typeRequest; return b }), ErrFrameType},
		{"header cut", good[:ResponseHeaderSize-1], ErrShortFrame},
		{"count huge", mut(func(b []byte) []byte { le.PutUint32(b[rspCount:], 1<<31); return b }), ErrCountRange},
		{"count short", mut(func(b []byte) []byte { le.PutUint32(b[rspCount:], 1); return b }), ErrTrailingBytes},
		{"key len huge", mut(func(b []byte) []byte { le.PutUint32(b[ResponseHeaderSize+12:], 1<<30); return b }), ErrShortFrame},
		{"trailing", append(append([]byte(nil), good...), 1), ErrTrailingBytes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseResponse(c.frame); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	for n := 0; n < len(good); n++ {
		if _, err := ParseResponse(good[:n]); err == nil {
			t.Fatalf("truncation to %d parsed", n)
		}
	}
}

func TestPeekResponseSeq(t *testing.T) {
	f := AppendResponse(nil, ResponseHeader{Seq: 0xabcdef, AsyncID: 1})
	if seq, ok := PeekResponseSeq(f[:20]); !ok || seq != 0xabcdef {
		t.Fatalf("truncated response: %x %v", seq, ok)
	}
	req, _ := AppendKeyRequest(nil, hdr(CmdGet), []byte("k"))
	for _, bad := range [][]byte{nil, f[:15], req, []byte("garbage-garbage-garbage")} {
		if _, ok := PeekResponseSeq(bad); ok {
			t.Fatalf("PeekResponseSeq accepted %q", bad)
		}
	}
}

func TestCommandClasses(t *testing.T) {
	simple := map[Command]bool{7: true, 103: true, 15: true}
	complexCmds := map[Command]bool{23: true, 117: true, 153: true, 25: true, 11: true}
	for _, c := range ReadCommands {
		if !c.IsRead() || c.IsSimpleRead() != simple[c] || c.IsComplexRead() != complexCmds[c] {
			t.Errorf("%v: read=%v simple=%v complex=%v", c, c.IsRead(), c.IsSimpleRead(), c.IsComplexRead())
		}
		if strings.HasPrefix(c.String(), "cmd(") {
			t.Errorf("%d has no name", c)
		}
	}
	for _, c := range []Command{CmdInsert, CmdReplace, CmdUpdate, CmdDelete, 0, 200, 0xffffffff} {
		if c.IsRead() || c.IsSimpleRead() || c.IsComplexRead() {
			t.Errorf("%v classed as read", c)
		}
	}
	if Command(200).String() != "cmd(200)" || Command(200).Body() != BodyUnknown || BodyUnknown.String() != "unknown" {
		t.Error("unknown command naming")
	}
	for k := BodyKey; k <= BodyKeyValue; k++ {
		if k.String() == "unknown" {
			t.Errorf("kind %d has no name", k)
		}
	}
}

func TestBitset(t *testing.T) {
	s := make(Bitset, BitsetLen(20))
	if len(s) != 3 || BitsetLen(0) != 0 || BitsetLen(8) != 1 || BitsetLen(9) != 2 {
		t.Fatal("BitsetLen")
	}
	if !s.Set(0) || !s.Set(19) || s.Set(19) || s.Set(24) {
		t.Fatal("Set results")
	}
	for i := uint32(0); i < 40; i++ {
		if s.Has(i) != (i == 0 || i == 19) {
			t.Fatalf("Has(%d)", i)
		}
	}
	if Bitset(nil).Has(0) || Bitset(nil).Set(0) {
		t.Fatal("nil set")
	}
}

func batchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-%04d", i))
	}
	return keys
}

// TestPartialBatch: the rebuilt request holds exactly the unanswered keys,
// each with its original index and bytes, nothing else (SPEC R11); the
// header keeps seq and async ID and carries the new attempt.
func TestPartialBatch(t *testing.T) {
	keys := batchKeys(100)
	h := hdr(CmdBatchGet)
	orig, err := AppendBatchRequest(nil, h, keys)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(Bitset, BitsetLen(len(keys)))
	for i := 0; i < 100; i += 3 {
		answered.Set(uint32(i))
	}
	out, n, err := AppendPartialBatch([]byte("pre"), orig, answered, 2)
	if err != nil {
		t.Fatal(err)
	}
	if string(out[:3]) != "pre" {
		t.Fatal("dst prefix lost")
	}
	r := mustParseRequest(t, out[3:])
	want := h
	want.Attempt = 2
	want.Flags |= FlagResend
	checkHeaderFields(t, r, want)
	if n != 66 || r.KeyCount() != 66 {
		t.Fatalf("n=%d count=%d, want 66", n, r.KeyCount())
	}
	it := r.Keys()
	for i := 0; i < 100; i++ {
		if i%3 == 0 {
			continue
		}
		idx, k, ok := it.Next()
		if !ok || idx != uint32(i) || !bytes.Equal(k, keys[i]) {
			t.Fatalf("want key %d, got idx=%d key=%q", i, idx, k)
		}
	}
	if _, _, ok := it.Next(); ok {
		t.Fatal("extra key")
	}

	// A rebuild of the rebuild (a second stall) keeps original indexes.
	for i := 1; i < 50; i++ {
		answered.Set(uint32(i))
	}
	out2, n2, err := AppendPartialBatch(nil, out[3:], answered, 3)
	if err != nil {
		t.Fatal(err)
	}
	r2 := mustParseRequest(t, out2)
	if r2.Attempt() != 3 || n2 != 33 { // 50..99 less the 17 multiples of 3
		t.Fatalf("second rebuild: attempt=%d n=%d", r2.Attempt(), n2)
	}
	first, _, _ := func() (uint32, []byte, bool) { it := r2.Keys(); return it.Next() }()
	if first != 50 {
		t.Fatalf("second rebuild starts at %d, want 50", first)
	}

	// All answered: nothing to send, dst unchanged.
	for i := 0; i < 100; i++ {
		answered.Set(uint32(i))
	}
	if b, _, err := AppendPartialBatch([]byte("x"), orig, answered, 1); !errors.Is(err, ErrNothingMissing) || string(b) != "x" {
		t.Fatalf("all answered: %v %q", err, b)
	}
	// An empty or short bitset sends every key.
	if _, n, err := AppendPartialBatch(nil, orig, nil, 1); err != nil || n != 100 {
		t.Fatalf("nil bitset: n=%d err=%v", n, err)
	}
	// Wrong kinds and bad frames.
	simple, _ := AppendKeyRequest(nil, hdr(CmdGet), []byte("k"))
	if b, _, err := AppendPartialBatch([]byte("x"), simple, nil, 1); !errors.Is(err, ErrWrongBody) || string(b) != "x" {
		t.Fatalf("simple: %v", err)
	}
	for n := 0; n < len(orig); n++ {
		if b, _, err := AppendPartialBatch([]byte("x"), orig[:n], nil, 1); err == nil || string(b) != "x" {
			t.Fatalf("truncated orig %d: err=%v dst=%q", n, err, b)
		}
	}
}

func TestResume(t *testing.T) {
	h := hdr(CmdGetByPartKey)
	orig, _ := AppendIndexRequest(nil, h, []byte("part"), 10, 50)
	out, err := AppendResume(nil, orig, 25, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := mustParseRequest(t, out)
	want := h
	want.Attempt = 1
	want.Flags |= FlagResend
	checkHeaderFields(t, r, want)
	if string(r.Key()) != "part" || r.Position() != 25 || r.Limit() != 35 {
		t.Fatalf("resume: key=%q pos=%d limit=%d", r.Key(), r.Position(), r.Limit())
	}
	// No limit stays no limit.
	nolimit, _ := AppendIndexRequest(nil, hdr(CmdListGetAll), []byte("list"), 0, 0)
	out, err = AppendResume(nil, nolimit, 1000, 2)
	if r := mustParseRequest(t, out); err != nil || r.Position() != 1000 || r.Limit() != 0 || r.Command() != CmdListGetAll {
		t.Fatalf("no limit: %v", err)
	}
	for _, c := range []struct {
		pos  uint64
		want error
	}{{9, ErrPosition}, {60, ErrPosition}, {61, ErrPosition}} {
		if b, err := AppendResume([]byte("x"), orig, c.pos, 1); !errors.Is(err, c.want) || string(b) != "x" {
			t.Fatalf("pos %d: %v", c.pos, err)
		}
	}
	batch, _ := AppendBatchRequest(nil, hdr(CmdBatchGet), batchKeys(2))
	if _, err := AppendResume(nil, batch, 0, 1); !errors.Is(err, ErrWrongBody) {
		t.Fatalf("batch: %v", err)
	}
}

func TestResend(t *testing.T) {
	h := hdr(CmdPBFieldGet)
	orig, _ := AppendKeyRequest(nil, h, []byte("k"))
	out, err := AppendResend(nil, orig, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := mustParseRequest(t, out)
	want := h
	want.Attempt = 5
	want.Flags |= FlagResend
	checkHeaderFields(t, r, want)
	if string(r.Key()) != "k" {
		t.Fatal("key")
	}
	if mustParseRequest(t, orig).Attempt() != 0 {
		t.Fatal("original modified")
	}
	if b, err := AppendResend([]byte("x"), orig[:10], 1); err == nil || string(b) != "x" {
		t.Fatal("truncated orig accepted")
	}
}

func TestStreamReader(t *testing.T) {
	var stream []byte
	var frames [][]byte
	for i := 0; i < 200; i++ {
		f := bytes.Repeat([]byte{byte(i)}, i*37%1000)
		frames = append(frames, f)
		var err error
		if stream, err = AppendStreamFrame(stream, f); err != nil {
			t.Fatal(err)
		}
	}
	// A frame larger than the initial buffer, built in place.
	big := bytes.Repeat([]byte("z"), 3*readerBufSize+5)
	stream, at := BeginStreamFrame(stream)
	stream = append(stream, big...)
	if err := EndStreamFrame(stream, at); err != nil {
		t.Fatal(err)
	}
	frames = append(frames, big)

	for name, src := range map[string]io.Reader{
		"whole":    bytes.NewReader(stream),
		"onebyte":  iotest.OneByteReader(bytes.NewReader(stream)),
		"halfread": iotest.HalfReader(bytes.NewReader(stream)),
		"dataerr":  iotest.DataErrReader(bytes.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			r := NewReader(src, 0)
			for i, want := range frames {
				got, err := r.Next()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("frame %d: %d bytes, want %d", i, len(got), len(want))
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("end: %v", err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("end is sticky: %v", err)
			}
		})
	}

	t.Run("cut", func(t *testing.T) {
		// Frame 0 is empty (4 bytes); frame 1 is cut after 6 of its bytes.
		r := NewReader(bytes.NewReader(stream[:14]), 0)
		if f, err := r.Next(); err != nil || len(f) != 0 {
			t.Fatalf("frame 0: %d bytes, %v", len(f), err)
		}
		if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		s := le.AppendUint32(nil, 1001)
		s = append(s, make([]byte, 1001)...)
		r := NewReader(bytes.NewReader(s), 1000)
		if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err %v", err)
		}
		if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("sticky: %v", err)
		}
	})
	t.Run("transient error keeps bytes", func(t *testing.T) {
		f, _ := AppendStreamFrame(nil, []byte("hello"))
		errTimeout := errors.New("timeout")
		src := &flakyReader{data: f, failAt: 3, err: errTimeout}
		r := NewReader(src, 0)
		if _, err := r.Next(); !errors.Is(err, errTimeout) {
			t.Fatalf("first: %v", err)
		}
		got, err := r.Next()
		if err != nil || string(got) != "hello" {
			t.Fatalf("after transient error: %q %v", got, err)
		}
	})
	if _, err := AppendStreamFrame(nil, make([]byte, MaxFrameSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatal("AppendStreamFrame accepted an oversize frame")
	}
	if err := EndStreamFrame([]byte{1, 2}, 0); !errors.Is(err, ErrShortFrame) {
		t.Fatal("EndStreamFrame with bad at")
	}
}

// flakyReader returns err once after failAt bytes.
type flakyReader struct {
	data   []byte
	off    int
	failAt int
	err    error
}

func (f *flakyReader) Read(p []byte) (int, error) {
	if f.off == f.failAt && f.err != nil {
		err := f.err
		f.err = nil
		return 0, err
	}
	lim := len(f.data)
	if f.err != nil {
		lim = f.failAt
	}
	if f.off >= len(f.data) {
		return 0, io.EOF
	}
	n := copy(p, f.data[f.off:lim])
	f.off += n
	return n, nil
}

func TestAddRecordTooLarge(t *testing.T) {
	var rb ResponseBuilder
	rb.Start(nil, ResponseHeader{})
	if err := rb.AddRecord(0, 0, nil, make([]byte, MaxFrameSize)); !errors.Is(err, ErrTooLarge) || rb.Records() != 0 {
		t.Fatalf("err %v records %d", err, rb.Records())
	}
}

// TestAllocFreeDecode: parsing a response and walking its records, either
// way, allocates nothing (SPEC R18, §5).
func TestAllocFreeDecode(t *testing.T) {
	frame := tenRecordResponse()
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		r, err := ParseResponse(frame)
		if err != nil {
			t.Fatal(err)
		}
		s := r.Scan()
		for s.Next() {
			n += len(s.Key()) + len(s.Value()) + int(s.Tag()) + int(s.Result())
		}
		it := r.Records()
		for {
			rec, ok := it.Next()
			if !ok {
				break
			}
			n += len(rec.Value)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per parse and walk", allocs)
	}
	if n == 0 {
		t.Fatal("nothing walked")
	}
}

// TestPeekRequestAsyncID: the async ID read straight from a packed request,
// for every body kind; anything that is not a request frame reports false.
func TestPeekRequestAsyncID(t *testing.T) {
	h := RequestHeader{Command: CmdGet, Seq: 9, AsyncID: 0x1122334455667788, AppID: 1, ZoneID: 2, Table: "t"}
	for _, cmd := range []Command{CmdGet, CmdBatchGet, CmdGetByPartKey, CmdInsert} {
		h.Command = cmd
		var f []byte
		var err error
		switch cmd.Body() {
		case BodyKey:
			f, err = AppendKeyRequest(nil, h, []byte("k"))
		case BodyBatch:
			f, err = AppendBatchRequest(nil, h, [][]byte{[]byte("k")})
		case BodyIndex:
			f, err = AppendIndexRequest(nil, h, []byte("k"), 0, 0)
		default:
			f, err = AppendWriteRequest(nil, h, []byte("k"), []byte("v"))
		}
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := PeekRequestAsyncID(f); !ok || id != h.AsyncID {
			t.Fatalf("%v: %x %v", cmd, id, ok)
		}
		if _, ok := PeekRequestAsyncID(f[:27]); ok {
			t.Fatalf("%v: a short frame reported ok", cmd)
		}
	}
	rsp := AppendResponse(nil, ResponseHeader{Command: CmdGet, AsyncID: 5})
	if _, ok := PeekRequestAsyncID(rsp); ok {
		t.Fatal("a response frame reported ok")
	}
}
