// Package sqlstore keeps idempotency in the database, over database/sql
// (SPEC I2, I4; seeds 001 and 003):
//
//   - [Store], an idem.Store on a dedup table whose primary key is the
//     request ID: a claim is an INSERT, and an insert that hits the unique
//     index means "seen before" (seed 003's 防重表);
//   - [EventLog] and [InTx], the local-transaction event log of seed 001:
//     the business writes and the event row commit in one transaction, and
//     an event already logged skips the business writes and reports
//     success;
//   - [Versioned], seed 003's CAS update: `UPDATE … SET …, version =
//     version + 1 WHERE id = ? AND version = ?`, no row → idem.ErrConflict.
//
// The package imports no driver. Its tests run every store operation on
// SQLite (modernc.org/sqlite, pure Go), on a real PostgreSQL server through
// jackc/pgx/v5's stdlib driver, and on a real MariaDB through
// go-sql-driver/mysql: a [Dialect] picks the placeholders ($1 or ?), the
// column types and the unique-violation check (error codes where the
// driver exposes them, messages otherwise; see IsUniqueViolation). Keys
// are stored in binary columns (Dialect.KeyType) and compared byte for
// byte on every database. Table and column names are checked to be plain
// identifiers before they are written into a query.
//
// # Time
//
// The dedup table stores expiry as Unix milliseconds computed from the
// store's clock (the application's, not the database's), so every process
// sharing a table should have its clock synchronised (NTP) well within the
// ttls used; a clock ahead of the others expires their claims early. An
// expired row is invisible at once and overwritten by the next claim of
// its key; [Store.Purge] deletes the rest, in the background or from cron.
package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/internal/fence"
)

// DefaultTable is the dedup table of a store built with an empty
// Config.Table.
const DefaultTable = "idem_dedup"

// DefaultMaxResult is the longest result Complete stores, in bytes, when
// Config.MaxResult is 0.
const DefaultMaxResult = idem.DefaultMaxResult

// ErrInvalidConfig is wrapped by New for an invalid Config or a nil *sql.DB, and
// by InTx for a nil function.
var ErrInvalidConfig = errors.New("sqlstore: invalid config")

// Config describes a [Store]. The zero value is usable.
type Config struct {
	// Table is the dedup table's name, a plain identifier (optionally
	// schema.table); "" means DefaultTable.
	Table string
	// MaxResult is the longest result Complete accepts, in bytes; 0 means
	// DefaultMaxResult.
	MaxResult int
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// ScopeQuota is the most live rows — claims, pending or done, and
	// tokens — one scope (idem.ScopedKey, non-empty scope) may hold; 0
	// means DefaultScopeQuota, a negative value no quota. A Claim or
	// Issue over it fails with idem.ErrQuota (Middleware: 429). Rows
	// without a scope, or with the empty one (idem.GlobalScope), are not
	// counted (SPEC I5 round 3). The check is exact under concurrency
	// (the scope's counter row is locked by the claim; see CreateTable).
	// Stores sharing a table should use the same ScopeQuota and
	// ScopeMaxBytes: on MySQL the limits live in the counter row, set by
	// the last store that found the scope full.
	ScopeQuota int
	// ScopeMaxBytes is the most bytes of stored results one scope may
	// hold; 0 means DefaultScopeMaxBytes. A Claim or Issue while the scope
	// holds that much fails with idem.ErrQuota; the claims it has running
	// may still complete, so a scope can pass it by at most its running
	// claims × MaxResult. Ignored when ScopeQuota is negative.
	ScopeMaxBytes int
	// CleanupTimeout bounds how long a Claim whose reply was lost spends
	// deleting the claim (see Store.Claim); 0 means
	// DefaultCleanupTimeout.
	CleanupTimeout time.Duration
}

// Defaults of Config. With them one scope holds at most 10,000 rows and
// 8 MiB of results (plus what its running claims complete), about 8 MiB
// + 10,000 × (key twice, in the row and the primary key, and ~60 bytes of
// columns) of table and index — about 10 MiB with 36-byte keys and
// 16-byte scopes — and one counter row.
const (
	DefaultScopeQuota     = 10_000
	DefaultScopeMaxBytes  = 8 << 20
	DefaultCleanupTimeout = 5 * time.Second
)

// Row kinds and states. A claim row is pending or done; tokens have their
// own kind, so a token and a request ID with the same bytes do not clash.
const (
	kindClaim = 1
	kindToken = 2

	statePending = 1
	stateDone    = 2
)

