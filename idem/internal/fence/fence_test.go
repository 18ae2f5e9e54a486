package fence_test

import (
	"fmt"
	"testing"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/fence"
)

func TestUnique(t *testing.T) {
	s := fence.New()
	seen := map[idem.Fence]bool{}
	for range 100_000 {
		f := s.Next()
		if f == 0 || seen[f] {
			t.Fatalf("fence %x zero or repeated", f)
		}
		seen[f] = true
	}
	a, b := fence.New(), fence.New()
	if a.Next() == b.Next() {
		t.Fatal("two sources gave the same first fence") // 2^-64 odds
	}
}

// Two claims of one store never share a fence.
func Example() {
	s := fence.New()
	a, b := s.Next(), s.Next()
	fmt.Println(a != b, a != 0, b != 0)
	// Output: true true true
}
