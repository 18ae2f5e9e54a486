package timerwheel

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStagedCancelFromOtherGoroutines: timers staged by several senders
// are cancelled by another goroutine while the poller advances, the
// engine's pattern (Send schedules, the poller cancels when the answer
// comes): every timer fires or is cancelled, exactly once, and a Cancel
// that returns true always beats the fire.
func TestStagedCancelFromOtherGoroutines(t *testing.T) {
	const senders, perSender = 4, 3000
	for _, shards := range []int{1, 2} {
		w, err := New(Config{Tick: time.Millisecond, Start: t0, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		var clock atomic.Int64 // ms since t0
		var outcome [senders * perSender]atomic.Int32
		type pending struct {
			h  Handle
			id uint64
		}
		handles := make(chan pending, 1024)
		var send sync.WaitGroup
		for g := range senders {
			send.Add(1)
			go func() {
				defer send.Done()
				for k := range perSender {
					id := uint64(g*perSender + k)
					h, err := w.ScheduleOffset(time.Duration(clock.Load()+int64(k%20))*time.Millisecond, id)
					if err != nil {
						t.Error(err)
						return
					}
					if k%2 == 0 {
						handles <- pending{h, id}
					}
				}
			}()
		}
		cancelled := make(chan struct{})
		go func() {
			defer close(cancelled)
			for p := range handles {
				if w.Cancel(p.h) {
					outcome[p.id].Add(1)
				}
			}
		}()
		done := make(chan struct{})
		go func() { send.Wait(); close(handles); close(done) }()
		fire := func(id uint64) { outcome[id].Add(1) }
	poll:
		for {
			select {
			case <-done:
				break poll
			default:
				w.AdvanceOffset(time.Duration(clock.Add(1))*time.Millisecond, fire)
			}
		}
		<-cancelled
		w.AdvanceOffset(time.Duration(clock.Add(100))*time.Millisecond, fire)
		for i := range outcome {
			if o := outcome[i].Load(); o != 1 {
				t.Fatalf("shards %d: timer %d had %d outcomes", shards, i, o)
			}
		}
		if w.Len() != 0 {
			t.Fatalf("Len %d after every timer ended", w.Len())
		}
	}
}

// TestStagedStaleHandle: TestStaleHandle for staged timers, whose places
// a lane reuses at its next refill: a handle to a cancelled or fired timer
// stays stale, and handles no Schedule returned are refused.
func TestStagedStaleHandle(t *testing.T) {
	w := newWheel(t)
	h1 := mustSchedule(t, w, t0.Add(time.Millisecond), 1)
	if !w.Cancel(h1) || w.Cancel(h1) || w.Reset(h1, t0.Add(time.Hour)) {
		t.Fatal("Cancel twice: want true then false; Reset after: false")
	}
	// Churn through the lane so that h1's place is reused.
	var hs []Handle
	for i := range 300 {
		h := mustSchedule(t, w, t0.Add(time.Second), uint64(100+i))
		if h.index() == h1.index() && h == h1 {
			t.Fatal("a reused place gave the same Handle")
		}
		if !w.Cancel(h) {
			t.Fatal("Cancel of a staged timer = false")
		}
		hs = append(hs, h)
	}
	h2 := mustSchedule(t, w, t0.Add(2*time.Millisecond), 2)
	for _, h := range append(hs, h1) {
		if w.Cancel(h) || w.Reset(h, t0.Add(time.Hour)) {
			t.Fatalf("stale handle %#x acted", h)
		}
	}
	// Forged: the next generations of a staged and of an idle place, other
	// shards and places beyond the slab.
	for _, h := range []Handle{0, ^Handle(0), h2 + 1<<genShift, h2 + 2<<genShift, h1 + 5<<genShift,
		makeHandle(0, 0, 1<<20), makeHandle(0, 3, 0), Handle(uint64(h2) &^ handleBit)} {
		if w.Cancel(h) || w.Reset(h, t0) {
			t.Fatalf("forged handle %#x accepted", h)
		}
	}
	var ids []uint64
	w.Advance(t0.Add(2*time.Millisecond), collectIDs(&ids))
	if len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("fired %v, want [2]", ids)
	}
	if w.Cancel(h2) || w.Reset(h2, t0.Add(time.Hour)) || w.Len() != 0 {
		t.Fatal("Cancel/Reset of a fired timer = true, or timers left")
	}
}

// TestStagedReset: Reset of a timer that is still staged moves it, and a
// Cancel afterwards finds it on the wheel.
func TestStagedReset(t *testing.T) {
	w := newWheel(t)
	a := mustSchedule(t, w, t0.Add(5*time.Millisecond), 1)
	b := mustSchedule(t, w, t0.Add(5*time.Millisecond), 2)
	if !w.ResetOffset(a, 3*time.Millisecond) || !w.ResetOffset(b, 9*time.Millisecond) {
		t.Fatal("ResetAt of a staged timer = false")
	}
	var ids []uint64
	w.AdvanceOffset(5*time.Millisecond, collectIDs(&ids))
	if !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("fired %v by 5ms, want [1]", ids)
	}
	if !w.Cancel(b) || w.Len() != 0 {
		t.Fatal("Cancel after Reset = false, or timers left")
	}
}