// Store is an idem.Store on a SQL dedup table:
//
//	id         BLOB/BYTEA/VARBINARY(255) NOT NULL  -- the request ID or token
//	kind       SMALLINT     NOT NULL  -- 1 claim, 2 token
//	state      SMALLINT     NOT NULL  -- 1 pending, 2 done
//	fence      BIGINT       NOT NULL
//	expires_at BIGINT       NOT NULL  -- Unix milliseconds
//	result     BLOB/BYTEA/LONGBLOB
//	scope      like id, NULL      -- the key's scope (quota), if any
//	size       BIGINT NOT NULL DEFAULT 0  -- length of result
//	PRIMARY KEY (id, kind)
//
// and the per-scope counter table <table>_scopes its triggers keep (see
// CreateTable), which a scoped claim reads by primary key to check the
// quotas (SPEC I5 round 3). Each method is one or two statements in
// autocommit mode, the unique index decides every race, and a claim —
// scoped or not — is one statement, prepared once per connection and
// reused (one round trip; Close releases the statements). On SQLite the
// dedup table is WITHOUT ROWID, so a claim writes one page of it (see
// CreateTable). Keys are sent as bytes, so any key of 1 to
// idem.MaxKeyLen bytes works on every database. Safe for concurrent use.
type Store struct {
	db        *sql.DB
	d         Dialect
	table     string
	maxResult int
	clock     func() time.Time

	cleanup  time.Duration
	quota    int // rows per scope; < 0: no quota
	maxBytes int // result bytes per scope

	qInsert, qInsertScoped, qEnsureScope, qPurgeScope, qDeleteExpired, qComplete, qRelease, qAbandon, qExtend, qHeld, qLookup, qConsume, qPurge string

	fences *fence.Source

	// prepared holds the per-request statements, prepared on first use
	// (see exec).
	prepared [nPrepared]atomic.Pointer[sql.Stmt]
}

// Indexes of Store.prepared: the statements a request runs.
const (
	pInsert = iota
	pInsertScoped
	pDeleteExpired
	pComplete
	pRelease
	pExtend
	pHeld
	pLookup
	pConsume
	nPrepared
)

// stmt returns the prepared statement i of query q, preparing it on
// first use. A prepared statement costs the database no parsing or
// planning per call, and on MySQL (go-sql-driver/mysql without
// interpolateParams) it saves a round trip per call: an Exec with
// arguments is otherwise a COM_STMT_PREPARE, an execute and a close. A
// failed prepare (the table missing, ctx ended) is not kept: the next
// call tries again.
func (s *Store) stmt(ctx context.Context, i int, q string) (*sql.Stmt, error) {
	if st := s.prepared[i].Load(); st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if !s.prepared[i].CompareAndSwap(nil, st) {
		st.Close()
		return s.prepared[i].Load(), nil
	}
	return st, nil
}

