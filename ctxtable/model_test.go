package ctxtable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// testMeta is a small pointer-free context.
type testMeta struct {
	Seq     uint64
	Retries uint32
	Tried   [9]uint16
	Next    uint64
}

// modelCtx is what the table should hold for one sequence number.
type modelCtx struct {
	meta    testMeta
	frame   []byte
	user    []byte
	scratch []byte
}

// payloadFor builds n deterministic bytes for (seq, salt).
func payloadFor(seq uint64, salt byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq*31) ^ byte(i*7) ^ salt
	}
	return b
}

// checkCtx compares a Ref with the model.
func checkCtx(t *testing.T, seq uint64, r Ref[testMeta], want modelCtx) {
	t.Helper()
	if r.Seq() != seq {
		t.Fatalf("seq %d: Ref.Seq() = %d", seq, r.Seq())
	}
	if *r.Meta() != want.meta {
		t.Fatalf("seq %d: meta %+v, want %+v", seq, *r.Meta(), want.meta)
	}
	if !bytes.Equal(r.Frame(), want.frame) || !bytes.Equal(r.UserBuf(), want.user) || !bytes.Equal(r.Scratch(), want.scratch) {
		t.Fatalf("seq %d: payload differs: frame %d/%d user %d/%d scratch %d/%d bytes",
			seq, len(r.Frame()), len(want.frame), len(r.UserBuf()), len(want.user), len(r.Scratch()), len(want.scratch))
	}
	if cap(r.Frame()) != len(want.frame) || cap(r.UserBuf()) != len(want.user) || cap(r.Scratch()) != len(want.scratch) {
		t.Fatalf("seq %d: views must be capped at their length", seq)
	}
}

// keyGen yields the sequence numbers of one model run.
type keyGen struct {
	kind string
	rng  *rand.Rand
	next uint64
	live func() (uint64, bool) // a random live key, if any
}

func (g *keyGen) key() uint64 {
	switch g.kind {
	case "counter":
		// Mostly fresh numbers, sometimes a live one (duplicate insert) or
		// one never used (miss).
		switch g.rng.IntN(10) {
		case 0:
			if k, ok := g.live(); ok {
				return k
			}
		case 1:
			return g.next + 1<<40
		}
		g.next++
		return g.next
	case "small":
		return g.rng.Uint64N(2048)
	case "strided":
		// Multiples of 4096 from two interleaved counters: piles up under
		// identity placement, so shards must spread.
		g.next++
		return (g.next&1)<<44 | (g.next>>1)<<12
	default: // random 64-bit keys
		if g.rng.IntN(4) == 0 {
			if k, ok := g.live(); ok {
				return k
			}
		}
		return g.rng.Uint64()
	}
}

// TestModel runs random operation sequences against the table and a plain
// map side by side (SPEC R12: a context is found under its own sequence
// number only, with its own payload, until deleted).
func TestModel(t *testing.T) {
	seeds := 32
	ops := 6000
	if raceEnabled {
		seeds, ops = 8, 3000
	}
	kinds := []string{"counter", "small", "strided", "random"}
	for seed := range seeds {
		kind := kinds[seed%len(kinds)]
		shards := []int{1, 2, 8, 64}[seed/len(kinds)%4]
		name := fmt.Sprintf("seed=%d/%s/shards=%d", seed, kind, shards)
		t.Run(name, func(t *testing.T) {
			runModel(t, uint64(seed), kind, shards, ops)
		})
	}
}

