package sqlstore_test

// The store, the event log and the versioned update on real servers
// (issue 16 section 1; issue 17 item 13): PostgreSQL through
// jackc/pgx/v5's database/sql driver, MariaDB through
// go-sql-driver/mysql, both started once for the package by
// internal/sqltest.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/storetest"
	"github.com/readretry/readretry/idem/sqlstore"
)

// serverStore is a store on a new database of b, its table created.
func serverStore(t *testing.T, b backend, c sqlstore.Config) (*sqlstore.Store, *sql.DB) {
	t.Helper()
	db := b.open(t)
	return storeOn(t, db, b.d.Name, c), db
}

// conformance runs the store suite on b — 1,000 goroutines claiming one ID
// get one winner, decided by the primary key — on one table.
func conformance(t *testing.T, b backend) {
	s, _ := serverStore(t, b, sqlstore.Config{})
	storetest.Run(t, func(*testing.T) idem.Store { return s })
}

// eventLog runs the event-log and versioned-update tests on b, with 1,000
// concurrent duplicates of one event.
func eventLog(t *testing.T, b backend) {
	t.Run("FailingBusinessWrite", func(t *testing.T) { testInTxFailingBusinessWrite(t, b) })
	t.Run("Concurrent", func(t *testing.T) { testInTxConcurrent(t, b, 1000) })
	t.Run("PackageFunc", func(t *testing.T) { testInTxPackageFunc(t, b) })
	t.Run("Versioned", func(t *testing.T) { testVersioned(t, b) })
	t.Run("KilledTx", func(t *testing.T) { testKilledTx(t, b) })
}

// testKilledTx: the server ends a transaction's connection after the
// business write and the event row were written but before the commit (a
// crash, a failover, a DBA's kill). Neither may survive, and the retry
// then runs the write exactly once.
func testKilledTx(t *testing.T, b backend) {
	ctx := context.Background()
	db, l := bank(t, b)
	err := l.InTx(ctx, db, "debit-killed", func(ctx context.Context, tx *sql.Tx) error {
		if err := debit(b.d, 30)(ctx, tx); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRowContext(ctx, b.connID).Scan(&id); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, b.d.Rebind(b.kill), id); err != nil {
			return fmt.Errorf("kill: %w", err)
		}
		return nil // InTx now commits on a dead connection
	})
	if err == nil {
		t.Fatal("InTx on a killed connection reported success")
	}
	if n, bal := count(t, db, `SELECT COUNT(*) FROM ledger`), count(t, db, `SELECT balance FROM account WHERE id = 1`); n != 0 || bal != 100 {
		t.Fatalf("killed transaction left %d ledger rows, balance %d; want 0, 100", n, bal)
	}
	if ok, err := l.Exists(ctx, db, "debit-killed"); ok || err != nil {
		t.Fatalf("killed transaction left its event: %v %v", ok, err)
	}
	for range 2 {
		if err := l.InTx(ctx, db, "debit-killed", debit(b.d, 30)); err != nil {
			t.Fatal(err)
		}
	}
	if n, bal := count(t, db, `SELECT COUNT(*) FROM ledger`), count(t, db, `SELECT balance FROM account WHERE id = 1`); n != 1 || bal != 70 {
		t.Fatalf("after the retries: %d ledger rows, balance %d; want 1, 70", n, bal)
	}
}

// uniqueViolation: a second insert of one key gets the server's own
// duplicate-key error, which IsUniqueViolation recognises (through the
// driver's error type) and errors.As reaches with the driver's code.
func uniqueViolation(t *testing.T, b backend, code func(error) string, want string) {
	ctx := context.Background()
	db := b.open(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE u (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO u VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, `INSERT INTO u VALUES (1)`)
	if !sqlstore.IsUniqueViolation(err) || code(err) != want {
		t.Fatalf("duplicate insert: %v (code %q); want a unique violation %s", err, code(err), want)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO nosuchtable VALUES (1)`); err == nil || sqlstore.IsUniqueViolation(err) {
		t.Fatalf("another error taken for a unique violation: %v", err)
	}
	// Through the store: the primary key decides, the claim is a repeat.
	s, _ := serverStore(t, b, sqlstore.Config{Table: "dedup_u"})
	if f, err := s.Claim(ctx, []byte("k"), time.Minute); err != nil || f == 0 {
		t.Fatal(f, err)
	}
	if f, err := s.Claim(ctx, []byte("k"), time.Minute); err != nil || f != 0 {
		t.Fatalf("repeat claim = %v, %v", f, err)
	}
}

func TestPostgresConformance(t *testing.T) { conformance(t, postgresBackend(t)) }

func TestPostgresEventLog(t *testing.T) { eventLog(t, postgresBackend(t)) }

// TestPostgresUniqueViolation is a real SQLSTATE 23505.
func TestPostgresUniqueViolation(t *testing.T) {
	uniqueViolation(t, postgresBackend(t), func(err error) string {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return pe.Code
		}
		return ""
	}, "23505")
}

func TestMariaDBConformance(t *testing.T) { conformance(t, mariadbBackend(t)) }

func TestMariaDBEventLog(t *testing.T) { eventLog(t, mariadbBackend(t)) }

// TestMariaDBUniqueViolation is a real error 1062.
func TestMariaDBUniqueViolation(t *testing.T) {
	uniqueViolation(t, mariadbBackend(t), func(err error) string {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return fmt.Sprint(me.Number)
		}
		return ""
	}, "1062")
}

// TestMariaDBCollation is issue 17 item 13: MariaDB's default collations
// fold case and accents, so in a VARCHAR key column "abc", "ABC" and "ábc"
// are one key — across tenants when the scope is a name. The server here
// does fold them (the hazard is real: a VARCHAR primary key refuses the
// second and third rows), while the store's VARBINARY keys keep all of
// them, and the tenants "Alice" and "alice", apart.
func TestMariaDBCollation(t *testing.T) {
	ctx := context.Background()
	b := mariadbBackend(t)
	db := b.open(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE folded (id VARCHAR(255) PRIMARY KEY) DEFAULT CHARSET utf8mb4`); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, k := range []string{"abc", "ABC", "ábc"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO folded VALUES (?)`, k); sqlstore.IsUniqueViolation(err) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 2 {
		t.Fatalf("the server's default collation merged %d of 3 keys; the test assumes it folds case and accents", refused)
	}
	s, _ := serverStore(t, b, sqlstore.Config{})
	for i, k := range [][]byte{[]byte("abc"), []byte("ABC"), []byte("ábc"), mustScoped(t, "Alice", "k1"), mustScoped(t, "alice", "k1")} {
		if f, err := s.Claim(ctx, k, time.Minute); err != nil || f == 0 {
			t.Fatalf("key %d %q shares a row with an earlier one: %v, %v", i, k, f, err)
		}
	}
}

func mustScoped(t *testing.T, scope, key string) []byte {
	t.Helper()
	k, err := idem.ScopedKey(nil, scope, key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