// exec runs the prepared statement i of query q with args.
func (s *Store) exec(ctx context.Context, i int, q string, args ...any) (sql.Result, error) {
	st, err := s.stmt(ctx, i, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// Close releases the statements the store has prepared (on every
// connection of the pool that prepared them). The store stays usable: a
// later call prepares them again. Call it with no call of the store in
// flight, before closing the *sql.DB (whose Close releases them too). It
// returns the first error of the statements' Close. (SPEC I5 round 3: a
// claim is one prepared statement, one round trip.)
func (s *Store) Close() error {
	var first error
	for i := range s.prepared {
		if st := s.prepared[i].Swap(nil); st != nil {
			if err := st.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// New returns a store on db's table c.Table in dialect d. It does not touch
// the database; call CreateTable once (or create the table by migration).
// Errors wrap ErrDialect for a bad table name, ErrInvalidConfig otherwise.
func New(db *sql.DB, d Dialect, c Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidConfig)
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if err := checkIdent("table", c.Table); err != nil {
		return nil, err
	}
	if c.MaxResult < 0 || c.CleanupTimeout < 0 {
		return nil, fmt.Errorf("%w: negative MaxResult %d or CleanupTimeout %v", ErrInvalidConfig, c.MaxResult, c.CleanupTimeout)
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	if c.ScopeMaxBytes < 0 {
		return nil, fmt.Errorf("%w: negative ScopeMaxBytes %d", ErrInvalidConfig, c.ScopeMaxBytes)
	}
	if c.ScopeQuota == 0 {
		c.ScopeQuota = DefaultScopeQuota
	}
	if c.ScopeMaxBytes == 0 {
		c.ScopeMaxBytes = DefaultScopeMaxBytes
	}
	if d.KeyType == "" || d.BlobType == "" {
		return nil, fmt.Errorf("%w: dialect %q without KeyType or BlobType", ErrDialect, d.Name)
	}
	if c.MaxResult == 0 {
		c.MaxResult = DefaultMaxResult
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	t := c.Table
	s := &Store{
		db: db, d: d, table: t, maxResult: c.MaxResult, clock: c.Clock, cleanup: c.CleanupTimeout,
		quota: c.ScopeQuota, maxBytes: c.ScopeMaxBytes,
		fences: fence.New(),

		qInsert:        d.Rebind("INSERT INTO " + t + " (id, kind, state, fence, expires_at) VALUES (?, ?, ?, ?, ?)"),
		qInsertScoped:  d.Rebind(scopedInsert(d, t, c.ScopeQuota, c.ScopeMaxBytes)),
		qEnsureScope:   d.Rebind(ensureScope(d, t)),
		qPurgeScope:    d.Rebind("DELETE FROM " + t + " WHERE id >= ? AND id < ? AND scope = ? AND expires_at <= ?"),
		qDeleteExpired: d.Rebind("DELETE FROM " + t + " WHERE id = ? AND kind = ? AND expires_at <= ?"),
		qComplete:      d.Rebind("UPDATE " + t + " SET state = ?, result = ?, size = ?, expires_at = ? WHERE id = ? AND kind = ? AND fence = ? AND expires_at > ?"),
		qRelease:       d.Rebind("DELETE FROM " + t + " WHERE id = ? AND kind = ? AND fence = ? AND expires_at > ?"),
		qAbandon:       d.Rebind("DELETE FROM " + t + " WHERE id = ? AND kind = ? AND fence = ?"),
		qExtend: d.Rebind("UPDATE " + t + " SET expires_at = CASE WHEN expires_at < ? THEN ? ELSE expires_at END" +
			" WHERE id = ? AND kind = ? AND state = ? AND fence = ? AND expires_at > ?"),
		qHeld:    d.Rebind("SELECT state FROM " + t + " WHERE id = ? AND kind = ? AND fence = ? AND expires_at > ?"),
		qLookup:  d.Rebind("SELECT state, result FROM " + t + " WHERE id = ? AND kind = ? AND expires_at > ?"),
		qConsume: d.Rebind("DELETE FROM " + t + " WHERE id = ? AND kind = ? AND expires_at > ?"),
		qPurge:   d.Rebind("DELETE FROM " + t + " WHERE expires_at <= ?"),
	}
	return s, nil
}

// scopedInsert is the claim of a scoped key (? placeholders), one
// statement that checks the scope's counter row (<table>_scopes, see
// CreateTable) by its primary key — whatever the scope holds — adds the
// row to it, and inserts nothing when the scope's rows are at the quota or
// their results at the byte quota (SPEC I5 round 3). Each dialect does it
// with what it has:
//
//   - PostgreSQL: a data-modifying CTE, `WITH c AS (UPDATE <table>_scopes
//     SET entries = entries + 1 WHERE scope = ? AND entries < quota AND
//     bytes < maxBytes RETURNING scope) INSERT … SELECT …, c.scope FROM
//     c`; parameters: scope, id, kind, fence, expiry. The UPDATE locks the
//     counter row, so concurrent claims of a scope queue on it and each
//     re-checks the count the one before it left: the quota is exact. A
//     unique violation of the INSERT undoes the UPDATE with the statement.
//   - SQLite: `INSERT … SELECT ?, ?, …, scope FROM <table>_scopes WHERE
//     scope = ? AND entries < quota AND bytes < maxBytes`; parameters: id,
//     kind, fence, expiry, scope. The AFTER INSERT trigger counts the row.
//     SQLite runs one writer at a time, so the check is exact too.
//   - MySQL refuses a statement whose trigger writes a table the statement
//     reads (error 1442), so the claim is the plain INSERT of the row and
//     its BEFORE INSERT trigger does the counted UPDATE, on limits kept in
//     the counter row (max_entries, max_bytes, set by ensureScope),
//     raising quotaSignal when the row is missing or full. The UPDATE's
//     row lock makes it exact. Parameters: id, kind, fence, expiry, scope.
//
// The row is always pending (Claim and Issue insert pending rows); the
// state and the limits are written into the statement as numbers, and the
// scope is sent once: every parameter costs its encoding and binding on
// each call, which on PostgreSQL measured about 5% of a claim
// (BenchmarkSQLScopedClaim).
//
// When it inserts nothing (or signals) the scope has no counter row yet or
// is full; see insertScoped.
func scopedInsert(d Dialect, t string, quota, maxBytes int) string {
	cols := "INSERT INTO " + t + " (id, kind, state, fence, expires_at, scope) "
	pending := strconv.Itoa(statePending)
	limits := " AND entries < " + strconv.Itoa(quota) + " AND bytes < " + strconv.Itoa(maxBytes)
	switch d.Name {
	case MySQL.Name:
		return cols + "VALUES (?, ?, " + pending + ", ?, ?, ?)"
	case Postgres.Name:
		// PostgreSQL needs the parameters of a SELECT list typed.
		return "WITH c AS (UPDATE " + t + "_scopes SET entries = entries + 1 WHERE scope = ?" + limits + " RETURNING scope) " +
			cols + "SELECT CAST(? AS " + d.KeyType + "), CAST(? AS SMALLINT), " + pending + ", CAST(? AS BIGINT), CAST(? AS BIGINT), c.scope FROM c"
	}
	return cols + "SELECT ?, ?, " + pending + ", ?, ?, scope FROM " + t + "_scopes WHERE scope = ?" + limits
}

// quotaSignal is the message of the MySQL claim trigger's SIGNAL when a
// scope has no counter row or is at a quota.
const quotaSignal = "sqlstore: scope over its quota"

// ensureScope is the statement that creates a scope's counter row, empty,
// unless it exists; on MySQL it also sets the row's limits to the store's
// (the claim trigger reads them there).
func ensureScope(d Dialect, t string) string {
	if d.Name == MySQL.Name {
		return "INSERT INTO " + t + "_scopes (scope, entries, bytes, max_entries, max_bytes) VALUES (?, 0, 0, ?, ?)" +
			" ON DUPLICATE KEY UPDATE max_entries = VALUES(max_entries), max_bytes = VALUES(max_bytes)"
	}
	return "INSERT INTO " + t + "_scopes (scope, entries, bytes) VALUES (?, 0, 0) ON CONFLICT (scope) DO NOTHING"
}

// CreateTable creates, unless they exist, the dedup table, the scope
// counter table <table>_scopes and the triggers that keep
// it (SPEC I5 round 3):
//
//	<table>_scopes (scope <KeyType> PRIMARY KEY, entries BIGINT, bytes BIGINT)
//
// holds, per scope, the number of dedup rows with that scope — live or
// expired but not yet deleted — and the sum of their size column. Row
// triggers on the dedup table (after DELETE and UPDATE of size; and
// INSERT on SQLite and MySQL, where PostgreSQL's claim statement counts
// its row itself) keep it in the same statement as the change, so every
// path that removes a row or changes its size — Complete, Release,
// Consume, the overwrite of an expired row, the cleanup of a lost claim,
// Purge, a DELETE from cron — keeps it right without knowing of it. A
// scoped claim checks the quota by reading that one row instead of
// counting the scope's rows (see scopedInsert in the source). Counter rows are
// never deleted: one row of about 50 bytes per scope ever seen.
//
// There is no index on scope: a scope's rows are found, when a full scope
// needs its expired rows deleted, by a range of the primary key, since a
// scoped key starts with its scope (idem.ScopedKey).
//
// Migration. A table created before SPEC I5 round 3 lacks the scope and
// size columns; add them first:
//
//	ALTER TABLE idem_dedup ADD COLUMN scope <KeyType> NULL;
//	ALTER TABLE idem_dedup ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
//
// A table created by an earlier round-3 build has them, and an index
// idem_dedup_scope that nothing reads any more: drop it (DROP INDEX
// idem_dedup_scope; MySQL: ... ON idem_dedup), it costs every scoped claim
// an index write. For both, CreateTable adds the counter table and
// the triggers and counts the rows already there into it, per scope that
// has no counter row yet (one pass over the table's scoped rows, at every
// CreateTable; it adds nothing once every scope has its row). Run it while no store writes the table, as any
// migration: a row written between the triggers' creation and the count
// would be counted twice. On PostgreSQL CreateTable also creates the
// trigger function <table>_scope_count; MySQL/MariaDB with binary logging
// needs the TRIGGER privilege and log_bin_trust_function_creators (or
// SUPER) to create triggers.
//
// On SQLite a dedup table created by an earlier build is a rowid table
// with its primary key in a second B-tree, and CreateTable leaves it so:
// it works, but each claim writes a page of both (each page one WAL frame
// at the commit). To get the one-B-tree table CreateTable now creates,
// rebuild it, while no store writes it, in one transaction:
//
//	BEGIN;
//	CREATE TABLE idem_dedup_new (<the columns above>,
//		PRIMARY KEY (id, kind)) WITHOUT ROWID;
//	INSERT INTO idem_dedup_new SELECT id, kind, state, fence, expires_at,
//		result, scope, size FROM idem_dedup;
//	DROP TABLE idem_dedup;  -- and its triggers
//	ALTER TABLE idem_dedup_new RENAME TO idem_dedup;
//	COMMIT;
//
// then run CreateTable, which puts the triggers back; the counter table
// is untouched and still right (the copy ran without triggers, so nothing
// was counted twice). Stores already open re-prepare their statements by
// themselves; Close them to drop the old ones at once.
func (s *Store) CreateTable(ctx context.Context) error {
	base := s.table[strings.LastIndexByte(s.table, '.')+1:]
	stmts := []string{"CREATE TABLE IF NOT EXISTS " + s.table + ` (
	id ` + s.d.KeyType + ` NOT NULL,
	kind SMALLINT NOT NULL,
	state SMALLINT NOT NULL,
	fence BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	result ` + s.d.BlobType + `,
	scope ` + s.d.KeyType + ` NULL,
	size BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (id, kind)
)`}
	limits, opts := "", ""
	switch s.d.Name {
	case MySQL.Name:
		limits = ",\n\tmax_entries BIGINT NOT NULL DEFAULT 0,\n\tmax_bytes BIGINT NOT NULL DEFAULT 0"
	case SQLite.Name:
		// One B-tree keyed by the primary key, not a rowid table and
		// an index beside it: a claim's INSERT dirties one leaf page,
		// not two, and each page is one WAL frame at the commit (the
		// counter table likewise: one seek and one page per scoped
		// claim).
		opts = " WITHOUT ROWID"
		stmts[0] += opts
	}
	stmts = append(stmts, "CREATE TABLE IF NOT EXISTS "+s.table+"_scopes (\n\tscope "+s.d.KeyType+
		" NOT NULL PRIMARY KEY,\n\tentries BIGINT NOT NULL,\n\tbytes BIGINT NOT NULL"+limits+"\n)"+opts)
	stmts = append(stmts, s.triggers(base)...)
	seed := "INSERT INTO " + s.table + "_scopes (scope, entries, bytes) SELECT scope, COUNT(*), COALESCE(SUM(size), 0) FROM " +
		s.table + " WHERE scope IS NOT NULL GROUP BY scope"
	if s.d.Name == MySQL.Name {
		seed = "INSERT IGNORE" + seed[len("INSERT"):]
	} else {
		seed += " ON CONFLICT (scope) DO NOTHING"
	}
	stmts = append(stmts, seed)
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqlstore: create table %s: %w", s.table, err)
		}
	}
	return nil
}

// triggers returns the statements creating the row triggers that keep
// <table>_scopes equal to the dedup table's rows per scope: an insert adds
// one entry and its size (SQLite; MySQL, with the quota check; not
// PostgreSQL, whose claim statement does it), a delete takes them back, an
// update of size adds the difference. base is the table's name without
// its schema.
func (s *Store) triggers(base string) []string {
	t, c := s.table, s.table+"_scopes"
	ins := "UPDATE " + c + " SET entries = entries + 1, bytes = bytes + NEW.size WHERE scope = NEW.scope"
	del := "UPDATE " + c + " SET entries = entries - 1, bytes = bytes - OLD.size WHERE scope = OLD.scope"
	upd := "UPDATE " + c + " SET bytes = bytes + NEW.size - OLD.size WHERE scope = NEW.scope"
	switch s.d.Name {
	case Postgres.Name:
		fn := t + "_scope_count"
		// No INSERT trigger: the claim's CTE counts the row itself.
		body := "CREATE OR REPLACE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $fn$\nBEGIN\n" +
			"\tIF TG_OP = 'DELETE' THEN\n\t\t" + del + ";\n" +
			"\tELSE\n\t\t" + upd + ";\n\tEND IF;\n\tRETURN NULL;\nEND\n$fn$"
		trg := func(suffix, event, when string) string {
			return "CREATE OR REPLACE TRIGGER " + base + suffix + " AFTER " + event + " ON " + t +
				" FOR EACH ROW WHEN (" + when + ") EXECUTE FUNCTION " + fn + "()"
		}
		return []string{body,
			trg("_scope_del", "DELETE", "OLD.scope IS NOT NULL"),
			trg("_scope_upd", "UPDATE OF size", "NEW.scope IS NOT NULL AND NEW.size <> OLD.size")}
	case MySQL.Name:
		trg := func(suffix, event, when, stmt string) string {
			return "CREATE TRIGGER IF NOT EXISTS " + t + suffix + " " + event + " ON " + t +
				" FOR EACH ROW BEGIN IF " + when + " THEN " + stmt + "; END IF; END"
		}
		check := ins + " AND entries < max_entries AND bytes < max_bytes; IF ROW_COUNT() = 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" +
			quotaSignal + "'; END IF"
		return []string{
			trg("_scope_ins", "BEFORE INSERT", "NEW.scope IS NOT NULL", check),
			trg("_scope_del", "AFTER DELETE", "OLD.scope IS NOT NULL", del),
			trg("_scope_upd", "AFTER UPDATE", "NEW.scope IS NOT NULL AND NEW.size <> OLD.size", upd)}
	}
	// SQLite: the trigger may be schema-qualified, but its table and the
	// statements in its body may not.
	q := s.table[:len(s.table)-len(base)]
	trg := func(suffix, event, when, stmt string) string {
		return "CREATE TRIGGER IF NOT EXISTS " + q + base + suffix + " AFTER " + event + " ON " + base +
			" FOR EACH ROW WHEN " + when + " BEGIN " + strings.Replace(stmt, c, base+"_scopes", 1) + "; END"
	}
	return []string{
		trg("_scope_ins", "INSERT", "NEW.scope IS NOT NULL", ins),
		trg("_scope_del", "DELETE", "OLD.scope IS NOT NULL", del),
		trg("_scope_upd", "UPDATE OF size", "NEW.scope IS NOT NULL AND NEW.size <> OLD.size", upd)}
}

// scopeOf returns the scope of a key made by idem.ScopedKey, and false for
// a key without a separator or with an empty scope (one party, no quota),
// or when the store keeps no quota.
func (s *Store) scopeOf(key []byte) ([]byte, bool) {
	i := bytes.LastIndexByte(key, idem.ScopeSeparator)
	if i <= 0 || s.quota < 0 {
		return nil, false
	}
	return key[:i], true
}

func (s *Store) nowMillis() int64 { return s.clock().UnixMilli() }

// insert inserts a row for key unless a live one holds it: the insert
// either succeeds or hits the primary key; in the latter case an expired
// row is deleted (if still expired) and the insert tried once more, so
// that of any number of concurrent claimants exactly one wins whichever
// row they saw.
func (s *Store) insert(ctx context.Context, op string, key []byte, kind, state int, fence idem.Fence, ttl time.Duration) (bool, error) {
	if err := idem.CheckKey(key); err != nil {
		return false, err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return false, err
	}
	id := key
	scope, scoped := s.scopeOf(key)
	for attempt := 0; ; attempt++ {
		now := s.nowMillis()
		var err error
		if scoped {
			err = s.insertScoped(ctx, id, kind, fence, now+ms, scope, now)
			if errors.Is(err, idem.ErrQuota) {
				return false, err
			}
		} else {
			_, err = s.exec(ctx, pInsert, s.qInsert, id, kind, state, int64(fence), now+ms)
		}
		if err == nil {
			return true, nil
		}
		if !s.d.isUnique(err) {
			if fence != 0 {
				err = s.abandon(ctx, key, kind, fence, err)
			}
			if cerr := ctx.Err(); cerr != nil {
				return false, fmt.Errorf("sqlstore: %s: %w: %w", op, cerr, err)
			}
			return false, fmt.Errorf("sqlstore: %s: %w", op, err)
		}
		if attempt > 0 {
			return false, nil
		}
		res, err := s.exec(ctx, pDeleteExpired, s.qDeleteExpired, id, kind, now)
		n, err := rowsAffected(op, res, err)
		if err != nil {
			return false, err
		}
		if n == 0 {
			return false, nil // a live row holds the key
		}
	}
}

// insertScoped inserts the row of a scoped key if its scope is under its
// quotas: one statement when the scope has its counter row and room
// (SPEC I5 round 3). When that inserts nothing, the scope has no counter
// row yet or is full; the row is then created and the scope's expired
// rows deleted (their triggers give their entries and bytes back, so an
// expired row counts against the quota only until a claim needs its
// place), and the insert is tried once more if either changed anything.
// It returns idem.ErrQuota when the scope is full of live rows, and the
// driver's error unwrapped (a unique violation is the caller's to handle).
func (s *Store) insertScoped(ctx context.Context, id []byte, kind int, fence idem.Fence, expires int64, scope []byte, now int64) error {
	mysql := s.d.Name == MySQL.Name
	for freed := false; ; freed = true {
		var res sql.Result
		var err error
		if s.d.Name == Postgres.Name {
			res, err = s.exec(ctx, pInsertScoped, s.qInsertScoped, scope, id, kind, int64(fence), expires)
		} else {
			res, err = s.exec(ctx, pInsertScoped, s.qInsertScoped, id, kind, int64(fence), expires, scope)
		}
		if err != nil && !(mysql && strings.Contains(err.Error(), quotaSignal)) {
			return err
		}
		if err == nil {
			if n, err := res.RowsAffected(); err != nil || n > 0 {
				return err
			}
		}
		if freed {
			return idem.ErrQuota
		}
		if mysql {
			res, err = s.db.ExecContext(ctx, s.qEnsureScope, scope, s.quota, s.maxBytes)
		} else {
			res, err = s.db.ExecContext(ctx, s.qEnsureScope, scope)
		}
		if err != nil {
			return err
		}
		created, err := res.RowsAffected()
		if err != nil {
			return err
		}
		// The scope's rows by the primary key's range of keys starting
		// with scope and the separator (ScopedKey); scope = ? drops those
		// of a longer scope that starts the same.
		lo := append(append(make([]byte, 0, len(scope)+1), scope...), idem.ScopeSeparator)
		hi := append(append(make([]byte, 0, len(scope)+1), scope...), idem.ScopeSeparator+1)
		res, err = s.db.ExecContext(ctx, s.qPurgeScope, lo, hi, scope, now)
		if err != nil {
			return err
		}
		purged, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if created+purged == 0 {
			return idem.ErrQuota
		}
	}
}

// abandon deletes the row a failed claim insert may have written — the
// database may have committed it and only the reply was lost (the caller's
// context ended, the connection broke) — by its fence, which no other
// claim has, under a context detached from ctx and bounded by
// Config.CleanupTimeout. It returns err, joined with the DELETE's error if
// that failed too.
func (s *Store) abandon(ctx context.Context, key []byte, kind int, fence idem.Fence, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cleanup)
	defer cancel()
	if _, derr := s.db.ExecContext(cctx, s.qAbandon, key, kind, int64(fence)); derr != nil {
		return fmt.Errorf("%w; deleting the claim failed too: %w", err, derr)
	}
	return err
}

// Claim implements idem.Store.Claim: INSERT; a unique violation on a live
// row means another claim holds the key. If the INSERT fails otherwise,
// it may still have committed with its reply lost (SPEC I5 round 3): the
// row is deleted by its fence under a detached, bounded context, and the
// error wraps the caller's context error when ctx has ended. (An INSERT
// still running on the server when that DELETE arrives is not caught: its
// claim then expires after its ttl.)
func (s *Store) Claim(ctx context.Context, key []byte, ttl time.Duration) (idem.Fence, error) {
	f := s.fences.Next()
	ok, err := s.insert(ctx, "claim", key, kindClaim, statePending, f, ttl)
	if !ok {
		return 0, err
	}
	return f, nil
}

// Complete implements idem.Store.Complete: one UPDATE guarded by the
// fence and the expiry.
func (s *Store) Complete(ctx context.Context, key []byte, fence idem.Fence, result []byte, ttl time.Duration) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return err
	}
	if len(result) > s.maxResult {
		return idem.ErrTooLarge
	}
	if result == nil {
		result = []byte{} // NULL would read back as "no result"; keep it empty
	}
	now := s.nowMillis()
	res, err := s.exec(ctx, pComplete, s.qComplete, stateDone, result, len(result), now+ms, key, kindClaim, int64(fence), now)
	return s.affected(ctx, "complete", key, fence, false, res, err)
}

// Extend implements idem.Store.Extend: one UPDATE of the expiry, guarded
// by the fence, the pending state and the expiry, that never shortens it.
func (s *Store) Extend(ctx context.Context, key []byte, fence idem.Fence, ttl time.Duration) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	ms, err := idem.TTLMillis(ttl)
	if err != nil {
		return err
	}
	now := s.nowMillis()
	res, err := s.exec(ctx, pExtend, s.qExtend, now+ms, now+ms, key, kindClaim, statePending, int64(fence), now)
	return s.affected(ctx, "extend", key, fence, true, res, err)
}

