// Package fence makes the fences of idem's shared stores (redisstore,
// sqlstore): numbers that name one claim, unique among a store's claims and
// unrelated across processes, never 0 (0 means "not first" in idem.Store).
package fence

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"

	"github.com/readretry/readretry/idem"
)

// Source hands out fences. The zero Source is not random across
// processes; make one with New. It is safe for concurrent use.
type Source struct {
	base uint64
	n    atomic.Uint64
}

// New returns a Source with a random base.
func New() *Source {
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // crypto/rand never fails
	return &Source{base: binary.LittleEndian.Uint64(seed[:])}
}

// Next returns the next fence. An odd multiplier makes n → n·k a bijection
// on uint64, so no two calls of one Source collide; the random base makes
// another process's fences unrelated to these.
func (s *Source) Next() idem.Fence {
	for {
		if f := idem.Fence(s.base ^ s.n.Add(1)*0x9E3779B97F4A7C15); f != 0 {
			return f
		}
	}
}
