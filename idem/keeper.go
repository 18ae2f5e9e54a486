package idem

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Claim extension (SPEC I5; issue 17 item 6). A claim is taken for a
// pending ttl; while its call runs, Do and Middleware register it with the
// keeper for that ttl, whose one background loop extends every registered
// claim (Store.Extend) about three times per pending ttl. Keepers are
// shared by every store and middleware of the process, one per interval, so
// there is no goroutine per request: a keeper's loop runs while it holds at
// least one claim and is stopped when the last one is dropped.

// minExtendInterval is the shortest interval between two extensions of a
// claim: a pending ttl below three times this is extended less often than
// three times per ttl (such a ttl is too short to survive a GC pause
// anyway).
const minExtendInterval = time.Millisecond

// extendInterval returns the keeper interval for claims of pending ttl: the
// largest power of two nanoseconds not above pending/3 (at least
// minExtendInterval), so a claim is extended at least twice before it could
// expire even when one extension is late, and the number of distinct
// keepers stays below 64.
func extendInterval(pending time.Duration) time.Duration {
	third := pending / 3
	if third < minExtendInterval {
		return minExtendInterval
	}
	iv := time.Duration(1)
	for iv <= third/2 {
		iv <<= 1
	}
	return iv
}

// keepers maps an interval to its *keeper.
var keepers sync.Map

// keeper extends the claims registered with it every interval.
type keeper struct {
	interval time.Duration
	mu       sync.Mutex
	held     map[*hold]struct{}
	loop     *ticker.Loop // running while held is not empty
}

// hold is one claim registered for extension; drop unregisters it.
type hold struct {
	k     *keeper
	s     Store
	key   []byte // a copy: the caller's slice is not retained
	fence Fence
	ttl   time.Duration
	onErr func(error) // nil: errors are dropped
	// dropped is set by drop before the caller completes or releases the
	// claim, so an ErrLost caused by that completion is not reported.
	dropped atomic.Bool
}

// holdClaim registers key's claim held by fence for extension by ttl until
// drop. onErr, if not nil, receives extension errors (wrapping the store's,
// ErrLost among them) from the keeper's goroutine.
func holdClaim(s Store, key []byte, fence Fence, ttl time.Duration, onErr func(error)) *hold {
	iv := extendInterval(ttl)
	v, ok := keepers.Load(iv)
	if !ok {
		v, _ = keepers.LoadOrStore(iv, &keeper{interval: iv, held: make(map[*hold]struct{})})
	}
	k := v.(*keeper)
	h := &hold{k: k, s: s, key: append([]byte(nil), key...), fence: fence, ttl: ttl, onErr: onErr}
	k.mu.Lock()
	k.held[h] = struct{}{}
	if k.loop == nil {
		k.loop = ticker.Start(iv, k.stepper())
	}
	k.mu.Unlock()
	return h
}

// drop unregisters h; call it before completing or releasing the claim.
// When it was the keeper's last claim, the keeper's
// loop is stopped (waiting for an extension in flight, at most one store
// round trip). It may be called more than once.
func (h *hold) drop() {
	h.dropped.Store(true)
	k := h.k
	k.mu.Lock()
	if _, ok := k.held[h]; !ok {
		k.mu.Unlock()
		return
	}
	delete(k.held, h)
	var stop *ticker.Loop
	if len(k.held) == 0 {
		stop, k.loop = k.loop, nil
	}
	k.mu.Unlock()
	if stop != nil {
		stop.Stop()
	}
}

// stepper returns one loop's step: it extends every claim held at the
// tick. Each loop has its own batch buffer, so a loop being stopped and its
// successor never share one.
func (k *keeper) stepper() func(time.Time) {
	var batch []*hold
	return func(time.Time) {
		k.mu.Lock()
		batch = batch[:0]
		for h := range k.held {
			batch = append(batch, h)
		}
		k.mu.Unlock()
		// A store that hangs must not hold the loop (and the Stop of a
		// finishing request) for longer than one interval.
		ctx, cancel := context.WithTimeout(context.Background(), k.interval)
		defer cancel()
		for i, h := range batch {
			if err := h.s.Extend(ctx, h.key, h.fence, h.ttl); err != nil && h.onErr != nil && !h.dropped.Load() {
				h.onErr(fmt.Errorf("idem: extend claim: %w", err))
			}
			batch[i] = nil
		}
	}
}