// TestLanesAndGOMAXPROCS: a P without a lane (GOMAXPROCS raised after New)
// takes the locked path, and a lane whose P is no longer used keeps its
// staged timers firing: Advance drains every lane.
func TestLanesAndGOMAXPROCS(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	w := newWheel(t)
	if got := len(w.shards[0].lanes); got != 1 {
		t.Fatalf("%d lanes at GOMAXPROCS 1", got)
	}
	runtime.GOMAXPROCS(4)
	const n = 4000
	var fired [n]atomic.Int32
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				if _, err := w.ScheduleOffset(time.Duration(1+i%30)*time.Millisecond, uint64(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if w.Len() != n {
		t.Fatalf("Len %d, want %d", w.Len(), n)
	}
	w.AdvanceOffset(time.Second, func(id uint64) { fired[id].Add(1) })
	for i := range fired {
		if fired[i].Load() != 1 {
			t.Fatalf("timer %d fired %d times", i, fired[i].Load())
		}
	}
}

// TestShrink: after a burst the slab gives its top chunks back (SPEC R15:
// memory follows the timers pending), keeping one spare; a handle kept
// from a given-back chunk stays stale when the slab grows over the same
// indexes again.
func TestShrink(t *testing.T) {
	// One P, so one lane: the test moves it down with its churn below.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := newWheel(t)
	s := &w.shards[0]
	const n = 100_000
	var last Handle
	for i := range n {
		last = mustSchedule(t, w, t0.Add(time.Duration(1+i%100)*time.Millisecond), uint64(i))
	}
	if w.Len() != n || len(s.chunks) < 20 {
		t.Fatalf("Len %d, %d chunks after the burst", w.Len(), len(s.chunks))
	}
	if got := w.Advance(t0.Add(time.Second), nil); got != n {
		t.Fatalf("fired %d", got)
	}
	// A lane still owns the block it took last, at the top; at its
	// next refill it moves to the lowest free block, and the next
	// Advance gives back every chunk above one spare.
	for k := range 200 {
		h := mustSchedule(t, w, t0.Add(2*time.Second), uint64(k))
		if !w.Cancel(h) {
			t.Fatal("Cancel = false")
		}
	}
	if len(s.chunks) < 20 {
		t.Fatalf("shrank to %d chunks within shrinkDelay of growing", len(s.chunks))
	}
	w.Advance(t0.Add(time.Second+shrinkDelay*time.Millisecond), nil)
	if len(s.chunks) > 3 {
		t.Fatalf("%d chunks left after every timer fired", len(s.chunks))
	}
	for i := range n {
		mustSchedule(t, w, t0.Add(2*time.Second), uint64(i))
	}
	if w.Cancel(last) || w.Reset(last, t0.Add(time.Hour)) {
		t.Fatal("a handle from a given-back chunk acted on the chunk made in its place")
	}
	if got := w.Advance(t0.Add(3*time.Second+shrinkDelay*time.Millisecond), nil); got != n {
		t.Fatalf("second burst fired %d", got)
	}
}

// TestOffsetAPI: the Offset methods and the time.Time ones are one
// wheel: the same timers fire at the same times either way.
func TestOffsetAPI(t *testing.T) {
	w := newWheel(t)
	h := mustSchedule(t, w, t0.Add(10*time.Millisecond), 1)
	h2, err := w.ScheduleOffset(20*time.Millisecond+1, 2) // rounds up to 21 ms
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := w.NextDeadlineOffset(); !ok || d != 10*time.Millisecond {
		t.Fatalf("NextDeadlineOffset = %v, %v", d, ok)
	}
	if !w.ResetOffset(h, 15*time.Millisecond) || !w.Reset(h2, t0.Add(12*time.Millisecond)) {
		t.Fatal("reset")
	}
	if at, ok := w.NextDeadline(); !ok || !at.Equal(t0.Add(12*time.Millisecond)) {
		t.Fatalf("NextDeadline = %v, %v", at, ok)
	}
	var ids []uint64
	if n := w.AdvanceOffset(12*time.Millisecond, collectIDs(&ids)); n != 1 || ids[0] != 2 {
		t.Fatalf("AdvanceOffset(12ms) fired %v", ids)
	}
	if n := w.Advance(t0.Add(15*time.Millisecond), collectIDs(&ids)); n != 1 || ids[1] != 1 {
		t.Fatalf("Advance(15ms) fired %v", ids)
	}
	if _, err := w.ScheduleOffset(math.MaxInt64, 3); err != nil {
		t.Fatalf("ScheduleOffset(MaxInt64): %v", err)
	}
	if d, ok := w.NextDeadlineOffset(); !ok || d <= 15*time.Millisecond {
		t.Fatalf("NextDeadlineOffset for a far timer = %v, %v", d, ok)
	}
}

// TestDivTick: the multiply-and-correct division equals / and %.
func TestDivTick(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ticks := []int64{1, 2, 3, 7, 1000, int64(time.Millisecond), 3 * int64(time.Millisecond), int64(time.Hour), 1 << 40, math.MaxInt64 / 3, math.MaxInt64}
	for _, tick := range ticks {
		w, err := New(Config{Tick: time.Duration(tick), Start: t0})
		if err != nil {
			t.Fatal(err)
		}
		ds := []int64{0, 1, tick - 1, tick, tick + 1, 2*tick - 1, math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 - tick}
		for range 10_000 {
			ds = append(ds, r.Int64N(math.MaxInt64), r.Int64N(1<<40), r.Int64N(min(tick, math.MaxInt64/1001)*1000+1))
		}
		for _, d := range ds {
			if d < 0 {
				continue
			}
			q, rem := w.divTick(d)
			if q != d/tick || rem != d%tick {
				t.Fatalf("tick %d: divTick(%d) = %d, %d; want %d, %d", tick, d, q, rem, d/tick, d%tick)
			}
		}
	}
}

// TestChunkLayout: chunkPos finds every timer where the block
// descriptors say it is, across chunk 0 and the 4096-timer chunks.
func TestChunkLayout(t *testing.T) {
	w := newWheel(t)
	for i := range 3 * chunkTimers {
		if _, err := w.ScheduleOffset(time.Second, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	s := &w.shards[0]
	if len(s.chunks) < 3 {
		t.Fatalf("%d chunks", len(s.chunks))
	}
	for i := uint32(0); i < uint32(len(s.blocks))*blockSize; i++ {
		c, o := chunkPos(i)
		b := s.blocks[i>>blockShift]
		if &s.chunks[c].nodes[o] != &b.nodes[i&blockMask] || &s.chunks[c].links[o] != &b.links[i&blockMask] || b.base != i&^blockMask {
			t.Fatalf("timer %d: chunk %d offset %d disagrees with its block", i, c, o)
		}
	}
}

// TestFreeSetGrowShrink: the free set keeps lowest-first order while it
// grows and shrinks with the slab, and takeWord hands out whole blocks.
func TestFreeSetGrowShrink(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var f freeSet
	f.init(0)
	free := map[uint32]bool{}
	size := uint32(0)
	lowest := func() (uint32, bool) {
		best, ok := uint32(math.MaxUint32), false
		for i := range free {
			if i < best {
				best, ok = i, true
			}
		}
		return best, ok
	}
	for range 20_000 {
		switch op := r.IntN(10); {
		case op == 0 && size < 1<<20: // grow
			size += uint32(1+r.IntN(64)) * 64
			f.grow(size)
		case op == 1 && size > 0: // shrink: drop the top blocks, as dropTop does
			n := size - uint32(r.IntN(int(size/64)+1))*64
			for w := n / 64; w < size/64; w++ {
				f.clearWord(w)
			}
			for i := range free {
				if i >= n {
					delete(free, i)
				}
			}
			size = n
			f.shrink(size)
		case op < 6 && size > 0:
			if i := r.Uint32N(size); !free[i] {
				free[i] = true
				f.add(i)
			}
		case op < 9:
			got, ok := f.take()
			want, wantOK := lowest()
			if ok != wantOK || ok && got != want {
				t.Fatalf("size %d: take = %d, %v; want %d, %v", size, got, ok, want, wantOK)
			}
			delete(free, got)
		default:
			w, m, ok := f.takeWord()
			want, wantOK := lowest()
			if ok != wantOK || ok && w != want/64 {
				t.Fatalf("size %d: takeWord = %d, %v; want block of %d, %v", size, w, ok, want, wantOK)
			}
			for k := range uint32(64) {
				if free[w*64+k] != (m&(1<<k) != 0) {
					t.Fatalf("takeWord(%d) bits %x disagree at %d", w, m, k)
				}
				delete(free, w*64+k)
			}
		}
	}
}

// TestAllocIdleWheel: an idle wheel, never used or used and then left,
// costs the heap the package comment says (SPEC R15: an idle zone is
// cheap). Measured over 1,000 wheels.
func TestAllocIdleWheel(t *testing.T) {
	if raceEnabled {
		t.Skip("heap figures under the race detector are not the product's")
	}
	// One P, so one lane per wheel: the churn in idleBytes moves it down.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	fresh, burst := idleBytes(t, false), idleBytes(t, true)
	t.Logf("idle wheel: %.0f bytes fresh, %.0f after a burst of 10,000 timers", fresh, burst)
	if fresh > 2048 {
		t.Fatalf("a fresh idle wheel takes %.0f bytes, want at most 2 KiB", fresh)
	}
	if burst > 8192 {
		t.Fatalf("an idle wheel after a burst takes %.0f bytes, want at most 8 KiB", burst)
	}
}

// idleBytes returns the heap per wheel of 1,000 idle wheels (default
// config, as the engine makes them), after a burst of 10,000 timers that
// all fired if burst.
func idleBytes(t testing.TB, burst bool) float64 {
	const n = 1000
	ws := make([]*Wheel, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range ws {
		w, err := New(Config{Tick: DefaultTick, Start: t0})
		if err != nil {
			t.Fatal(err)
		}
		if burst {
			for k := range 10_000 {
				if _, err := w.ScheduleOffset(time.Duration(1+k%50)*time.Millisecond, uint64(k)); err != nil {
					t.Fatal(err)
				}
			}
			w.AdvanceOffset(time.Second, nil)
			// The lanes move back to the bottom of the slab at their next
			// refill, at most 64 Schedules away; then the top chunks go.
			for k := range 200 {
				h, err := w.ScheduleOffset(2*time.Second, uint64(k))
				if err != nil || !w.Cancel(h) {
					t.Fatal(err)
				}
			}
			w.AdvanceOffset(2*time.Second+shrinkDelay*DefaultTick, nil)
		}
		ws[i] = w
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ws)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
}
