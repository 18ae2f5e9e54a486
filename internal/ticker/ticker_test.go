package ticker_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/internal/ticker"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStopWaits checks the contract the three users rely on: steps run,
// Stop returns only once the goroutine is gone, no step starts after
// Stop, and a second Stop is harmless.
func TestStopWaits(t *testing.T) {
	var steps atomic.Int64
	l := ticker.Start(time.Millisecond, func(time.Time) { steps.Add(1) })
	deadline := time.Now().Add(5 * time.Second)
	for steps.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no step within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	l.Stop()
	after := steps.Load()
	time.Sleep(10 * time.Millisecond)
	if got := steps.Load(); got != after {
		t.Fatalf("%d steps ran after Stop returned", got-after)
	}
	l.Stop()
}

func TestStartRejectsBadInterval(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Start(0) did not panic")
		}
	}()
	ticker.Start(0, func(time.Time) {})
}

func Example() {
	done := make(chan struct{})
	var n atomic.Int64
	l := ticker.Start(time.Millisecond, func(time.Time) {
		if n.Add(1) == 3 {
			close(done)
		}
	})
	<-done
	l.Stop()
	fmt.Println("stopped after at least", 3, "steps")
	// Output: stopped after at least 3 steps
}
