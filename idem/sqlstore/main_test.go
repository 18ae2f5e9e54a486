package sqlstore_test

import (
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem/sqlstore"
	"github.com/readretry/readretry/idem/sqlstore/internal/sqltest"
	"github.com/readretry/readretry/internal/daemon"
	_ "modernc.org/sqlite"
)

// TestMain stops the PostgreSQL and MariaDB servers the tests started (one
// of each for the whole package), then checks that nothing leaked
// goroutines.
func TestMain(m *testing.M) { daemon.Main(m, sqltest.StopAll) }

// backend is one database the tests run on: its dialect and a function
// that opens a new, empty database on it for one test.
type backend struct {
	name string
	d    sqlstore.Dialect
	open func(t testing.TB) *sql.DB
	// connID returns the server's id of tx's connection and kill ends
	// that connection from another one; nil for SQLite (no server).
	connID string // a query returning the id
	kill   string // a statement ending the connection of the id (one ?)
}

func sqliteBackend() backend {
	return backend{name: "SQLite", d: sqlstore.SQLite, open: openSQLite}
}

// postgresBackend is the test binary's PostgreSQL (pgx/v5 stdlib), each
// test in a schema of its own.
func postgresBackend(t testing.TB) backend {
	s := sqltest.Postgres(t)
	return backend{name: "Postgres", d: sqlstore.Postgres, open: func(t testing.TB) *sql.DB { return s.Open(t, 64) },
		connID: "SELECT pg_backend_pid()", kill: "SELECT pg_terminate_backend(?)"}
}

// mariadbBackend is the test binary's MariaDB (go-sql-driver/mysql), each
// test in a database of its own.
func mariadbBackend(t testing.TB) backend {
	s := sqltest.MariaDB(t)
	return backend{name: "MariaDB", d: sqlstore.MySQL, open: func(t testing.TB) *sql.DB { return s.Open(t, 64) },
		connID: "SELECT CONNECTION_ID()", kill: "KILL ?"}
}

// openSQLite opens a fresh SQLite database file (WAL, busy timeout so that
// concurrent writers wait for each other instead of failing) and closes it
// when the test ends.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	return db
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	base time.Time
	ns   atomic.Int64
}

func newFakeClock() *fakeClock {
	return &fakeClock{base: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time          { return c.base.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
