package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
)

// KeyGen writes distinct UUID-shaped 36-byte keys into one buffer, without
// allocating: the generator's number and a counter as hex digits. One
// KeyGen serves one goroutine; the benchmarks of every store share it so
// their keys have the same shape and length.
type KeyGen struct {
	buf [36]byte
	n   uint64
}

var generators atomic.Uint64

// NewKeyGen returns a generator whose keys no other generator of this
// process produces.
func NewKeyGen() *KeyGen {
	g := &KeyGen{}
	copy(g.buf[:], "00000000-0000-4000-8000-000000000000")
	putHex(g.buf[0:8], generators.Add(1))
	return g
}

func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
}

// Next returns the next key (36 bytes); the slice is the generator's own
// buffer, valid until the following call.
func (g *KeyGen) Next() []byte {
	g.n++
	putHex(g.buf[24:36], g.n)
	return g.buf[:]
}

// BenchClaims is the sequential claim benchmark of a networked or on-disk
// store: one claim of a fresh key (ttl 10 s) per op, so the figure is one
// round trip or one INSERT; the interface call costs nothing beside it.
func BenchClaims(b *testing.B, s idem.Store) {
	ctx := context.Background()
	g := NewKeyGen()
	b.ReportAllocs()
	for b.Loop() {
		f, err := s.Claim(ctx, g.Next(), 10*time.Second)
		if err != nil || f == 0 {
			b.Fatal(f, err)
		}
	}
}

// BenchScopedClaims is BenchClaims with keys under 64 scopes
// (idem.ScopedKey), so a store that keeps per-scope quotas (SPEC I5 round
// 3) does that work on every claim. Building the scoped key is part of
// the op, as in idem.Middleware.
func BenchScopedClaims(b *testing.B, s idem.Store) {
	ctx := context.Background()
	g := NewKeyGen()
	scopes := make([]string, 64)
	for i := range scopes {
		scopes[i] = "account-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	buf := make([]byte, 0, idem.MaxKeyLen)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k, err := idem.ScopedKey(buf[:0], scopes[i%len(scopes)], string(g.Next()))
		if err != nil {
			b.Fatal(err)
		}
		f, err := s.Claim(ctx, k, 10*time.Second)
		if err != nil || f == 0 {
			b.Fatal(f, err)
		}
		i++
	}
}
