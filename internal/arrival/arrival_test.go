package arrival_test

import (
	"fmt"
	"testing"

	"github.com/readretry/readretry/internal/arrival"
)

// TestOrder: the answer order answers every context exactly once, and
// never one not yet sent.
func TestOrder(t *testing.T) {
	var a arrival.Order
	const n = 1 << 20
	seen := make([]bool, n+1<<17)
	for i := range n {
		k := a.Take()
		if k >= uint64(len(seen)) || seen[k] {
			t.Fatalf("answer %d: k %d out of range or twice", i, k)
		}
		seen[k] = true
	}
	missing := 0
	for k := range n - 1<<17 {
		if !seen[k] {
			missing++
		}
	}
	if missing > 1024 { // stragglers still waiting
		t.Fatalf("%d contexts of the first %d never answered", missing, n-1<<17)
	}
}

// TestFront: every k above Front is unanswered, and Front itself was
// answered.
func TestFront(t *testing.T) {
	var a arrival.Order
	const n = 1 << 18
	seen := make([]bool, n+1<<16)
	for i := range n {
		seen[a.Take()] = true
		if i%997 != 0 {
			continue
		}
		f := a.Front()
		if !seen[f] && !arrival.Straggler(f) {
			t.Fatalf("after %d answers: front %d not answered", i+1, f)
		}
		for k := f + 1; k < f+2000 && k < uint64(len(seen)); k++ {
			if seen[k] {
				t.Fatalf("after %d answers: %d above the front %d answered", i+1, k, f)
			}
		}
	}
}

// The first answers come from proxy 0's stream (k = 0, 4, 8, …), which
// runs ahead of proxy 1's by 64 positions; k = 0 itself is a straggler
// (its hash is 0) and comes 65,536 answers later.
func ExampleOrder() {
	var a arrival.Order
	first := make([]uint64, 6)
	for i := range first {
		first[i] = a.Take()
	}
	fmt.Println(first, arrival.Straggler(0))
	fmt.Println(arrival.Lag(0), arrival.Lag(1), arrival.Lag(2), arrival.Lag(3))
	// Output:
	// [4 8 12 16 20 24] true
	// 0 64 320 1344
}
