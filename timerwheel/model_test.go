package timerwheel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// farBits is 2^36 ticks, the reach of the sixth level (795 days at 1 ms):
// the tests' "far" deadlines and jumps go past it.
const farBits = 6 * slotBits

// model is the simple reference the property and fuzz tests check a wheel
// against: a map of live timers with their deadlines in ticks.
type model struct {
	w     *Wheel
	limit int // the wheel's limit (timers), 0: none below MaxCapacity
	slack int // timers lanes may hold claimed: ErrFull may come this much early
	start time.Time
	tick  time.Duration
	now   time.Time // the simulated clock; it may step back
	peak  time.Time // the latest time given to Advance
	cur   int64     // model of the wheel's processed tick: max tick passed to Advance
	next  uint64    // next id
	live  map[uint64]*mtimer
	hs    []Handle // every handle ever returned, live or stale
	ids   []uint64 // id of hs[i]
	fired int
}

type mtimer struct {
	h        Handle
	tick     int64 // deadline in ticks, rounded up
	deadline time.Time
	eff      int64 // tick it must fire in: max(tick, cur when scheduled)
}

// newModel returns a model of a wheel whose shards hold perShard timers
// each (see limited; 0: MaxCapacity).
func newModel(t testing.TB, tick time.Duration, perShard, shards int) *model {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w := limited(t, Config{Tick: tick, Start: start, Shards: shards}, perShard)
	return &model{w: w, limit: perShard * shards, slack: laneSlack(w), start: start, tick: tick, now: start, peak: start, live: map[uint64]*mtimer{}, next: 1}
}

func (m *model) ticks(d time.Time) int64 {
	x := d.Sub(m.start)
	if x <= 0 {
		return 0
	}
	q := int64(x / m.tick)
	if x%m.tick != 0 {
		q++
	}
	return q
}

func (m *model) schedule(t testing.TB, deadline time.Time) {
	id := m.next
	h, err := m.w.Schedule(deadline, id)
	if m.limit > 0 && len(m.live) >= m.limit && err != ErrFull {
		t.Fatalf("schedule at the limit %d: err %v, want ErrFull", len(m.live), err)
	}
	if err == ErrFull {
		if m.limit == 0 || len(m.live) < m.limit-m.slack {
			t.Fatalf("ErrFull with %d pending (limit %d, lanes' slack %d)", len(m.live), m.limit, m.slack)
		}
		return
	}
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	if h == 0 {
		t.Fatal("schedule returned the zero Handle")
	}
	m.next++
	tk := m.ticks(deadline)
	m.live[id] = &mtimer{h: h, tick: tk, deadline: deadline, eff: max(tk, m.cur)}
	m.hs = append(m.hs, h)
	m.ids = append(m.ids, id)
}

// pick returns a random handle ever issued (live or stale) and its id.
func (m *model) pick(r *rand.Rand) (Handle, uint64, bool) {
	if len(m.hs) == 0 {
		return 0, 0, false
	}
	k := r.IntN(len(m.hs))
	if r.IntN(2) == 0 && len(m.hs) > 32 {
		k = len(m.hs) - 1 - r.IntN(32) // recent handles, mostly still live
	}
	return m.hs[k], m.ids[k], true
}

func (m *model) cancel(t testing.TB, h Handle, id uint64) {
	tm, ok := m.live[id]
	want := ok && tm.h == h
	if got := m.w.Cancel(h); got != want {
		t.Fatalf("Cancel(%#x) id %d = %v, want %v", h, id, got, want)
	}
	if want {
		delete(m.live, id)
	}
}

func (m *model) reset(t testing.TB, h Handle, id uint64, deadline time.Time) {
	tm, ok := m.live[id]
	want := ok && tm.h == h
	if got := m.w.Reset(h, deadline); got != want {
		t.Fatalf("Reset(%#x) id %d = %v, want %v", h, id, got, want)
	}
	if want {
		tm.tick = m.ticks(deadline)
		tm.deadline = deadline
		tm.eff = max(tm.tick, m.cur)
	}
}

