package idem_test

import (
	"os"
	"testing"

	"github.com/readretry/readretry/idem/internal/redistest"
	"github.com/readretry/readretry/idem/internal/sqltest"
	"go.uber.org/goleak"
)

// TestMain stops the redis-server, cluster and SQL servers the benchmarks
// may have started, then
// checks that no test left a goroutine behind (janitors, httptest servers,
// client connections).
func TestMain(m *testing.M) {
	code := m.Run()
	redistest.Stop()
	sqltest.StopAll()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goleak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}
