package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/sqlstore"
)

// walFrame is the size of one WAL frame: a 24-byte header and one page
// (SQLite's default page size, 4096 bytes, which the test's databases
// keep).
const walFrame = 24 + 4096

// TestSQLiteClaimPages counts the pages a claim's commit writes to the
// write-ahead log — SQLite's cost of a write, one frame per dirty page
// (issue 25 must-hold: a scoped claim costs about what an unscoped one
// does). The dedup table is one B-tree keyed by (id, kind), so an
// unscoped claim dirties one leaf page; a scoped claim dirties it and its
// scope's counter row, two. A rowid table with its primary-key index
// would add one page to each. Averaged over 1,000 claims after 64 warm-up
// claims (page splits add a frame now and then); checkpoints are off so
// the log only grows.
func TestSQLiteClaimPages(t *testing.T) {
	for _, c := range []struct {
		name   string
		scoped bool
		max    float64 // frames per claim
	}{{"unscoped", false, 1.5}, {"scoped", true, 2.5}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "idem.db")
			db, err := sql.Open("sqlite", "file:"+path+
				"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(0)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			s := storeOn(t, db, sqlstore.SQLite.Name, sqlstore.Config{})
			g := storetest.NewKeyGen()
			key := func(i int) []byte {
				if !c.scoped {
					return g.Next()
				}
				return mustScoped(t, "account-"+string(rune('A'+i%64)), string(g.Next()))
			}
			claim := func(i int) {
				if f, err := s.Claim(ctx, key(i), time.Minute); err != nil || f == 0 {
					t.Fatal(f, err)
				}
			}
			for i := range 64 {
				claim(i)
			}
			before := walSize(t, path)
			const n = 1000
			for i := range n {
				claim(i)
			}
			frames := float64(walSize(t, path)-before) / walFrame
			if got := frames / n; got > c.max {
				t.Fatalf("%s claim writes %.2f pages, want at most %.1f", c.name, got, c.max)
			} else {
				t.Logf("%s claim writes %.2f pages", c.name, got)
			}
		})
	}
}