func runModel(t *testing.T, seed uint64, kind string, shards int, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0x9e37))
	tab, err := New[testMeta](Config{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	model := map[uint64]modelCtx{}
	var keys []uint64 // live keys, for picking
	pos := map[uint64]int{}
	addKey := func(k uint64) { pos[k] = len(keys); keys = append(keys, k) }
	dropKey := func(k uint64) {
		i := pos[k]
		last := keys[len(keys)-1]
		keys[i], pos[last] = last, i
		keys = keys[:len(keys)-1]
		delete(pos, k)
	}
	gen := &keyGen{kind: kind, rng: rng, live: func() (uint64, bool) {
		if len(keys) == 0 {
			return 0, false
		}
		return keys[rng.IntN(len(keys))], true
	}}
	pickKey := func() uint64 {
		if len(keys) > 0 && rng.IntN(4) != 0 {
			return keys[rng.IntN(len(keys))]
		}
		return gen.key()
	}
	for op := range ops {
		switch r := rng.IntN(100); {
		case r < 40: // insert
			k := gen.key()
			fl, ul, sl := rng.IntN(300), rng.IntN(64), rng.IntN(40)
			switch rng.IntN(50) {
			case 0:
				fl = 8000 + rng.IntN(4000) // beyond the largest class
			case 1:
				fl, ul, sl = 0, 0, 0
			}
			want := modelCtx{
				meta:    testMeta{Seq: k, Tried: [9]uint16{uint16(op)}},
				frame:   payloadFor(k, 1, fl),
				user:    payloadFor(k, 2, ul),
				scratch: make([]byte, sl),
			}
			ref, err := tab.Insert(k, want.meta, want.frame, want.user, sl)
			_, exists := model[k]
			switch {
			case exists:
				if !errors.Is(err, ErrExists) {
					t.Fatalf("op %d: Insert of live %d: err %v, want ErrExists", op, k, err)
				}
			default:
				if err != nil {
					t.Fatalf("op %d: Insert %d: %v", op, k, err)
				}
				// The caller's buffers are copied: scribbling on them
				// afterwards must not show through.
				orig := want.frame
				want.frame = bytes.Clone(orig)
				for i := range orig {
					orig[i] ^= 0xaa
				}
				checkCtx(t, k, ref, want)
				model[k] = want
				addKey(k)
			}
		case r < 65: // lookup
			k := pickKey()
			ref, ok := tab.Lookup(k)
			want, exists := model[k]
			if ok != exists {
				t.Fatalf("op %d: Lookup(%d) found=%v, model %v", op, k, ok, exists)
			}
			if ok {
				checkCtx(t, k, ref, want)
			}
		case r < 80: // update in place
			if len(keys) == 0 {
				continue
			}
			k := keys[rng.IntN(len(keys))]
			ref, ok := tab.Lookup(k)
			if !ok {
				t.Fatalf("op %d: live %d not found", op, k)
			}
			want := model[k]
			m := ref.Meta()
			m.Retries++
			m.Next = uint64(op)
			m.Tried[m.Retries%9] = uint16(op)
			want.meta = *m
			if sc := ref.Scratch(); len(sc) > 0 {
				i := rng.IntN(len(sc))
				sc[i] |= 1 << (op % 8)
				want.scratch = append([]byte(nil), sc...)
			}
			if f := ref.Frame(); len(f) > 0 {
				f[0] ^= 0xff // the engine may patch its frame in place
				want.frame = append([]byte(nil), f...)
			}
			model[k] = want
		case r < 99: // delete
			k := pickKey()
			ok := tab.Delete(k)
			if _, exists := model[k]; ok != exists {
				t.Fatalf("op %d: Delete(%d) = %v, model %v", op, k, ok, exists)
			}
			if ok {
				delete(model, k)
				dropKey(k)
			}
			if _, ok := tab.Lookup(k); ok {
				t.Fatalf("op %d: %d found after Delete", op, k)
			}
		default: // full comparison
			compareAll(t, tab, model)
		}
		if tab.Len() != len(model) {
			t.Fatalf("op %d: Len %d, model %d", op, tab.Len(), len(model))
		}
	}
	compareAll(t, tab, model)
	for _, k := range keys {
		if !tab.Delete(k) {
			t.Fatalf("final Delete(%d) missed", k)
		}
	}
	st := tab.Stats()
	if st.Len != 0 || tab.Len() != 0 || st.PayloadBlocks != 0 || st.LargeInUse != 0 || st.PayloadAllocs != st.PayloadFrees {
		t.Fatalf("after deleting everything: %+v", st)
	}
}

// compareAll checks Range and Stats against the model.
func compareAll(t *testing.T, tab *Table[testMeta], model map[uint64]modelCtx) {
	t.Helper()
	seen := map[uint64]bool{}
	tab.Range(func(seq uint64, r Ref[testMeta]) bool {
		if seen[seq] {
			t.Fatalf("Range visited %d twice", seq)
		}
		seen[seq] = true
		want, ok := model[seq]
		if !ok {
			t.Fatalf("Range visited %d, not in model", seq)
		}
		checkCtx(t, seq, r, want)
		return true
	})
	if len(seen) != len(model) {
		t.Fatalf("Range visited %d contexts, model has %d", len(seen), len(model))
	}
	st := tab.Stats()
	if st.Len != len(model) {
		t.Fatalf("Stats.Len %d, model %d", st.Len, len(model))
	}
	large := 0
	for _, c := range model {
		if int(hdrSize)+int(metaBytes[testMeta]())+len(c.frame)+len(c.user)+len(c.scratch) > maxClassSize {
			large++
		}
	}
	if st.LargeInUse != large {
		t.Fatalf("Stats.LargeInUse %d, want %d", st.LargeInUse, large)
	}
}
