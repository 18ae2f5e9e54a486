package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/sqlstore"
	"github.com/readretry/readretry/idem/sqlstore/internal/sqltest"
)

// BenchmarkServerSQLClaim is the SQL store's claim — one INSERT in
// autocommit — on the real PostgreSQL and MariaDB servers the tests use
// (fsync off: the figure is the round trip and the statement, not the
// disk).
func BenchmarkServerSQLClaim(b *testing.B) {
	for _, srv := range []struct {
		name string
		get  func(testing.TB) *sqltest.Server
	}{{"Postgres", sqltest.Postgres}, {"MariaDB", sqltest.MariaDB}} {
		b.Run(srv.name, func(b *testing.B) {
			db := srv.get(b).Open(b, 4)
			d, err := sqlstore.DialectOf(db)
			if err != nil {
				b.Fatal(err)
			}
			storetest.BenchClaims(b, newSQLStore(b, db, d))
		})
	}
}

// BenchmarkSQLiteClaim is the SQL store's claim — one INSERT into the
// dedup table — on SQLite (modernc.org/sqlite, WAL, synchronous=NORMAL) in
// a temporary file.
func BenchmarkSQLiteClaim(b *testing.B) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "bench.db")+
		"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	storetest.BenchClaims(b, newSQLStore(b, db, sqlstore.SQLite))
}

// BenchmarkSQLScopedClaim is the claim of BenchmarkServerSQLClaim and
// BenchmarkSQLiteClaim with keys under 64 scopes: one INSERT … SELECT that
// also counts the scope's live rows and bytes through the scope index
// (SPEC I5 round 3), so its cost grows with the rows a scope holds (here
// up to b.N/64, ttl 10 s; the quota is set high enough not to refuse).
func BenchmarkSQLScopedClaim(b *testing.B) {
	for _, srv := range []struct {
		name string
		get  func(testing.TB) *sqltest.Server
	}{{"Postgres", sqltest.Postgres}, {"MariaDB", sqltest.MariaDB}} {
		b.Run(srv.name, func(b *testing.B) {
			db := srv.get(b).Open(b, 4)
			d, err := sqlstore.DialectOf(db)
			if err != nil {
				b.Fatal(err)
			}
			storetest.BenchScopedClaims(b, newSQLStore(b, db, d, sqlstore.Config{ScopeQuota: 1 << 30}))
		})
	}
	b.Run("SQLite", func(b *testing.B) {
		db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "bench.db")+
			"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		storetest.BenchScopedClaims(b, newSQLStore(b, db, sqlstore.SQLite, sqlstore.Config{ScopeQuota: 1 << 30}))
	})
}

// newSQLStore returns a SQL store on db with its dedup table created.
func newSQLStore(b *testing.B, db *sql.DB, d sqlstore.Dialect, c ...sqlstore.Config) *sqlstore.Store {
	b.Helper()
	var cfg sqlstore.Config
	if len(c) > 0 {
		cfg = c[0]
	}
	s, err := sqlstore.New(db, d, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTable(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}