// Release implements idem.Store.Release: one DELETE guarded by the fence.
func (s *Store) Release(ctx context.Context, key []byte, fence idem.Fence) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	res, err := s.exec(ctx, pRelease, s.qRelease, key, kindClaim, int64(fence), s.nowMillis())
	n, err := rowsAffected("release", res, err)
	if err == nil && n == 0 {
		return idem.ErrLost
	}
	return err
}

// affected turns the result of a fenced UPDATE into nil or ErrLost. MySQL
// counts only rows whose values changed (unless the connection sets
// CLIENT_FOUND_ROWS), so an update that matched the row but wrote the same
// values — a second Complete within one millisecond, an Extend that
// would not lengthen — reports 0; a SELECT then tells a held claim (nil)
// from a lost one. Other databases count matched rows and never need it
// on the success path.
func (s *Store) affected(ctx context.Context, op string, key []byte, fence idem.Fence, pendingOnly bool, res sql.Result, err error) error {
	n, err := rowsAffected(op, res, err)
	if err != nil || n > 0 {
		return err
	}
	var state int
	st, err := s.stmt(ctx, pHeld, s.qHeld)
	if err == nil {
		err = st.QueryRowContext(ctx, key, kindClaim, int64(fence), s.nowMillis()).Scan(&state)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idem.ErrLost
	case err != nil:
		return fmt.Errorf("sqlstore: %s: %w", op, err)
	case pendingOnly && state != statePending:
		return idem.ErrLost
	}
	return nil
}

