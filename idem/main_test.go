package idem_test

import (
	"testing"

	"github.com/readretry/readretry/idem/internal/daemon"
	"github.com/readretry/readretry/idem/internal/redistest"
	"github.com/readretry/readretry/idem/internal/sqltest"
)

// TestMain stops the redis-server, cluster and SQL servers the benchmarks
// may have started, then checks that no test left a goroutine behind
// (janitors, httptest servers, client connections).
func TestMain(m *testing.M) { daemon.Main(m, redistest.Stop, sqltest.StopAll) }
