//go:build !race

package timerwheel

// A lane's owner fields are read and written by whichever goroutine is
// pinned to the lane's P: one at a time, in the order the runtime runs
// them on that P, the same guarantee sync.Pool's per-P caches rely on. The
// Go race detector cannot see that order, so under -race the fields are
// atomics (owned_race.go), which gives it the happens-before edges; in a
// normal build they are plain words, since an atomic store is a locked
// instruction on amd64 and would cost the Schedule path what staging saves.

// ownedWord is a lane owner's uint64.
type ownedWord struct{ v uint64 }

func (o *ownedWord) load() uint64   { return o.v }
func (o *ownedWord) store(v uint64) { o.v = v }

// ownedBlock is a lane owner's block pointer.
type ownedBlock struct{ p *block }

func (o *ownedBlock) load() *block   { return o.p }
func (o *ownedBlock) store(b *block) { o.p = b }
