package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/sqlstore"
)

// newStore is a store on a new SQLite database, its table created.
func newStore(t testing.TB, c sqlstore.Config) (*sqlstore.Store, *sql.DB) {
	t.Helper()
	db := openSQLite(t)
	return storeOn(t, db, "", c), db
}

// storeOn returns a store on db in the dialect DialectOf finds — which
// must be the one named want, unless want is "" — its table created.
func storeOn(t testing.TB, db *sql.DB, want string, c sqlstore.Config) *sqlstore.Store {
	t.Helper()
	d, err := sqlstore.DialectOf(db)
	if err != nil || (want != "" && d.Name != want) {
		t.Fatalf("DialectOf = %v, %v; want %q", d.Name, err, want)
	}
	s, err := sqlstore.New(db, d, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSQLiteConformance runs the store suite — 1,000 goroutines claiming
// one ID among it — on SQLite: the primary key decides every race.
func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idem.Store {
		s, _ := newStore(t, sqlstore.Config{})
		return s
	})
}

// TestSQLTTL: expired rows are invisible at once, replaced by the next
// claim of their key, and removed by Purge; a crashed holder's late
// Complete is refused.
func TestSQLTTL(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	s, _ := newStore(t, sqlstore.Config{Table: "dedup", Clock: clk.Now})
	k := []byte("req-1")
	crashed, err := s.Claim(ctx, k, 10*time.Second)
	if err != nil || crashed == 0 {
		t.Fatal(crashed, err)
	}
	clk.Advance(9999 * time.Millisecond)
	if f, _ := s.Claim(ctx, k, time.Second); f != 0 {
		t.Fatal("claim expired early")
	}
	clk.Advance(time.Millisecond)
	if st, _, _ := s.Lookup(ctx, k, nil); st != idem.Absent {
		t.Fatalf("state after ttl = %v", st)
	}
	f, err := s.Claim(ctx, k, 10*time.Second)
	if err != nil || f == 0 {
		t.Fatalf("Claim of an expired key = %v, %v", f, err)
	}
	if err := s.Complete(ctx, k, crashed, []byte("stale"), time.Hour); !errors.Is(err, idem.ErrLost) {
		t.Fatalf("late Complete of the expired holder = %v", err)
	}
	if err := s.Complete(ctx, k, f, []byte("fresh"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Issue(ctx, []byte("tok"), time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if ok, _ := s.Consume(ctx, []byte("tok")); ok {
		t.Fatal("expired token consumed")
	}
	if err := s.Issue(ctx, []byte("tok"), time.Second); err != nil {
		t.Fatalf("Issue over an expired token: %v", err)
	}
	clk.Advance(2 * time.Hour)
	if n, err := s.Purge(ctx); err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2 (the done claim and the token)", n, err)
	}
	if _, err := s.Claim(ctx, k, time.Duration(1)); err != nil {
		t.Fatalf("sub-millisecond ttl: %v", err)
	}
}

func TestSQLTooLarge(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, sqlstore.Config{MaxResult: 4})
	f, _ := s.Claim(ctx, []byte("k"), time.Minute)
	if err := s.Complete(ctx, []byte("k"), f, []byte("12345"), time.Minute); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("Complete over MaxResult = %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	db := openSQLite(t)
	for _, table := range []string{"x; DROP TABLE y", "1abc", "a..b", "a b", "ünï"} {
		if _, err := sqlstore.New(db, sqlstore.SQLite, sqlstore.Config{Table: table}); !errors.Is(err, sqlstore.ErrDialect) {
			t.Errorf("table %q: %v, want ErrDialect", table, err)
		}
		if _, err := sqlstore.NewEventLog(sqlstore.SQLite, table); !errors.Is(err, sqlstore.ErrDialect) {
			t.Errorf("event table %q: %v, want ErrDialect", table, err)
		}
	}
	if _, err := sqlstore.New(db, sqlstore.SQLite, sqlstore.Config{Table: "app.idem_dedup"}); err != nil {
		t.Errorf("schema-qualified table: %v", err)
	}
	if _, err := sqlstore.New(nil, sqlstore.SQLite, sqlstore.Config{}); !errors.Is(err, sqlstore.ErrInvalidConfig) {
		t.Errorf("New(nil db) = %v, want ErrInvalidConfig", err)
	}
	if _, err := sqlstore.New(db, sqlstore.SQLite, sqlstore.Config{MaxResult: -1}); !errors.Is(err, sqlstore.ErrInvalidConfig) {
		t.Errorf("negative MaxResult = %v, want ErrInvalidConfig", err)
	}
}
