package sqlstore

import (
	"database/sql"
	"testing"
)

// TestPostgresQueries checks the statements a Postgres store sends: $n
// placeholders in order, BYTEA results.
func TestPostgresQueries(t *testing.T) {
	s, err := New(nonNilDB, Postgres, Config{Table: "app.dedup"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		s.qInsert:   "INSERT INTO app.dedup (id, kind, state, fence, expires_at) VALUES ($1, $2, $3, $4, $5)",
		s.qComplete: "UPDATE app.dedup SET state = $1, result = $2, size = $3, expires_at = $4 WHERE id = $5 AND kind = $6 AND fence = $7 AND expires_at > $8",
		s.qRelease:  "DELETE FROM app.dedup WHERE id = $1 AND kind = $2 AND fence = $3 AND expires_at > $4",
		s.qLookup:   "SELECT state, result FROM app.dedup WHERE id = $1 AND kind = $2 AND expires_at > $3",
	}
	for got, w := range want {
		if got != w {
			t.Errorf("query\n got %s\nwant %s", got, w)
		}
	}
	l, _ := NewEventLog(Postgres, "")
	if l.qInsert != "INSERT INTO idem_event (event, created_at) VALUES ($1, $2)" {
		t.Errorf("event insert: %s", l.qInsert)
	}
	if Postgres.BlobType != "BYTEA" || MySQL.BlobType != "LONGBLOB" || SQLite.BlobType != "BLOB" {
		t.Error("blob types")
	}
}

// nonNilDB is a *sql.DB that is never used: New does not touch the
// database.
var nonNilDB = new(sql.DB)
