package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readretry/readretry/idem/sqlstore"
)

func TestDialectOf(t *testing.T) {
	d, err := sqlstore.DialectOf(openSQLite(t))
	if err != nil || d.Name != "sqlite" {
		t.Fatalf("DialectOf(modernc sqlite) = %v, %v", d.Name, err)
	}
	db := sql.OpenDB(unknownConnector{})
	defer db.Close()
	if _, err := sqlstore.DialectOf(db); !errors.Is(err, sqlstore.ErrDialect) {
		t.Fatalf("DialectOf(unknown driver) = %v", err)
	}
	if _, err := sqlstore.DialectOf(nil); !errors.Is(err, sqlstore.ErrDialect) {
		t.Fatalf("DialectOf(nil) = %v", err)
	}
}

// unknownConnector is a driver DialectOf cannot know.
type unknownConnector struct{}

func (unknownConnector) Connect(context.Context) (driver.Conn, error) { return nil, errors.New("no") }
func (unknownConnector) Driver() driver.Driver                        { return unknownDriver{} }

type unknownDriver struct{}

func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no") }

func TestRebind(t *testing.T) {
	cases := []struct{ in, pg string }{
		{"SELECT 1", "SELECT 1"},
		{"WHERE a = ? AND b = ?", "WHERE a = $1 AND b = $2"},
		{"SET s = '?', t = ? -- ?\nWHERE u = ?", "SET s = '?', t = $1 -- ?\nWHERE u = $2"},
		{`SELECT "a?b", ? /* ? */ , ?`, `SELECT "a?b", $1 /* ? */ , $2`},
		{"x = 'unterminated ?", "x = 'unterminated ?"},
		{"x = ? /* unterminated ?", "x = $1 /* unterminated ?"},
		{"x = ? -- to the end ?", "x = $1 -- to the end ?"},
	}
	for _, c := range cases {
		if got := sqlstore.Postgres.Rebind(c.in); got != c.pg {
			t.Errorf("Postgres.Rebind(%q) = %q, want %q", c.in, got, c.pg)
		}
		if got := sqlstore.SQLite.Rebind(c.in); got != c.in {
			t.Errorf("SQLite.Rebind changed %q to %q", c.in, got)
		}
	}
}

// FuzzRebind: Postgres rebinding never panics, only ever replaces ? by
// $n (numbered from 1 in order), and leaves everything else unchanged.
func FuzzRebind(f *testing.F) {
	for _, s := range []string{"a = ? AND b = ?", "'?' \"?\" -- ?\n ?", "/* ? */ ?", "", "?'", "--", "/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := sqlstore.Postgres.Rebind(q)
		// Undo: each $n (in order) must come back to ?.
		var b strings.Builder
		n := 0
		for i := 0; i < len(out); i++ {
			if out[i] == '$' {
				want := fmt.Sprintf("$%d", n+1)
				if strings.HasPrefix(out[i:], want) {
					// Only a rewritten placeholder if the input had ?
					// here (inputs may contain $ themselves); the number
					// is exactly the next one, so a digit after it is the
					// input's.
					j := b.Len() // b rebuilds q: its length is the position in q
					if j < len(q) && q[j] == '?' {
						n++
						b.WriteByte('?')
						i += len(want) - 1
						continue
					}
				}
			}
			b.WriteByte(out[i])
		}
		if b.String() != q {
			t.Fatalf("Rebind(%q) = %q: not a placeholder-only rewrite", q, out)
		}
	})
}

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "pg error" }
func (e sqlStateErr) SQLState() string { return string(e) }

type codeErr int

func (e codeErr) Error() string { return "sqlite error" }
func (e codeErr) Code() int     { return int(e) }

func TestIsUniqueViolation(t *testing.T) {
	yes := []error{
		sqlStateErr("23505"),
		fmt.Errorf("wrapped: %w", sqlStateErr("23505")),
		codeErr(2067), codeErr(1555),
		errors.New("UNIQUE constraint failed: t.id"),                                                  // mattn/go-sqlite3
		errors.New(`pq: duplicate key value violates unique constraint "t_pkey"`),                     // lib/pq
		errors.New(`ERROR: duplicate key value violates unique constraint "t_pkey" (SQLSTATE 23505)`), // pgx text
		errors.New("Error 1062 (23000): Duplicate entry 'k' for key 'PRIMARY'"),                       // go-sql-driver/mysql
	}
	no := []error{nil, sqlStateErr("23503"), codeErr(19), codeErr(5), errors.New("database is locked"), sql.ErrNoRows}
	for _, err := range yes {
		if !sqlstore.IsUniqueViolation(err) {
			t.Errorf("IsUniqueViolation(%v) = false", err)
		}
	}
	for _, err := range no {
		if sqlstore.IsUniqueViolation(err) {
			t.Errorf("IsUniqueViolation(%v) = true", err)
		}
	}
}

// TestCustomUniqueViolation: Dialect.UniqueViolation replaces the default
// check, for drivers it does not know.
func TestCustomUniqueViolation(t *testing.T) {
	ctx := context.Background()
	d := sqlstore.SQLite
	d.UniqueViolation = func(error) bool { return false } // recognises nothing
	s, err := sqlstore.New(openSQLite(t), d, sqlstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Claim(ctx, []byte("k"), time.Minute); err != nil || f == 0 {
		t.Fatal(f, err)
	}
	if _, err := s.Claim(ctx, []byte("k"), time.Minute); err == nil || !strings.Contains(err.Error(), "UNIQUE") {
		t.Fatalf("duplicate under a check that recognises nothing = %v, want the driver's error", err)
	}
}
