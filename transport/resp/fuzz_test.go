package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/readretry/readretry/wire"
)

// scriptConn is a net.Conn whose Read replays a replica's bytes and whose
// Write keeps what the client sent.
type scriptConn struct {
	net.Conn // nil: methods not overridden are not called
	in       *bytes.Reader
	out      bytes.Buffer
}

func (s *scriptConn) Read(p []byte) (int, error)        { return s.in.Read(p) }
func (s *scriptConn) Write(p []byte) (int, error)       { return s.out.Write(p) }
func (s *scriptConn) Close() error                      { return nil }
func (s *scriptConn) SetWriteDeadline(time.Time) error  { return nil }
func (s *scriptConn) SetDeadline(time.Time) error       { return nil }
func (s *scriptConn) SetReadDeadline(t time.Time) error { return nil }

// fuzzRequests are the requests every decoding run starts with: a GET, a
// batch of five keys (three MGET chunks of two), an index read from
// position 4 (LRANGE chunks of three).
func fuzzRequests(t testing.TB) []byte {
	t.Helper()
	var p []byte
	add := func(frame []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		p, err = wire.AppendStreamFrame(p, frame)
		if err != nil {
			t.Fatal(err)
		}
	}
	add(wire.AppendKeyRequest(nil, wire.RequestHeader{Command: wire.CmdGet, Seq: 1, AsyncID: 11}, []byte("g")))
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e")}
	add(wire.AppendBatchRequest(nil, wire.RequestHeader{Command: wire.CmdBatchGet, Seq: 2, AsyncID: 12}, keys))
	add(wire.AppendIndexRequest(nil, wire.RequestHeader{Command: wire.CmdListGetAll, Seq: 3, AsyncID: 13}, []byte("l"), 4, 0))
	return p
}

func fuzzConn(in []byte) (*conn, *scriptConn) {
	tr := &Transport{cfg: Config{BatchChunk: 2, RangeChunk: 3, MaxReply: 256, WriteTimeout: time.Second, RetryCode: -7953, AnswerLost: true}}
	sc := &scriptConn{in: bytes.NewReader(in)}
	return newConn(tr, sc), sc
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// goodReplies answers fuzzRequests correctly: g's value, the three MGET
// chunks (d missing), the first LRANGE chunk full (so a second is asked
// for) and the second short (the list ends at position 8).
var goodReplies = bulk("G") +
	"*2\r\n" + bulk("A") + bulk("B") + "*2\r\n" + bulk("C") + "$-1\r\n" + "*1\r\n" + bulk("E") +
	"*3\r\n" + bulk("x4") + bulk("x5") + bulk("x6") + "*2\r\n" + bulk("x7") + bulk("x8")

// FuzzDecode feeds a replica's bytes to a connection with the requests of
// fuzzRequests pending: whatever the bytes, nothing panics, the connection
// ends with EOF or one of the decoder's errors, and every frame it made is
// a valid response that answers a pending request in order with records
// it could carry — never a wrong answer.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(goodReplies))
	f.Add([]byte(bulk("G") + "-LOADING loading\r\n" + "*2\r\n" + bulk("C") + "$-1\r\n"))
	f.Add([]byte("$-1\r\n" + "-MASTERDOWN down\r\n" + "-BUSY busy\r\n" + "-TRYAGAIN x\r\n" + "*0\r\n"))
	f.Add([]byte("*1\r\n" + bulk("G")))
	f.Add([]byte("$999999\r\n"))
	f.Add([]byte("$3\r\nabcXY"))
	f.Add([]byte(bulk("G") + "*3\r\n"))
	f.Add([]byte("+OK\r\n"))
	f.Add([]byte(goodReplies + bulk("extra")))
	f.Add([]byte("\x00\xff\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, _ := fuzzConn(in)
		if _, err := c.Write(fuzzRequests(t)); err != nil {
			t.Fatal(err)
		}
		frames, err := readFrames(c)
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
			errors.Is(err, ErrProtocol), errors.Is(err, ErrReplyTooLarge), errors.Is(err, ErrMismatch):
		default:
			t.Fatalf("connection ended with %v", err)
		}
		if err := checkFrames(frames); err != nil {
			t.Fatal(err)
		}
	})
}

// readFrames reads the connection's frames, copied, until an error.
func readFrames(c *conn) ([][]byte, error) {
	r := wire.NewReader(c, 0)
	var frames [][]byte
	for {
		f, err := r.Next()
		if err != nil {
			return frames, err
		}
		frames = append(frames, bytes.Clone(f))
	}
}

