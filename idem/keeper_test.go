package idem_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
)

// slowStore answers every Extend after a delay, as a store one round trip
// away does.
type slowStore struct {
	*idem.Memory
	delay time.Duration
}

func (s slowStore) Extend(ctx context.Context, key []byte, f idem.Fence, ttl time.Duration) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Memory.Extend(ctx, key, f, ttl)
}

// TestKeeperKeepsManyClaims is S11: with TTL.Pending 300 ms and calls of
// 1.2 s, 400 concurrent calls on a store answering in 1 ms lost 341–400
// claims, because one goroutine extended them in turn. Extensions now run
// concurrently, each under its own deadline, so no claim is lost: every
// call completes (no ErrLost, no ErrNotStored) and no extension fails.
func TestKeeperKeepsManyClaims(t *testing.T) {
	const calls = 400
	store := slowStore{newMemory(t, idem.MemoryConfig{Capacity: 1024}), time.Millisecond}
	ttl := idem.TTL{Pending: 300 * time.Millisecond, Done: time.Minute}
	var mu sync.Mutex
	var extendErrs []error
	before := idem.ExtendFailures()
	var wg sync.WaitGroup
	errs := make([]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = idem.DoWith(context.Background(), store, []byte("call-"+strconv.Itoa(i)),
				idem.DoConfig{TTL: ttl, OnError: func(err error) { mu.Lock(); extendErrs = append(extendErrs, err); mu.Unlock() }},
				func(context.Context) ([]byte, error) { time.Sleep(1200 * time.Millisecond); return []byte("ok"), nil })
		}()
	}
	wg.Wait()
	lost := 0
	for _, err := range errs {
		if err != nil {
			lost++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if lost != 0 || len(extendErrs) != 0 || idem.ExtendFailures() != before {
		t.Fatalf("%d of %d claims lost; %d extension errors (first %v); ExtendFailures +%d; want none",
			lost, calls, len(extendErrs), first(extendErrs), idem.ExtendFailures()-before)
	}
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// TestMaxHold is S21: a handler that hangs after its client left kept its
// key at 409 for ever, extended every third of TTL.Pending. Now the keeper
// stops at TTL.MaxHold and says so (ErrMaxHold), the claim expires within
// Pending after that, and a repeat runs.
func TestMaxHold(t *testing.T) {
	store := newMemory(t, idem.MemoryConfig{Capacity: 64})
	var mu sync.Mutex
	var reported []error
	hang := make(chan struct{})
	var runs atomic.Int32
	h := mustMiddleware(t, store, idem.GlobalScope,
		idem.WithTTL(idem.TTL{Pending: 60 * time.Millisecond, MaxHold: 200 * time.Millisecond}),
		idem.WithErrorHandler(func(_ *http.Request, err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			<-hang
		}
		w.WriteHeader(http.StatusCreated)
	}))
	firstDone := make(chan int)
	go func() { firstDone <- serve(h, "POST", "/pay", "hung", nil, "").Code }()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The claim is held through several extensions, then given up: a
	// repeat gets 409 until then and 201 (a second run) after. The loop
	// ends at the first non-409; its bound only turns a hang into a
	// failure.
	code := http.StatusConflict
	for end := time.Now().Add(10 * time.Second); code == http.StatusConflict && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		code = serve(h, "POST", "/pay", "hung", nil, "").Code
	}
	close(hang)
	<-firstDone
	mu.Lock()
	defer mu.Unlock()
	var maxHold bool
	for _, err := range reported {
		maxHold = maxHold || errors.Is(err, idem.ErrMaxHold)
	}
	if code != http.StatusCreated || runs.Load() != 2 || !maxHold {
		t.Fatalf("repeat of a hung handler's key = %d after %d runs, reported %v; want 201 on the second run after ErrMaxHold", code, runs.Load(), reported)
	}
}

// TestExtendFailuresCounted: Do had no way to report a failed extension.
// DoWith passes it to OnError and ExtendFailures counts it.
func TestExtendFailuresCounted(t *testing.T) {
	s := lossyStore{newMemory(t, idem.MemoryConfig{Capacity: 8})}
	before := idem.ExtendFailures()
	var got atomic.Value
	_, _, err := idem.DoWith(context.Background(), s, []byte("k"),
		idem.DoConfig{TTL: idem.TTL{Pending: 30 * time.Millisecond}, OnError: func(err error) { got.CompareAndSwap(nil, err) }},
		func(context.Context) ([]byte, error) { time.Sleep(100 * time.Millisecond); return nil, nil })
	e, _ := got.Load().(error)
	if !errors.Is(err, idem.ErrNotStored) || !errors.Is(e, idem.ErrLost) || idem.ExtendFailures() == before {
		t.Fatalf("DoWith = %v; OnError got %v; ExtendFailures %d → %d; want ErrNotStored, ErrLost reported and counted", err, e, before, idem.ExtendFailures())
	}
}
