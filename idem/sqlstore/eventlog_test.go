package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/sqlstore"
)

// bank sets up a business table and the event log in one new database of
// backend b.
func bank(t *testing.T, b backend) (*sql.DB, *sqlstore.EventLog) {
	t.Helper()
	ctx := context.Background()
	db := b.open(t)
	for _, q := range []string{
		`CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, version INTEGER NOT NULL)`,
		`CREATE TABLE ledger (account INTEGER NOT NULL, amount INTEGER NOT NULL)`,
		`INSERT INTO account (id, balance, version) VALUES (1, 100, 1)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	l, err := sqlstore.NewEventLog(b.d, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db, l
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// debit is a non-idempotent business write (seed 003's
// "UPDATE … SET col = col - 1") in dialect d: run twice, it debits twice.
func debit(d sqlstore.Dialect, amount int) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, d.Rebind(`UPDATE account SET balance = balance - ? WHERE id = 1`), amount); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO ledger (account, amount) VALUES (1, ?)`), -amount)
		return err
	}
}

// TestInTxFailingBusinessWrite is issue 8's event-log test: a business
// write that fails commits nothing (no ledger row, no balance change, no
// event); the retry then succeeds once; every later repeat is skipped.
func TestInTxFailingBusinessWrite(t *testing.T) { testInTxFailingBusinessWrite(t, sqliteBackend()) }