// advance moves the clock by d and checks one Advance against the model:
// every live timer due fires exactly once, none early, in deadline order.
func (m *model) advance(t testing.TB, d time.Duration) {
	m.now = m.now.Add(d)
	if m.now.After(m.peak) {
		m.peak = m.now
	}
	nowTick := int64(0)
	if x := m.now.Sub(m.start); x > 0 {
		nowTick = int64(x / m.tick)
	}
	cur := max(m.cur, nowTick)
	last := int64(-1)
	before := m.fired
	n := m.w.Advance(m.now, func(id uint64) {
		tm, ok := m.live[id]
		if !ok {
			t.Fatalf("fired id %d which is not pending (fired twice or cancelled)", id)
		}
		if tm.deadline.After(m.peak) {
			t.Fatalf("id %d fired early: deadline %v, latest time %v", id, tm.deadline.Sub(m.start), m.peak.Sub(m.start))
		}
		if tm.eff > cur {
			t.Fatalf("id %d fired in tick %d, before its tick %d", id, cur, tm.eff)
		}
		if tm.eff < last {
			t.Fatalf("id %d (tick %d) fired after a timer of tick %d", id, tm.eff, last)
		}
		last = tm.eff
		delete(m.live, id)
		m.fired++
	})
	if n != m.fired-before {
		t.Fatalf("Advance returned %d, fired %d", n, m.fired-before)
	}
	m.cur = cur
	for id, tm := range m.live {
		if tm.eff <= cur {
			t.Fatalf("id %d due in tick %d still pending after Advance to tick %d", id, tm.eff, cur)
		}
	}
	if got := m.w.Len(); got != len(m.live) {
		t.Fatalf("Len = %d, model has %d", got, len(m.live))
	}
	m.checkNext(t)
}

func (m *model) checkNext(t testing.TB) {
	at, ok := m.w.NextDeadline()
	if ok != (len(m.live) > 0) {
		t.Fatalf("NextDeadline ok = %v with %d pending", ok, len(m.live))
	}
	if !ok {
		return
	}
	earliest := int64(noTick)
	for _, tm := range m.live {
		earliest = min(earliest, tm.eff)
	}
	got := m.ticks(at)
	if got > earliest {
		t.Fatalf("NextDeadline tick %d is after the earliest pending tick %d", got, earliest)
	}
	if got < m.cur {
		t.Fatalf("NextDeadline tick %d is before the processed tick %d", got, m.cur)
	}
}

// offset draws a deadline distance that hits the interesting places: past,
// now, next tick, around every level boundary, beyond the top level.
func offset(r *rand.Rand, tick time.Duration) time.Duration {
	switch r.IntN(8) {
	case 0:
		return -time.Duration(r.IntN(100)) * tick
	case 1:
		return time.Duration(r.IntN(3)) * tick
	case 2:
		// Level boundaries up to 2^60 ns: the upper levels with a 1 ns
		// tick, and no overflow of time.Duration with a longer one.
		level := r.IntN(levels)
		for level > 0 && int64(1)<<(level*slotBits) > int64(1<<60)/int64(tick) {
			level--
		}
		return time.Duration(int64(1)<<(level*slotBits)+int64(r.IntN(3))-1) * tick
	case 3:
		return time.Duration(r.Int64N(1<<(farBits+2))) * tick
	case 4:
		return time.Duration(r.Int64N(int64(tick) * 5000))
	default:
		return time.Duration(r.IntN(300)) * tick
	}
}

func step(r *rand.Rand, tick time.Duration) time.Duration {
	switch r.IntN(7) {
	case 0:
		return 0
	case 6:
		// The caller's clock steps back (a wall clock, or two pollers'
		// readings out of order): nothing may fire early or get lost.
		if r.IntN(2) == 0 {
			return -time.Duration(r.IntN(3)) * tick
		}
		return -time.Duration(r.Int64N(1<<(farBits+1))) * tick
	case 1:
		return tick
	case 2:
		// A far jump, so timers on the upper levels come due; rarer and bounded so the
		// simulated clock stays well inside time.Duration's 292 years.
		if r.IntN(4) == 0 {
			return time.Duration(r.Int64N(1<<(farBits+1))) * tick
		}
		return time.Duration(r.IntN(1<<(2*slotBits+1))) * tick
	case 3:
		return time.Duration(r.Int64N(int64(tick) * 70))
	default:
		return time.Duration(r.IntN(5000)) * tick
	}
}