// checkFrames checks frames against what fuzzRequests asked: sequence
// numbers in request order, records only for keys and positions asked.
func checkFrames(frames [][]byte) error {
	lastSeq, nextPacket := uint64(0), uint32(0)
	for n, f := range frames {
		rsp, err := wire.ParseResponse(f)
		if err != nil {
			return err
		}
		seq := rsp.Seq()
		if seq < lastSeq || seq < 1 || seq > 3 {
			return errors.New("frame " + strconv.Itoa(n) + ": sequence out of order")
		}
		if seq != lastSeq {
			nextPacket = 0
		}
		if rsp.AsyncID() != seq+10 || rsp.Packet() != nextPacket {
			return errors.New("frame " + strconv.Itoa(n) + ": async ID or packet index wrong")
		}
		lastSeq, nextPacket = seq, nextPacket+1
		s := rsp.Scan()
		i := 0
		for s.Next() {
			switch seq {
			case 1:
				if i > 0 || s.Tag() != 0 || string(s.Key()) != "g" {
					return errors.New("GET record wrong")
				}
			case 2:
				want := rsp.Packet()*2 + uint32(i)
				if s.Tag() != uint64(want) || string(s.Key()) != string(rune('a'+want)) {
					return errors.New("MGET record under the wrong key")
				}
			case 3:
				if s.Tag() != 4+uint64(rsp.Packet())*3+uint64(i) {
					return errors.New("LRANGE record at the wrong position")
				}
			}
			i++
		}
		if seq == 1 && rsp.Result() == 0 && i != 1 {
			return errors.New("GET answered without its record")
		}
	}
	return nil
}

// Exact frames for a well-behaved replica, and what it wrote: the model is
// the mapping table of the package documentation.
func TestConnTranslates(t *testing.T) {
	c, sc := fuzzConn([]byte(goodReplies))
	if _, err := c.Write(fuzzRequests(t)); err != nil {
		t.Fatal(err)
	}
	frames, err := readFrames(c)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	type rec struct {
		tag      uint64
		res      int32
		key, val string
	}
	want := []struct {
		seq    uint64
		more   bool
		cursor uint64
		res    int32
		recs   []rec
	}{
		{1, false, 0, 0, []rec{{0, 0, "g", "G"}}},
		{2, true, 0, 0, []rec{{0, 0, "a", "A"}, {1, 0, "b", "B"}}},
		{2, true, 0, 0, []rec{{2, 0, "c", "C"}, {3, ResultNotFound, "d", ""}}},
		{2, false, 0, 0, []rec{{4, 0, "e", "E"}}},
		{3, true, 7, 0, []rec{{4, 0, "l", "x4"}, {5, 0, "l", "x5"}, {6, 0, "l", "x6"}}},
		{3, false, 9, 0, []rec{{7, 0, "l", "x7"}, {8, 0, "l", "x8"}}},
	}
	if len(frames) != len(want) {
		t.Fatalf("%d frames, want %d", len(frames), len(want))
	}
	for n, w := range want {
		rsp, err := wire.ParseResponse(frames[n])
		if err != nil {
			t.Fatal(err)
		}
		if rsp.Seq() != w.seq || rsp.HaveMore() != w.more || rsp.Cursor() != w.cursor || rsp.Result() != w.res {
			t.Errorf("step %d: seq %d more %v cursor %d result %d, want %d %v %d %d", n,
				rsp.Seq(), rsp.HaveMore(), rsp.Cursor(), rsp.Result(), w.seq, w.more, w.cursor, w.res)
		}
		var got []rec
		for s := rsp.Scan(); s.Next(); {
			got = append(got, rec{s.Tag(), s.Result(), string(s.Key()), string(s.Value())})
		}
		if len(got) != len(w.recs) {
			t.Errorf("step %d: records %v, want %v", n, got, w.recs)
			continue
		}
		for i := range got {
			if got[i] != w.recs[i] {
				t.Errorf("step %d record %d: %v, want %v", n, i, got[i], w.recs[i])
			}
		}
	}
	wantOut := "*2\r\n$3\r\nGET\r\n$1\r\ng\r\n" +
		"*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n" + "*3\r\n$4\r\nMGET\r\n$1\r\nc\r\n$1\r\nd\r\n" + "*2\r\n$4\r\nMGET\r\n$1\r\ne\r\n" +
		"*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n4\r\n$1\r\n6\r\n" +
		"*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n7\r\n$1\r\n9\r\n"
	if got := sc.out.String(); got != wantOut {
		t.Errorf("written:\n%q\nwant\n%q", got, wantOut)
	}
}

