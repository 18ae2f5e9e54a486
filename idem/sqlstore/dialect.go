package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Dialect is what differs between the SQL databases this package supports:
// placeholders, column types, and how a unique-index violation is
// recognised. Use SQLite, Postgres or MySQL, or DialectOf to pick one from
// a *sql.DB's driver; a Dialect is a plain value and may be copied and
// adjusted (for another driver's unique-violation error, say).
type Dialect struct {
	// Name is "sqlite", "postgres" or "mysql"; it appears in errors.
	Name string
	// Numbered selects $1, $2, … placeholders (PostgreSQL) instead of ?.
	Numbered bool
	// BlobType is the column type of stored results.
	BlobType string
	// KeyType is the column type of request IDs, tokens and events: a
	// binary type, compared byte for byte, because a key is bytes (a scope
	// and a client's key, idem.ScopedKey) and two keys that differ in one
	// byte — "abc", "ABC", "ábc" — must never share a row. MySQL's
	// default collations fold case and accents, so its VARCHAR would; its
	// VARBINARY does not (issue 17 item 13).
	KeyType string
	// UniqueViolation reports whether err is an insert hitting a unique
	// index or primary key; nil means IsUniqueViolation.
	UniqueViolation func(err error) bool
}

// The supported dialects.
var (
	// SQLite: modernc.org/sqlite (the tested, pure-Go default) or
	// mattn/go-sqlite3; ? placeholders.
	SQLite = Dialect{Name: "sqlite", BlobType: "BLOB", KeyType: "BLOB"}
	// Postgres: jackc/pgx (stdlib; tested on a real server) or lib/pq; $n
	// placeholders.
	Postgres = Dialect{Name: "postgres", Numbered: true, BlobType: "BYTEA", KeyType: "BYTEA"}
	// MySQL and MariaDB: go-sql-driver/mysql (tested on a real MariaDB);
	// ? placeholders; binary keys whatever the server's collation.
	MySQL = Dialect{Name: "mysql", BlobType: "LONGBLOB", KeyType: "VARBINARY(255)"}
)

// ErrDialect is returned by DialectOf for a driver it does not know, and
// wrapped by constructors for an invalid identifier.
var ErrDialect = errors.New("sqlstore: unknown SQL dialect")

// DialectOf picks the dialect of db's driver from the driver's Go type:
// *sqlite.Driver (modernc.org/sqlite) and *sqlite3.SQLiteDriver
// (mattn/go-sqlite3) are SQLite; *pq.Driver (lib/pq) and *stdlib.Driver
// (jackc/pgx) are Postgres; *mysql.MySQLDriver is MySQL. Any other driver
// gives ErrDialect: name the dialect yourself.
func DialectOf(db *sql.DB) (Dialect, error) {
	if db == nil {
		return Dialect{}, fmt.Errorf("%w: nil *sql.DB", ErrDialect)
	}
	name := fmt.Sprintf("%T", db.Driver())
	switch {
	case strings.Contains(name, "sqlite"):
		return SQLite, nil
	case name == "*pq.Driver" || name == "*stdlib.Driver" || strings.Contains(name, "pgx"):
		return Postgres, nil
	case strings.Contains(name, "mysql"):
		return MySQL, nil
	}
	return Dialect{}, fmt.Errorf("%w: driver %s", ErrDialect, name)
}

// Rebind rewrites the ? placeholders of query for d: unchanged for SQLite
// and MySQL, $1, $2, … in order for Postgres. A ? inside a single-quoted
// string literal, a double-quoted identifier or a -- or /* */ comment is
// left alone (so write PostgreSQL's jsonb ? operators as functions, e.g.
// jsonb_exists, in queries passed here).
func (d Dialect) Rebind(query string) string {
	if !d.Numbered || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(query[i+1:], c)
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+2])
			i += end + 1
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+1])
			i += end
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			end := strings.Index(query[i+2:], "*/")
			if end < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+end+4])
			i += end + 3
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func (d Dialect) isUnique(err error) bool {
	if d.UniqueViolation != nil {
		return d.UniqueViolation(err)
	}
	return IsUniqueViolation(err)
}

// IsUniqueViolation reports whether err (or an error it wraps) is an insert
// or update that hit a unique index or primary key, on any supported
// driver:
//
//   - PostgreSQL: SQLSTATE 23505 from an error with a SQLState() string
//     method (pgx's *pgconn.PgError, recent lib/pq), else the server's
//     message "duplicate key value violates unique constraint" (lib/pq
//     with English server messages);
//   - SQLite: extended result code 2067 (SQLITE_CONSTRAINT_UNIQUE) or 1555
//     (SQLITE_CONSTRAINT_PRIMARYKEY) from an error with a Code() int method
//     (modernc.org/sqlite), else the message "UNIQUE constraint failed"
//     (mattn/go-sqlite3);
//   - MySQL: error 1062 in the message "Error 1062" (go-sql-driver/mysql).
//
// The type checks come first because messages can be localised; the
// message checks cover drivers whose error types this package cannot name
// without importing them. A driver beyond these needs Dialect.UniqueViolation.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		return state.SQLState() == "23505"
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() {
		case 2067, 1555:
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") ||
		strings.Contains(msg, "duplicate key value violates unique constraint") ||
		strings.Contains(msg, "SQLSTATE 23505") ||
		strings.Contains(msg, "Error 1062")
}

// checkIdent returns an error unless name is a plain SQL identifier,
// optionally schema-qualified: letters, digits and underscores, not
// starting with a digit, at most 63 bytes a part. Table and column names
// are written into queries, so nothing else may pass.
func checkIdent(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s name", ErrDialect, what)
	}
	for part := range strings.SplitSeq(name, ".") {
		if len(part) == 0 || len(part) > 63 || (part[0] >= '0' && part[0] <= '9') {
			return fmt.Errorf("%w: %s name %q is not a plain identifier", ErrDialect, what, name)
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return fmt.Errorf("%w: %s name %q is not a plain identifier", ErrDialect, what, name)
			}
		}
	}
	return nil
}
