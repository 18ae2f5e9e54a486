package idem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/internal/ticker"
)

// Claim extension (SPEC I5 round 3). A claim is taken for a pending ttl;
// while its call runs, Do and Middleware register it with the keeper for
// that ttl. At every tick of the keeper's loop (about three per pending
// ttl) the registered claims that have no extension in flight are sorted
// soonest-expiring first and extended (Store.Extend) by up to
// maxExtenders goroutines at once, each call under a deadline of its own:
// the claim's expiry, past which the extension is pointless. So a slow or
// hung store delays only the claims whose extensions it holds, never the
// whole round, and a claim about to expire goes first. A claim is never
// extended past TTL.MaxHold after it was taken. Keepers are shared by
// every store and middleware of the process, one per interval; a keeper's
// loop runs while it holds at least one claim. The goroutines are per
// round and bounded, never per request.

// minExtendInterval is the shortest interval between two extensions of a
// claim: a pending ttl below three times this is extended less often than
// three times per ttl (such a ttl is too short to survive a GC pause
// anyway).
const minExtendInterval = time.Millisecond

// maxExtenders bounds the extensions one keeper has in flight at once (and
// so its goroutines and the store connections it takes).
const maxExtenders = 64

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

// ErrMaxHold is passed to the extension error callback (Middleware's
// WithErrorHandler, DoConfig.OnError) when a claim has been held for
// TTL.MaxHold and is no longer extended: it expires within its pending ttl
// even though its call has not returned, and a repeat may then run the call
// again (SPEC I5 round 3).
var ErrMaxHold = errors.New("idem: claim held for TTL.MaxHold, no longer extended")

// extendFailures counts failed extensions process-wide (ExtendFailures).
var extendFailures atomic.Uint64

// ExtendFailures returns how many claim extensions have failed in this
// process since it started, over all stores (SPEC I5 round 3): the store
// answered an error, did not answer before the claim's expiry, or said
// the claim was lost (ErrLost). Each failure is also passed to the error
// callback of the Middleware or DoWith call that holds the claim. A rising
// count means claims may expire under running calls; export it as a
// counter.
func ExtendFailures() uint64 { return extendFailures.Load() }

// keepers maps an interval to its *keeper.
var keepers sync.Map

// keeper extends the claims registered with it every interval.
type keeper struct {
	interval time.Duration
	mu       sync.Mutex
	held     map[*hold]struct{}
	loop     *ticker.Loop    // running while held is not empty
	workers  *sync.WaitGroup // the extension goroutines of loop
}

// hold is one claim registered for extension; drop unregisters it.
type hold struct {
	k     *keeper
	s     Store
	key   []byte // a copy: the caller's slice is not retained
	fence Fence
	ttl   time.Duration
	limit time.Time   // taken + MaxHold: no extension reaches past it
	onErr func(error) // nil: errors are only counted

	// Guarded by k.mu.
	expires time.Time          // when the claim expires unless extended
	busy    bool               // an extension is in flight
	over    bool               // lost or at MaxHold: not extended again
	cancel  context.CancelFunc // of the extension in flight

	// dropped is set by drop before the caller completes or releases the
	// claim, so an ErrLost caused by that completion is not reported.
	dropped atomic.Bool
}

// holdClaim registers key's claim held by fence, taken at taken for ttl,
// for extension by ttl until drop, but never past taken+maxHold. onErr, if
// not nil, receives extension errors (wrapping the store's, ErrLost among
// them, or ErrMaxHold) from a keeper goroutine.
func holdClaim(s Store, key []byte, fence Fence, taken time.Time, ttl, maxHold time.Duration, onErr func(error)) *hold {
	iv := extendInterval(ttl)
	v, ok := keepers.Load(iv)
	if !ok {
		v, _ = keepers.LoadOrStore(iv, &keeper{interval: iv, held: make(map[*hold]struct{})})
	}
	k := v.(*keeper)
	h := &hold{
		k: k, s: s, key: append([]byte(nil), key...), fence: fence, ttl: ttl,
		limit: taken.Add(maxHold), onErr: onErr, expires: taken.Add(ttl),
	}
	k.mu.Lock()
	k.held[h] = struct{}{}
	if k.loop == nil {
		k.workers = new(sync.WaitGroup)
		k.loop = ticker.Start(iv, k.stepper(k.workers))
	}
	k.mu.Unlock()
	return h
}

