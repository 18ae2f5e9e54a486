package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/readretry/readretry/idem"
)

// DefaultEventTable is the table of the EventLog that InTx uses.
const DefaultEventTable = "idem_event"

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn implement it.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier runs a query returning at most one row: *sql.DB, *sql.Tx and
// *sql.Conn implement it.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// EventLog is the local-transaction event log of seed 001 (本地事务日志表,
// SPEC I2): a table of the events (request IDs) whose business writes have
// committed, written in the same transaction as those writes. A retried
// request whose event is logged skips its writes; one whose first attempt
// rolled back finds no event and writes again. Unlike a separate dedup
// store there is no window: the event row and the business rows commit or
// roll back together.
//
//	event      BLOB/BYTEA/VARBINARY(255) NOT NULL PRIMARY KEY  -- Dialect.KeyType
//	created_at BIGINT NOT NULL  -- Unix milliseconds, for Purge
//
// The table must live in the database of the business tables. An EventLog
// is immutable and safe for concurrent use.
type EventLog struct {
	d     Dialect
	table string
	clock func() time.Time // stamps created_at

	qExists, qInsert, qPurge string
}

// NewEventLog returns the event log in table (a plain identifier; "" means
// DefaultEventTable) for dialect d. Errors wrap ErrDialect (a bad name, or
// a dialect without KeyType).
func NewEventLog(d Dialect, table string) (*EventLog, error) {
	if table == "" {
		table = DefaultEventTable
	}
	if err := checkIdent("table", table); err != nil {
		return nil, err
	}
	if d.KeyType == "" {
		return nil, fmt.Errorf("%w: dialect %q without KeyType", ErrDialect, d.Name)
	}
	return &EventLog{
		d:       d,
		table:   table,
		clock:   time.Now,
		qExists: d.Rebind("SELECT 1 FROM " + table + " WHERE event = ?"),
		qInsert: d.Rebind("INSERT INTO " + table + " (event, created_at) VALUES (?, ?)"),
		qPurge:  d.Rebind("DELETE FROM " + table + " WHERE created_at < ?"),
	}, nil
}

// CreateTable creates the event table if it does not exist.
func (l *EventLog) CreateTable(ctx context.Context, x Execer) error {
	_, err := x.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+l.table+` (
	event `+l.d.KeyType+` NOT NULL PRIMARY KEY,
	created_at BIGINT NOT NULL
)`)
	if err != nil {
		return fmt.Errorf("sqlstore: create table %s: %w", l.table, err)
	}
	return nil
}

// Exists reports whether event is logged (seed 001's ExistEvent). Inside a
// transaction pass the *sql.Tx.
func (l *EventLog) Exists(ctx context.Context, q Querier, event string) (bool, error) {
	var one int
	err := q.QueryRowContext(ctx, l.qExists, []byte(event)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("sqlstore: event exists: %w", err)
	}
	return true, nil
}

// InTx runs fn at most once per event, atomically with logging the event
// (seed 001's TransactionDecorator):
//
//   - if event is logged, fn is skipped and InTx returns nil (the empty
//     compensation of the seed: the writes already happened);
//   - otherwise InTx begins a transaction on db, inserts the event row,
//     calls fn with the transaction, and commits: the business writes fn
//     makes through tx and the event row become visible together;
//   - if fn returns an error (or panics), everything is rolled back — no
//     business row, no event row — and fn's error is returned, so a retry
//     runs fn again;
//   - if a concurrent InTx for the same event committed first, the insert
//     hits the primary key, the transaction rolls back without calling fn
//     (or, when the other was still open, after waiting for it on the
//     index), and InTx returns nil;
//   - if the database kills the event insert to break a deadlock or a
//     serialization conflict (IsRetryable: SQLSTATE 40001, 40P01, MySQL
//     1213 — InnoDB does so to duplicates waiting behind an InTx that rolls
//     back), nothing has run yet: InTx checks whether the event is now
//     logged (then returns nil) and otherwise tries again, at most
//     MaxInTxRetries transactions in all (SPEC I5 round 3).
//
// The event row is inserted before fn rather than after (the seed's order)
// so that a concurrent duplicate waits on the event's index entry instead
// of doing its business writes only to roll them back. fn must do all its
// writes through tx and must not commit or roll it back. event must be 1 to
// 255 bytes (idem.ErrKey otherwise).
func (l *EventLog) InTx(ctx context.Context, db *sql.DB, event string, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if len(event) == 0 || len(event) > idem.MaxKeyLen {
		return idem.ErrKey
	}
	if fn == nil {
		return fmt.Errorf("%w: InTx with a nil fn", ErrInvalidConfig)
	}
	for attempt := 0; ; attempt++ {
		// The cheap check first: a repeat after commit does not open a
		// write transaction at all; after a deadlock it tells whether
		// the transaction that won has logged the event meanwhile.
		if done, err := l.Exists(ctx, db, event); err != nil || done {
			return err
		}
		err := l.once(ctx, db, event, fn)
		if err == nil || !errors.Is(err, errRetryInsert) {
			return err
		}
		if attempt+1 >= MaxInTxRetries {
			return err
		}
		// A short pause lets the winner's transaction commit first.
		select {
		case <-ctx.Done():
			return fmt.Errorf("sqlstore: InTx: %w: %w", ctx.Err(), err)
		case <-time.After(time.Duration(attempt+1) * time.Millisecond):
		}
	}
}

