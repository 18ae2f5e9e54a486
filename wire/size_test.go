package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestSizeErrorNamesTheProblem: every size check says what was too large,
// its size and the limit, and still matches ErrTooLarge; a stream whose
// length prefix reads as text says the peer is not speaking this protocol
// (a client pointed at an HTTP or Redis port), and a binary one does not.
func TestSizeErrorNamesTheProblem(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream []byte
		max    int
		want   []string // substrings of the message
		absent string
	}{
		{"http server", []byte("HTTP/1.1 400 Bad Request\r\n"), 0,
			[]string{"stream frame of 1347703880 bytes", "limit of 16777216", `"HTTP"`, "does not seem to speak this protocol"}, ""},
		{"redis server", []byte("-ERR unknown command\r\n"), 0,
			[]string{`"-ERR"`, "does not seem to speak"}, ""},
		{"binary prefix over a small limit", []byte{0x00, 0x10, 0x00, 0x00, 1, 2, 3}, 1024,
			[]string{"stream frame of 4096 bytes", "limit of 1024"}, "does not seem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(c.stream), c.max).Next()
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			var se *SizeError
			wantLimit := c.max
			if wantLimit == 0 {
				wantLimit = MaxFrameSize
			}
			if !errors.As(err, &se) || se.Limit != wantLimit {
				t.Fatalf("errors.As: %T %+v", err, se)
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if c.absent != "" && strings.Contains(msg, c.absent) {
				t.Errorf("message %q has %q", msg, c.absent)
			}
		})
	}
	_, err := AppendStreamFrame(nil, make([]byte, MaxFrameSize+1))
	var se *SizeError
	if !errors.As(err, &se) || se.What != "frame" || se.Size != MaxFrameSize+1 || se.Limit != MaxFrameSize {
		t.Fatalf("AppendStreamFrame: %v", err)
	}
	h := RequestHeader{Command: CmdGet, Table: strings.Repeat("t", MaxTableName+1)}
	if _, err := AppendKeyRequest(nil, h, nil); !errors.As(err, &se) || se.What != "table name" || se.Size != MaxTableName+1 {
		t.Fatalf("long table name: %v", err)
	}
}