// A reply that does not fit its command ends the connection: the answers
// decoded before it are delivered, nothing of it or after it is, the drop
// is counted, and each request still pending gets one packet with the
// retry code and no record (lost: the engine re-sends it at once).
func TestConnDropsMismatch(t *testing.T) {
	steps := []struct {
		in      string
		answers int      // frames answering a reply
		lost    []uint64 // sequence numbers answered as lost, in order
		wantErr error
	}{
		{bulk("G") + "*1\r\n" + bulk("A"), 1, []uint64{2, 3}, ErrMismatch},                                                                               // MGET chunk of two answered with one
		{"*1\r\n" + bulk("G"), 0, []uint64{1, 2, 3}, ErrMismatch},                                                                                        // GET answered with an array
		{"$300\r\n", 0, []uint64{1, 2, 3}, ErrReplyTooLarge},                                                                                             // bulk over MaxReply (256)
		{bulk("G") + "!garbage\r\n", 1, []uint64{2, 3}, ErrProtocol},                                                                                     // not RESP2
		{goodReplies + bulk("unasked"), 6, nil, ErrMismatch},                                                                                             // a reply with nothing pending
		{bulk("G") + "*2\r\n" + bulk("A") + ":5\r\n", 1, []uint64{2, 3}, ErrMismatch},                                                                    // an integer inside MGET
		{bulk("G") + "*2\r\n" + bulk("A") + bulk("B") + "*2\r\n" + bulk("C") + "$-1\r\n" + "*1\r\n" + bulk("E") + "*4\r\n", 4, []uint64{3}, ErrMismatch}, // LRANGE longer than asked
	}
	for n, s := range steps {
		c, _ := fuzzConn([]byte(s.in))
		if _, err := c.Write(fuzzRequests(t)); err != nil {
			t.Fatal(err)
		}
		frames, err := readFrames(c)
		if !errors.Is(err, s.wantErr) || len(frames) != s.answers+len(s.lost) {
			t.Errorf("step %d: %d frames, err %v; want %d+%d, %v", n, len(frames), err, s.answers, len(s.lost), s.wantErr)
			continue
		}
		if got := c.t.stats.protocolErrors.Load(); got != 1 {
			t.Errorf("step %d: protocol errors %d, want 1", n, got)
		}
		if err := checkFrames(frames); err != nil {
			t.Errorf("step %d: %v", n, err)
		}
		for i, seq := range s.lost {
			rsp, _ := wire.ParseResponse(frames[s.answers+i])
			if rsp.Seq() != seq || rsp.Result() != -7953 || rsp.RecordCount() != 0 || rsp.HaveMore() {
				t.Errorf("step %d lost %d: seq %d result %d records %d more %v; want seq %d, -7953, none", n, i,
					rsp.Seq(), rsp.Result(), rsp.RecordCount(), rsp.HaveMore(), seq)
			}
		}
	}
}

// A connection that ends (EOF, reset) with commands pending answers each
// pending request attempt once with the retry code, whatever number of
// its chunks were pending; the packet index is the first chunk not
// answered and an index read's cursor the position it was asked from.
func TestConnLostAnswers(t *testing.T) {
	in := bulk("G") + "*2\r\n" + bulk("A") + bulk("B") // then EOF: MGET chunks 1 and 2 and the LRANGE pending
	c, _ := fuzzConn([]byte(in))
	if _, err := c.Write(fuzzRequests(t)); err != nil {
		t.Fatal(err)
	}
	frames, err := readFrames(c)
	if !errors.Is(err, io.EOF) || len(frames) != 4 {
		t.Fatalf("%d frames, err %v; want 4, EOF", len(frames), err)
	}
	want := []struct {
		seq    uint64
		packet uint32
		cursor uint64
	}{{2, 1, 0}, {3, 0, 4}}
	for i, w := range want {
		rsp, _ := wire.ParseResponse(frames[2+i])
		if rsp.Seq() != w.seq || rsp.Packet() != w.packet || rsp.Cursor() != w.cursor || rsp.Result() != -7953 || rsp.RecordCount() != 0 {
			t.Errorf("lost %d: seq %d packet %d cursor %d result %d records %d; want %+v, -7953, none",
				i, rsp.Seq(), rsp.Packet(), rsp.Cursor(), rsp.Result(), rsp.RecordCount(), w)
		}
	}
	if got := c.t.stats.lost.Load(); got != 2 {
		t.Errorf("lost answers counted %d, want 2", got)
	}
	if got := c.t.stats.protocolErrors.Load(); got != 0 {
		t.Errorf("protocol errors %d, want 0 (an EOF is not one)", got)
	}
	if c.q.len() != 0 {
		t.Errorf("%d commands still pending", c.q.len())
	}

	// Without AnswerLost (the default) the same end delivers the two
	// answers and nothing else: the engine's timers re-send.
	c, _ = fuzzConn([]byte(in))
	c.t.cfg.AnswerLost = false
	if _, err := c.Write(fuzzRequests(t)); err != nil {
		t.Fatal(err)
	}
	if frames, err := readFrames(c); !errors.Is(err, io.EOF) || len(frames) != 2 || c.t.stats.lost.Load() != 0 {
		t.Errorf("AnswerLost off: %d frames, err %v, lost %d; want 2, EOF, 0", len(frames), err, c.t.stats.lost.Load())
	}
}
