package ctxtable

import (
	"testing"

	"go.uber.org/goleak"
)

// Tests that start goroutines must stop them all.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
