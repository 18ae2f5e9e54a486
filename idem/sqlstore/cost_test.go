package sqlstore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

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