// run plays n random operations.
func (m *model) run(t testing.TB, r *rand.Rand, n int) {
	for range n {
		switch op := r.IntN(10); {
		case op < 4:
			m.schedule(t, m.now.Add(offset(r, m.tick)))
		case op < 6:
			if h, id, ok := m.pick(r); ok {
				m.cancel(t, h, id)
			}
		case op < 7:
			if h, id, ok := m.pick(r); ok {
				m.reset(t, h, id, m.now.Add(offset(r, m.tick)))
			}
		default:
			if m.now.Sub(m.start) > 150*365*24*time.Hour {
				m.advance(t, m.tick)
				continue
			}
			m.advance(t, step(r, m.tick))
		}
	}
	m.drain(t)
}

// drain fires everything left: an Advance to the earliest pending tick,
// then one to the latest.
func (m *model) drain(t testing.TB) {
	for len(m.live) > 0 {
		first, last := int64(noTick), int64(0)
		for _, tm := range m.live {
			first, last = min(first, tm.eff), max(last, tm.eff)
		}
		for _, tick := range []int64{first, last} {
			if d := m.start.Add(time.Duration(tick) * m.tick).Sub(m.now); d > 0 {
				m.advance(t, d)
			} else {
				m.advance(t, 0)
			}
		}
	}
}

// TestProperty: random deadlines, cancels, resets and jumps against the
// model: every live timer fires exactly once, never early, at most one tick
// late, in deadline order across one Advance (SPEC R6, R10, R14).
func TestProperty(t *testing.T) {
	for _, shards := range []int{1, 4} {
		for _, tick := range []time.Duration{time.Millisecond, time.Nanosecond, 3 * time.Millisecond} {
			for _, limit := range []int{320, 64, 0} { // per shard; 64: often full, and shards spill
				for seed := range uint64(3) {
					t.Run(fmt.Sprintf("shards%d/tick%v/limit%d/seed%d", shards, tick, limit, seed), func(t *testing.T) {
						r := rand.New(rand.NewPCG(seed, uint64(shards)))
						m := newModel(t, tick, limit, shards)
						m.run(t, r, propertyOps)
						if m.fired == 0 {
							t.Fatal("nothing fired")
						}
					})
				}
			}
		}
	}
}

// FuzzWheel drives the wheel with operations decoded from the input and
// checks every step against the model.
func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0, 0, 0, 9, 9, 9, 1, 1, 9})
	f.Add([]byte("\x00\xff\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0"))
	f.Add(slices.Repeat([]byte{0, 7, 9}, 40))
	f.Fuzz(runFuzzBody)
}

// runFuzzBody plays the operations encoded in data against the model.
func runFuzzBody(t *testing.T, data []byte) {
	if len(data) > 4096 {
		return
	}
	var seed uint64
	for i, b := range data {
		seed ^= uint64(b) << (8 * (i % 8))
	}
	shards := 1 << (seed % 3)
	limit := 64
	if seed&8 != 0 {
		limit = 0 // MaxCapacity
	}
	m := newModel(t, time.Millisecond, limit, shards)
	r := rand.New(rand.NewPCG(seed, uint64(len(data))))
	for _, b := range data {
		switch b % 10 {
		case 0, 1, 2, 3:
			m.schedule(t, m.now.Add(offset(r, m.tick)))
		case 4, 5:
			if h, id, ok := m.pick(r); ok {
				m.cancel(t, h, id)
			}
		case 6:
			if h, id, ok := m.pick(r); ok {
				m.reset(t, h, id, m.now.Add(offset(r, m.tick)))
			}
		default:
			if m.now.Sub(m.start) > 150*365*24*time.Hour {
				m.advance(t, m.tick)
				continue
			}
			m.advance(t, step(r, m.tick))
		}
	}
	m.drain(t)
}
