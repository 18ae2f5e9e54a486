package idem_test

import (
	"testing"

	"github.com/readretry/readretry/internal/daemon"
)

// TestMain checks that no test left a goroutine behind (janitors, claim
// keepers, httptest servers).
func TestMain(m *testing.M) { daemon.Main(m) }