func testInTxFailingBusinessWrite(t *testing.T, b backend) {
	ctx := context.Background()
	db, l := bank(t, b)
	debit := func(n int) func(context.Context, *sql.Tx) error { return debit(b.d, n) }
	boom := errors.New("ledger service said no")
	err := l.InTx(ctx, db, "debit-7", func(ctx context.Context, tx *sql.Tx) error {
		if err := debit(30)(ctx, tx); err != nil {
			return err
		}
		return boom // fails after writing: everything must roll back
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want the business error", err)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM ledger`); n != 0 {
		t.Fatalf("a failed InTx left %d ledger rows", n)
	}
	if b := count(t, db, `SELECT balance FROM account WHERE id = 1`); b != 100 {
		t.Fatalf("a failed InTx left balance %d", b)
	}
	if ok, _ := l.Exists(ctx, db, "debit-7"); ok {
		t.Fatal("a failed InTx logged its event")
	}
	var runs atomic.Int32
	for range 3 {
		err := l.InTx(ctx, db, "debit-7", func(ctx context.Context, tx *sql.Tx) error {
			runs.Add(1)
			return debit(30)(ctx, tx)
		})
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("business write ran %d times over 3 retries, want 1", runs.Load())
	}
	if n, b := count(t, db, `SELECT COUNT(*) FROM ledger`), count(t, db, `SELECT balance FROM account WHERE id = 1`); n != 1 || b != 70 {
		t.Fatalf("after the retries: %d ledger rows, balance %d; want 1, 70", n, b)
	}
	if ok, _ := l.Exists(ctx, db, "debit-7"); !ok {
		t.Fatal("event not logged")
	}
	// A panicking business function rolls back too.
	func() {
		defer func() { recover() }()
		l.InTx(ctx, db, "debit-8", func(ctx context.Context, tx *sql.Tx) error {
			debit(1)(ctx, tx)
			panic("bug")
		})
	}()
	if n := count(t, db, `SELECT COUNT(*) FROM ledger`); n != 1 {
		t.Fatalf("a panicking InTx left %d ledger rows", n)
	}
	// Old events can be purged.
	if n, err := l.Purge(ctx, db, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
}

// TestInTxConcurrent: duplicates of one event racing through InTx debit
// once; the others wait on the event's key and return success.
func TestInTxConcurrent(t *testing.T) { testInTxConcurrent(t, sqliteBackend(), 100) }

func testInTxConcurrent(t *testing.T, b backend, dups int) {
	ctx := context.Background()
	db, l := bank(t, b)
	var runs atomic.Int32
	errs := make(chan error, dups)
	start := make(chan struct{})
	for range dups {
		go func() {
			<-start
			errs <- l.InTx(ctx, db, "debit-race", func(ctx context.Context, tx *sql.Tx) error {
				runs.Add(1)
				return debit(b.d, 10)(ctx, tx)
			})
		}()
	}
	close(start)
	for range dups {
		if err := <-errs; err != nil {
			t.Fatalf("InTx: %v", err)
		}
	}
	if n, bal := count(t, db, `SELECT COUNT(*) FROM ledger`), count(t, db, `SELECT balance FROM account WHERE id = 1`); n != 1 || bal != 90 || runs.Load() != 1 {
		t.Fatalf("%d duplicates: %d ledger rows, balance %d, fn ran %d times; want 1, 90, 1", dups, n, bal, runs.Load())
	}
}

func TestInTxPackageFunc(t *testing.T) { testInTxPackageFunc(t, sqliteBackend()) }

func testInTxPackageFunc(t *testing.T, b backend) {
	ctx := context.Background()
	db, _ := bank(t, b) // created DefaultEventTable
	debit := func(n int) func(context.Context, *sql.Tx) error { return debit(b.d, n) }
	for range 2 {
		if err := sqlstore.InTx(ctx, db, "e", debit(5)); err != nil {
			t.Fatal(err)
		}
	}
	if bal := count(t, db, `SELECT balance FROM account WHERE id = 1`); bal != 95 {
		t.Fatalf("balance %d, want 95", bal)
	}
	if err := sqlstore.InTx(ctx, db, "", debit(5)); !errors.Is(err, idem.ErrKey) {
		t.Fatalf("empty event: %v", err)
	}
	if err := sqlstore.InTx(ctx, db, "f", nil); !errors.Is(err, sqlstore.ErrInvalidConfig) {
		t.Fatalf("nil fn = %v, want ErrInvalidConfig", err)
	}
}

// TestVersioned is seed 003's CAS: the update applies for the version read
// and bumps it; a repeat of the same update (same version) changes
// nothing and reports ErrConflict.
func TestVersioned(t *testing.T) { testVersioned(t, sqliteBackend()) }

func testVersioned(t *testing.T, b backend) {
	ctx := context.Background()
	db, _ := bank(t, b)
	v := sqlstore.Versioned{Dialect: b.d, Table: "account"}
	if err := v.Update(ctx, db, "balance = balance - ?", 1, 1, 25); err != nil {
		t.Fatal(err)
	}
	if err := v.Update(ctx, db, "balance = balance - ?", 1, 1, 25); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("repeat with the old version = %v, want ErrConflict", err)
	}
	if bal, ver := count(t, db, `SELECT balance FROM account`), count(t, db, `SELECT version FROM account`); bal != 75 || ver != 2 {
		t.Fatalf("balance %d version %d, want 75, 2", bal, ver)
	}
	if err := v.Update(ctx, db, "balance = ?", 99, 1, 0); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("missing row = %v, want ErrConflict", err)
	}
	// Concurrent writers that read the same version: one wins.
	var wins atomic.Int32
	done := make(chan struct{})
	for range 50 {
		go func() {
			defer func() { done <- struct{}{} }()
			err := v.Update(ctx, db, "balance = balance - ?", 1, 2, 1)
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, idem.ErrConflict) {
				t.Error(err)
			}
		}()
	}
	for range 50 {
		<-done
	}
	if wins.Load() != 1 || count(t, db, `SELECT balance FROM account`) != 74 {
		t.Fatalf("%d concurrent CAS winners", wins.Load())
	}
	// Inside a transaction, with other column names.
	if _, err := db.Exec(`CREATE TABLE doc (name VARCHAR(16) PRIMARY KEY, body VARCHAR(16), rev INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Exec(`INSERT INTO doc VALUES ('a', 'x', 7)`)
	tx, _ := db.Begin()
	dv := sqlstore.Versioned{Dialect: b.d, Table: "doc", IDColumn: "name", VersionColumn: "rev"}
	if err := dv.Update(ctx, tx, "body = ?", "a", 7, "y"); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if rev := count(t, db, `SELECT rev FROM doc`); rev != 8 {
		t.Fatalf("rev = %d", rev)
	}
	for _, bad := range []sqlstore.Versioned{
		{Table: "account; --"}, {Table: "account", IDColumn: "id=id"}, {Table: "account", VersionColumn: "1v"},
	} {
		if err := bad.Update(ctx, db, "balance = 0", 1, 1); !errors.Is(err, sqlstore.ErrDialect) {
			t.Errorf("%+v: %v, want ErrDialect", bad, err)
		}
	}
	if err := v.Update(ctx, db, "", 1, 1); !errors.Is(err, sqlstore.ErrDialect) {
		t.Errorf("empty SET: %v", err)
	}
}
