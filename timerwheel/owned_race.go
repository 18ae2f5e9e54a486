//go:build race

package timerwheel

import "sync/atomic"

// Under the race detector a lane's owner fields are atomics; see owned.go.

// ownedWord is a lane owner's uint64.
type ownedWord struct{ v atomic.Uint64 }

func (o *ownedWord) load() uint64   { return o.v.Load() }
func (o *ownedWord) store(v uint64) { o.v.Store(v) }

// ownedBlock is a lane owner's block pointer.
type ownedBlock struct{ p atomic.Pointer[block] }

func (o *ownedBlock) load() *block   { return o.p.Load() }
func (o *ownedBlock) store(b *block) { o.p.Store(b) }
