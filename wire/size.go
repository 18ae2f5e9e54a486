package wire

import (
	"strconv"
	"unicode"
)

// SizeError is the error every size check of this package returns: what
// was too large, its size and the limit, in bytes. errors.Is(err,
// ErrTooLarge) matches it. A Reader that meets a length prefix above its
// limit also keeps the prefix's four bytes: when they read as text the peer
// is most likely not speaking this protocol at all (an HTTP server, a Redis
// server, TLS), and the message says so — the usual cause when a client is
// pointed at the wrong address (SPEC R18, §6 F1).
type SizeError struct {
	// What names the thing measured: "frame", "stream frame", "table
	// name", "record".
	What string
	// Size is its size in bytes; Limit the most allowed.
	Size, Limit int
	// Prefix holds a stream frame's length prefix as it arrived, when
	// What is "stream frame"; zero otherwise.
	Prefix [StreamPrefixSize]byte
}

// Error says what was too large, by how much, and, for a stream prefix
// that reads as text, that the peer may not speak this protocol.
func (e *SizeError) Error() string {
	s := "wire: " + e.What + " of " + strconv.Itoa(e.Size) + " bytes is over the limit of " + strconv.Itoa(e.Limit)
	if e.What == streamFrame && textual(e.Prefix[:]) {
		s += "; its length prefix reads " + strconv.Quote(string(e.Prefix[:])) + ": the peer does not seem to speak this protocol (wrong address?)"
	}
	return s
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *SizeError) Is(target error) bool { return target == ErrTooLarge }

const streamFrame = "stream frame"

// tooLarge returns the SizeError for what of size bytes over limit.
func tooLarge(what string, size, limit int) error {
	return &SizeError{What: what, Size: size, Limit: limit}
}

// textual reports whether every byte of b is printable ASCII or common
// white space: a length prefix of this protocol is little-endian binary,
// and one that reads as text is another protocol's first bytes.
func textual(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || !(unicode.IsPrint(rune(c)) || c == '\r' || c == '\n' || c == '\t') {
			return false
		}
	}
	return true
}
