package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/idem/sqlstore"
)

// TestMariaDBInTxDeadlock is the mysqljs#2575 kind on a real MariaDB: two
// duplicates of an event wait behind a first InTx that then rolls back;
// InnoDB grants both a shared lock on the gap and kills one with error
// 1213 (SQLSTATE 40001) when both want to insert. InTx returned it, and
// call.Classify does not retry it, so the request failed although its
// event was done once. InTx now re-checks the event and tries again: both
// duplicates succeed, the business write runs once per event, and the
// server's deadlock counter shows the scenario was reproduced.
func TestMariaDBInTxDeadlock(t *testing.T) {
	ctx := context.Background()
	b := mariadbBackend(t)
	db, l := bank(t, b)
	deadlocks := func() int {
		var name string
		var n int
		if err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'`).Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deadlocks()
	const rounds = 8
	var runs atomic.Int32
	counted := func(ctx context.Context, tx *sql.Tx) error {
		runs.Add(1)
		return debit(b.d, 1)(ctx, tx)
	}
	errFirst := errors.New("first attempt fails")
	for r := range rounds {
		event := "pay-" + strconv.Itoa(r)
		started := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[0] = l.InTx(ctx, db, event, func(context.Context, *sql.Tx) error {
				close(started)
				// Hold the event's index entry until both duplicates
				// wait on it (they cannot finish before we return).
				time.Sleep(150 * time.Millisecond)
				return errFirst
			})
		}()
		<-started
		for i := 1; i <= 2; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = l.InTx(ctx, db, event, counted) }()
		}
		wg.Wait()
		if !errors.Is(errs[0], errFirst) || errs[1] != nil || errs[2] != nil {
			t.Fatalf("round %d: first %v, duplicates %v and %v; want the first's error and two successes", r, errs[0], errs[1], errs[2])
		}
	}
	if n, bal := count(t, db, `SELECT COUNT(*) FROM ledger`), count(t, db, `SELECT balance FROM account WHERE id = 1`); n != rounds || bal != 100-rounds || runs.Load() != rounds {
		t.Fatalf("%d ledger rows, balance %d, %d runs; want %d, %d, %d (once per event)", n, bal, runs.Load(), rounds, 100-rounds, rounds)
	}
	if d := deadlocks() - before; d == 0 {
		t.Fatalf("no deadlock in %d rounds: the test did not reproduce the scenario", rounds)
	}
}

// TestIsRetryable: the codes of a deadlock or serialization failure on
// each server, and nothing else.
func TestIsRetryable(t *testing.T) {
	for err, want := range map[error]bool{
		sqlStateErr("40001"): true,
		sqlStateErr("40P01"): true,
		sqlStateErr("23505"): false,
		errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction"): true,
		errors.New("Error 1062 (23000): Duplicate entry"):                                                    false,
		nil: false,
	} {
		if got := sqlstore.IsRetryable(err); got != want {
			t.Errorf("IsRetryable(%v) = %v, want %v", err, got, want)
		}
	}
}