func walSize(t *testing.T, db string) int64 {
	t.Helper()
	fi, err := os.Stat(db + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestSQLiteMigrateRowidTable follows CreateTable's migration notes from
// a round-2 table (a rowid table, no scope or size columns): the columns
// added by hand, CreateTable counts the scoped rows already there and
// the store works on the rowid table; then the table is rebuilt WITHOUT
// ROWID by the documented statements, CreateTable puts the triggers back,
// and the counters still equal the rows, before and after more claims
// and a release by the store that was open all along.
func TestSQLiteMigrateRowidTable(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t)
	exec := func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	// Round 2's CreateTable.
	exec(`CREATE TABLE idem_dedup (
	id BLOB NOT NULL,
	kind SMALLINT NOT NULL,
	state SMALLINT NOT NULL,
	fence BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	result BLOB,
	PRIMARY KEY (id, kind)
)`)
	exec(`INSERT INTO idem_dedup VALUES (CAST('old' AS BLOB), 1, 2, 1, 99999999999999, CAST('r' AS BLOB))`)
	// The migration notes: the two columns, then CreateTable.
	exec(`ALTER TABLE idem_dedup ADD COLUMN scope BLOB NULL`, `ALTER TABLE idem_dedup ADD COLUMN size BIGINT NOT NULL DEFAULT 0`)
	exec(`UPDATE idem_dedup SET scope = CAST('acme' AS BLOB), size = 1`) // as if written by a scoped claim
	s := storeOn(t, db, sqlstore.SQLite.Name, sqlstore.Config{})
	check := func(when string) {
		t.Helper()
		got := scopeCounters(t, db, "idem_dedup_scopes WHERE entries <> 0 OR bytes <> 0", "entries, bytes")
		want := scopeCounters(t, db, "idem_dedup WHERE scope IS NOT NULL GROUP BY scope", "COUNT(*), COALESCE(SUM(size), 0)")
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: counters %v, rows add up to %v", when, got, want)
		}
	}
	check("after CreateTable on the rowid table")
	claim := func(key []byte) idem.Fence {
		t.Helper()
		f, err := s.Claim(ctx, key, time.Minute)
		if err != nil || f == 0 {
			t.Fatal(f, err)
		}
		return f
	}
	claim(mustScoped(t, "acme", "k1"))
	claim([]byte("unscoped"))
	check("after claims on the rowid table")
	// The rebuild of the notes, then CreateTable.
	conn, err := db.Conn(ctx) // one connection for the transaction
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range sqliteRebuild {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	// The same store, its statements prepared on the old table: SQLite
	// prepares them again for the new one.
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	var ddl string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'idem_dedup'`).Scan(&ddl); err != nil || !strings.Contains(ddl, "WITHOUT ROWID") {
		t.Fatalf("rebuilt table: %q, %v", ddl, err)
	}
	check("after the rebuild")
	f := claim(mustScoped(t, "acme", "k2"))
	claim(mustScoped(t, "zeta", "k1"))
	if err := s.Release(ctx, mustScoped(t, "acme", "k2"), f); err != nil {
		t.Fatal(err)
	}
	check("after claims and a release on the rebuilt table")
	if st, res, err := s.Lookup(ctx, []byte("old"), nil); err != nil || st != idem.Done || string(res) != "r" {
		t.Fatalf("the row from before the migration: %v %q %v", st, res, err)
	}
}

// sqliteRebuild is the rebuild of a rowid dedup table WITHOUT ROWID given
// in CreateTable's migration notes, run while no store writes the table.
var sqliteRebuild = []string{
	`BEGIN`,
	`CREATE TABLE idem_dedup_new (
	id BLOB NOT NULL,
	kind SMALLINT NOT NULL,
	state SMALLINT NOT NULL,
	fence BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	result BLOB,
	scope BLOB NULL,
	size BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (id, kind)
) WITHOUT ROWID`,
	`INSERT INTO idem_dedup_new SELECT id, kind, state, fence, expires_at, result, scope, size FROM idem_dedup`,
	`DROP TABLE idem_dedup`,
	`ALTER TABLE idem_dedup_new RENAME TO idem_dedup`,
	`COMMIT`,
}

// TestMariaDBClaimStatements counts, in the server's own statistics, the
// statements 200 unscoped and 200 scoped claims send: each claim is one
// execution of a statement prepared once per connection — one round trip,
// where an Exec with arguments through go-sql-driver/mysql is a prepare,
// an execute and a close, two round trips (issue 25 must-hold: round
// trips per claim).
func TestMariaDBClaimStatements(t *testing.T) {
	ctx := context.Background()
	b := mariadbBackend(t)
	db := b.open(t)
	db.SetMaxOpenConns(1)
	s := storeOn(t, db, b.d.Name, sqlstore.Config{})
	if f, err := s.Claim(ctx, mustScoped(t, "acme", "warm"), time.Minute); err != nil || f == 0 {
		t.Fatal(f, err) // the scope's counter row exists
	}
	status := func(name string) int64 {
		t.Helper()
		var n string
		var v int64
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	prepared, executed := status("Com_stmt_prepare"), status("Com_stmt_execute")
	const n = 200
	for i := range n {
		for _, k := range [][]byte{[]byte(fmt.Sprint("plain-", i)), mustScoped(t, "acme", fmt.Sprint("k", i))} {
			if f, err := s.Claim(ctx, k, time.Minute); err != nil || f == 0 {
				t.Fatal(f, err)
			}
		}
	}
	if p, e := status("Com_stmt_prepare")-prepared, status("Com_stmt_execute")-executed; p > 2 || e != 2*n {
		t.Fatalf("%d claims prepared %d statements and executed %d; want at most 2 (once per statement) and %d", 2*n, p, e, 2*n)
	}
}