// Lookup implements idem.Store.Lookup with one SELECT.
func (s *Store) Lookup(ctx context.Context, key []byte, dst []byte) (idem.State, []byte, error) {
	if err := idem.CheckKey(key); err != nil {
		return idem.Absent, dst, err
	}
	var state int
	var result []byte
	st, err := s.stmt(ctx, pLookup, s.qLookup)
	if err == nil {
		err = st.QueryRowContext(ctx, key, kindClaim, s.nowMillis()).Scan(&state, &result)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idem.Absent, dst, nil
	case err != nil:
		return idem.Absent, dst, fmt.Errorf("sqlstore: lookup: %w", err)
	case state == stateDone:
		return idem.Done, append(dst, result...), nil
	}
	return idem.Pending, dst, nil
}

// Issue implements idem.Store.Issue: INSERT of a token row (counted
// against its scope's quota like a claim: idem.ErrQuota).
func (s *Store) Issue(ctx context.Context, token []byte, ttl time.Duration) error {
	ok, err := s.insert(ctx, "issue", token, kindToken, statePending, 0, ttl)
	if err != nil {
		return err
	}
	if !ok {
		return idem.ErrExists
	}
	return nil
}

// Consume implements idem.Store.Consume: DELETE of the live token row;
// the database's row lock lets exactly one concurrent DELETE see a row.
func (s *Store) Consume(ctx context.Context, token []byte) (bool, error) {
	if err := idem.CheckKey(token); err != nil {
		return false, err
	}
	res, err := s.exec(ctx, pConsume, s.qConsume, token, kindToken, s.nowMillis())
	n, err := rowsAffected("consume", res, err)
	return n == 1, err
}

// Purge deletes every expired row and returns how many. Expired rows are
// already invisible; Purge only returns their space.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.qPurge, s.nowMillis())
	return rowsAffected("purge", res, err)
}

// rowsAffected returns the rows an Exec changed, wrapping either step's
// error with the operation's name.
func rowsAffected(op string, res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	return n, nil
}

var _ idem.Store = (*Store)(nil)