// drop unregisters h and cancels its extension in flight; call it before
// completing or releasing the claim. When it was the keeper's last claim,
// the keeper's loop is stopped and drop waits for its extensions, all of
// them cancelled by then. It may be called more than once.
func (h *hold) drop() {
	h.dropped.Store(true)
	k := h.k
	k.mu.Lock()
	if _, ok := k.held[h]; !ok {
		k.mu.Unlock()
		return
	}
	delete(k.held, h)
	if h.cancel != nil {
		h.cancel()
	}
	var stop *ticker.Loop
	var workers *sync.WaitGroup
	if len(k.held) == 0 {
		stop, k.loop = k.loop, nil
		workers, k.workers = k.workers, nil
	}
	k.mu.Unlock()
	if stop != nil {
		stop.Stop() // no new extension starts after this
		workers.Wait()
	}
}

// stepper returns one loop's step: it starts the extensions due at the
// tick, soonest-expiring claim first, and returns without waiting for
// them; workers counts them so that the loop's owner can.
func (k *keeper) stepper(workers *sync.WaitGroup) func(time.Time) {
	return func(time.Time) {
		k.mu.Lock()
		var batch []*hold
		for h := range k.held {
			if !h.busy && !h.over {
				h.busy = true
				batch = append(batch, h)
			}
		}
		k.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		slices.SortFunc(batch, func(a, b *hold) int { return a.expires.Compare(b.expires) })
		var next atomic.Int64
		n := min(len(batch), maxExtenders)
		workers.Add(n)
		for range n {
			go func() {
				defer workers.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(batch) {
						return
					}
					k.extend(batch[i])
				}
			}()
		}
	}
}

// extend extends h once under a deadline at its expiry (at least one
// interval from now, for a claim whose expiry the keeper is already late
// for), and records the outcome. An extension cut short by MaxHold is the
// claim's last: the claim expires at its MaxHold, and ErrMaxHold is
// reported then.
func (k *keeper) extend(h *hold) {
	now := time.Now()
	ttl := min(h.ttl, h.limit.Sub(now))
	k.mu.Lock()
	if ttl <= 0 {
		h.busy, h.over = false, true
		k.mu.Unlock()
		h.report(ErrMaxHold, false)
		return
	}
	deadline := h.expires
	if d := now.Add(k.interval); deadline.Before(d) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	h.cancel = cancel
	dropped := h.dropped.Load()
	k.mu.Unlock()
	var err error
	if !dropped {
		err = h.s.Extend(ctx, h.key, h.fence, ttl)
	}
	cancel()
	k.mu.Lock()
	h.busy, h.cancel = false, nil
	if err == nil && !dropped {
		h.expires = now.Add(ttl)
	}
	last := ttl < h.ttl // this extension reached MaxHold: the last one
	if errors.Is(err, ErrLost) || last {
		h.over = true
	}
	k.mu.Unlock()
	if err != nil {
		h.report(fmt.Errorf("idem: extend claim: %w", err), true)
	}
	if last && !errors.Is(err, ErrLost) {
		h.report(ErrMaxHold, false)
	}
}

// report counts a failure and passes err to the callback, unless the claim
// was dropped meanwhile (its holder completed or released it, which is
// what made the extension fail).
func (h *hold) report(err error, failure bool) {
	if h.dropped.Load() {
		return
	}
	if failure {
		extendFailures.Add(1)
	}
	if h.onErr != nil {
		h.onErr(err)
	}
}