// MaxInTxRetries bounds the transactions InTx begins for one call when the
// event insert keeps being chosen as a deadlock or serialization victim
// (SPEC I5 round 3): after that many, the error (wrapping the driver's) is
// returned.
const MaxInTxRetries = 5

// errRetryInsert marks a serialization failure or deadlock at the event
// insert: the transaction was rolled back before fn ran, so InTx may try
// again.
var errRetryInsert = errors.New("sqlstore: event insert chosen as deadlock or serialization victim")

// once is one transaction of InTx: begin, insert the event, fn, commit.
func (l *EventLog) once(ctx context.Context, db *sql.DB, event string, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: InTx begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, l.qInsert, []byte(event), l.clock().UnixMilli()); err != nil {
		switch {
		case l.d.isUnique(err):
			return nil // logged by a concurrent InTx that committed
		case IsRetryable(err):
			return fmt.Errorf("%w: %w", errRetryInsert, err)
		}
		return fmt.Errorf("sqlstore: InTx log event: %w", err)
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		if l.d.isUnique(err) {
			return nil // deferred constraint: the other transaction won
		}
		return fmt.Errorf("sqlstore: InTx commit: %w", err)
	}
	committed = true
	return nil
}

// IsRetryable reports whether err (or an error it wraps) is a transaction
// the database rolled back to break a conflict, which may succeed when
// run again: SQLSTATE 40001 (serialization failure; MySQL and MariaDB
// also report deadlocks so) or 40P01 (PostgreSQL deadlock) from an error
// with a SQLState() string method (pgx), or MySQL error 1213 (deadlock)
// or 1205 (lock wait timeout) in go-sql-driver/mysql's message.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		switch state.SQLState() {
		case "40001", "40P01":
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "Error 1213") || strings.Contains(msg, "Error 1205") ||
		strings.Contains(msg, "SQLSTATE 40001") || strings.Contains(msg, "SQLSTATE 40P01")
}

// Purge deletes the events logged before before and returns how many. Keep
// events for longer than any client retries a request.
func (l *EventLog) Purge(ctx context.Context, x Execer, before time.Time) (int64, error) {
	res, err := x.ExecContext(ctx, l.qPurge, before.UnixMilli())
	return rowsAffected("purge events", res, err)
}

// defaultLogs caches the EventLog of DefaultEventTable per dialect name.
var defaultLogs sync.Map // string → *EventLog

// InTx is EventLog.InTx on DefaultEventTable in db's dialect (DialectOf):
// fn runs at most once per event, and its writes through tx commit together
// with the event row. Create the table once with
// NewEventLog(d, "").CreateTable. Errors: those of EventLog.InTx, and
// ErrDialect for a driver DialectOf does not know.
func InTx(ctx context.Context, db *sql.DB, event string, fn func(ctx context.Context, tx *sql.Tx) error) error {
	d, err := DialectOf(db)
	if err != nil {
		return err
	}
	l, ok := defaultLogs.Load(d.Name)
	if !ok {
		nl, err := NewEventLog(d, DefaultEventTable)
		if err != nil {
			return err
		}
		l, _ = defaultLogs.LoadOrStore(d.Name, nl)
	}
	return l.(*EventLog).InTx(ctx, db, event, fn)
}

// Versioned is seed 003's versioned update (SPEC I4): an UPDATE that
// applies only if the row still has the version the caller read, and bumps
// it, so that a repeated or concurrent update of a stale read changes
// nothing:
//
//	UPDATE <Table> SET <set>, <Version> = <Version> + 1
//	WHERE <ID> = ? AND <Version> = ?
//
// The zero ID and Version columns mean "id" and "version". A Versioned is
// a plain value; its fields must be plain identifiers.
type Versioned struct {
	Dialect       Dialect
	Table         string
	IDColumn      string
	VersionColumn string
}

// Update runs the versioned UPDATE through x (a *sql.DB or, inside a
// transaction, the *sql.Tx): set is the SET list with ? placeholders (e.g.
// "balance = balance - ?"; trusted SQL, never user input), args its
// arguments, id the row's key and version the version the caller read.
// It returns nil when the row was updated (its version is now version+1)
// and idem.ErrConflict when no row matched — the version moved on (a
// repeat, or a concurrent writer) or no such row exists. Errors wrap
// ErrDialect for bad identifiers or an empty set.
func (v Versioned) Update(ctx context.Context, x Execer, set string, id any, version int64, args ...any) error {
	idCol, verCol := v.IDColumn, v.VersionColumn
	if idCol == "" {
		idCol = "id"
	}
	if verCol == "" {
		verCol = "version"
	}
	for _, c := range [...]struct{ what, name string }{{"table", v.Table}, {"id column", idCol}, {"version column", verCol}} {
		if err := checkIdent(c.what, c.name); err != nil {
			return err
		}
	}
	if set == "" {
		return fmt.Errorf("%w: empty SET list", ErrDialect)
	}
	q := v.Dialect.Rebind("UPDATE " + v.Table + " SET " + set + ", " + verCol + " = " + verCol +
		" + 1 WHERE " + idCol + " = ? AND " + verCol + " = ?")
	res, err := x.ExecContext(ctx, q, append(args[:len(args):len(args)], id, version)...)
	n, err := rowsAffected("versioned update of "+v.Table, res, err)
	if err != nil {
		return err
	}
	if n == 0 {
		return idem.ErrConflict
	}
	return nil
}
