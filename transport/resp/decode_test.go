package resp

import (
	"errors"
	"strings"
	"testing"
)

// The decoder's verdicts, from the RESP2 specification: each step one
// input, the shape the pending command allows, and what must come out.
func TestDecode(t *testing.T) {
	get := shape{}
	mget2 := shape{array: true, n: 2, exact: true, nilElems: true}
	lrange3 := shape{array: true, n: 3}
	big := strings.Repeat("x", 100)
	steps := []struct {
		in      string
		sh      shape
		kind    replyKind
		size    int    // bytes consumed when complete
		val     string // bulk value or error text
		isNil   bool
		elems   []string // "<nil>" for a nil element
		err     error    // errIncomplete, ErrProtocol, ErrReplyTooLarge, ErrMismatch
		maxSize int      // decoder.max; 0 = 64
	}{
		{in: "$3\r\nabc\r\n", sh: get, kind: kindBulk, size: 9, val: "abc"},
		{in: "$0\r\n\r\n", sh: get, kind: kindBulk, size: 6, val: ""},
		{in: "$-1\r\n", sh: get, kind: kindBulk, size: 5, isNil: true},
		{in: "$3\r\nabc\r\n$1\r\n", sh: get, kind: kindBulk, size: 9, val: "abc"}, // the next reply stays
		{in: "-LOADING Redis is loading\r\n", sh: mget2, kind: kindError, size: 27, val: "LOADING Redis is loading"},
		{in: "*2\r\n$1\r\na\r\n$-1\r\n", sh: mget2, kind: kindArray, size: 16, elems: []string{"a", "<nil>"}},
		{in: "*0\r\n", sh: lrange3, kind: kindArray, size: 4},
		{in: "*2\r\n$1\r\na\r\n$2\r\nbc\r\n", sh: lrange3, kind: kindArray, size: 19, elems: []string{"a", "bc"}},
		// Incomplete: the buffer ends inside the reply.
		{in: "", sh: get, err: errIncomplete},
		{in: "$3\r\nab", sh: get, err: errIncomplete},
		{in: "$3\r\nabc\r", sh: get, err: errIncomplete},
		{in: "$3", sh: get, err: errIncomplete},
		{in: "*2\r\n$1\r\na\r\n", sh: mget2, err: errIncomplete},
		{in: "-ERR", sh: get, err: errIncomplete},
		// Garbage.
		{in: "hello\r\n", sh: get, err: ErrProtocol},
		{in: "$3\nabc\r\n", sh: get, err: ErrProtocol},      // bare LF
		{in: "$3\r\nabcd\r\n", sh: get, err: ErrProtocol},   // bulk not followed by CRLF
		{in: "$x\r\n", sh: get, err: ErrProtocol},           // not a number
		{in: "$\r\n", sh: get, err: ErrProtocol},            // empty length
		{in: "$-2\r\n", sh: get, err: ErrProtocol},          // below -1
		{in: "$99999999999\r\n", sh: get, err: ErrProtocol}, // 11 digits
		{in: "\r\n", sh: get, err: ErrProtocol},
		{in: "_\r\n", sh: get, err: ErrProtocol}, // RESP3 null: never negotiated
		{in: "*1\r\nx\r\n", sh: lrange3, err: ErrProtocol},
		{in: "-" + strings.Repeat("e", maxLine+10), sh: get, err: ErrProtocol, maxSize: 1 << 20},
		// Oversized: rejected on the length, before the body arrives.
		{in: "$65\r\n", sh: get, err: ErrReplyTooLarge},
		{in: "$60\r\n", sh: get, err: ErrReplyTooLarge}, // 5 + 60 + 2 > 64
		{in: "$100\r\n" + big, sh: get, err: ErrReplyTooLarge},
		{in: "*2\r\n$1\r\na\r\n$60\r\n", sh: mget2, err: ErrReplyTooLarge},
		{in: "-" + big, sh: get, err: ErrReplyTooLarge}, // a line with no end beyond the limit
		// Replies that do not fit the command.
		{in: "*1\r\n$1\r\na\r\n", sh: get, err: ErrMismatch},
		{in: "$1\r\na\r\n", sh: mget2, err: ErrMismatch},
		{in: "*3\r\n", sh: mget2, err: ErrMismatch},   // MGET: another count
		{in: "*1\r\n", sh: mget2, err: ErrMismatch},   // MGET: another count
		{in: "*4\r\n", sh: lrange3, err: ErrMismatch}, // LRANGE: more than asked
		{in: "*-1\r\n", sh: lrange3, err: ErrMismatch},
		{in: "*1\r\n$-1\r\n", sh: lrange3, err: ErrMismatch}, // nil element in a list
		{in: "*1\r\n:1\r\n", sh: lrange3, err: ErrMismatch},
		{in: "*1\r\n*0\r\n", sh: lrange3, err: ErrMismatch},
		{in: "+OK\r\n", sh: get, err: ErrMismatch},
		{in: ":1\r\n", sh: get, err: ErrMismatch},
	}
	for n, s := range steps {
		d := decoder{max: 64}
		if s.maxSize != 0 {
			d.max = s.maxSize
		}
		r, _, err := d.decode([]byte(s.in), s.sh)
		if !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
			t.Errorf("step %d (%q): err %v, want %v", n, s.in, err, s.err)
			continue
		}
		if err != nil {
			continue
		}
		b := []byte(s.in)
		if r.kind != s.kind || r.size != s.size {
			t.Errorf("step %d (%q): kind %d size %d, want %d %d", n, s.in, r.kind, r.size, s.kind, s.size)
		}
		if r.kind != kindArray {
			if r.val.nil != s.isNil || !r.val.nil && string(b[r.val.off:r.val.end]) != s.val {
				t.Errorf("step %d (%q): value %q nil=%v, want %q nil=%v", n, s.in, b[r.val.off:r.val.end], r.val.nil, s.val, s.isNil)
			}
			continue
		}
		var got []string
		for _, e := range d.elems {
			if e.nil {
				got = append(got, "<nil>")
			} else {
				got = append(got, string(b[e.off:e.end]))
			}
		}
		if strings.Join(got, "|") != strings.Join(s.elems, "|") {
			t.Errorf("step %d (%q): elements %q, want %q", n, s.in, got, s.elems)
		}
	}
}

// The error words that become the listed code, and the near misses that
// do not (SPEC R8, R23).
func TestErrorCode(t *testing.T) {
	tr := &Transport{cfg: Config{RetryCode: -7953}}
	steps := []struct {
		msg  string
		want int32
	}{
		{"LOADING Redis is loading the dataset in memory", -7953},
		{"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.", -7953},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", -7953},
		{"TRYAGAIN Multiple keys request during rehashing of slot", -7953},
		{"LOADING", -7953},
		{"BUSYKEY Target key name already exists.", ResultReplicaError},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", ResultReplicaError},
		{"ERR unknown command", ResultReplicaError},
		{"loading lower case", ResultReplicaError},
		{"", ResultReplicaError},
	}
	for n, s := range steps {
		if got := tr.errorCode([]byte(s.msg)); got != s.want {
			t.Errorf("step %d (%q): got %d, want %d", n, s.msg, got, s.want)
		}
	}
	if got := tr.stats.transient.Load(); got != 5 {
		t.Errorf("transient count: got %d, want 5", got)
	}
}
