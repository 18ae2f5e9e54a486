package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/readretry/readretry/idem"
	"github.com/readretry/readretry/idem/sqlstore"
)

// The local-transaction event log of seed 001: the debit and its event row
// commit together, so a retried request debits once.
func ExampleInTx() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "bank.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.Exec(`CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)`)
	db.Exec(`INSERT INTO account VALUES (1, 100)`)
	log, _ := sqlstore.NewEventLog(sqlstore.SQLite, "")
	if err := log.CreateTable(ctx, db); err != nil {
		panic(err)
	}

	debit := func(ctx context.Context, tx *sql.Tx) error {
		fmt.Println("debiting 30")
		_, err := tx.ExecContext(ctx, `UPDATE account SET balance = balance - 30 WHERE id = 1`)
		return err
	}
	for range 3 { // the request and two retries, all with event "req-9"
		if err := sqlstore.InTx(ctx, db, "req-9", debit); err != nil {
			panic(err)
		}
	}
	var balance int
	db.QueryRow(`SELECT balance FROM account WHERE id = 1`).Scan(&balance)
	fmt.Println("balance:", balance)
	// Output:
	// debiting 30
	// balance: 70
}

// The dedup table (seed 003's 防重表) and the versioned update.
func ExampleStore() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	defer db.Close()

	d, _ := sqlstore.DialectOf(db)
	store, _ := sqlstore.New(db, d, sqlstore.Config{})
	defer store.Close() // its prepared statements, before db.Close
	if err := store.CreateTable(ctx); err != nil {
		panic(err)
	}
	fence, _ := store.Claim(ctx, []byte("req-1"), time.Minute)
	again, _ := store.Claim(ctx, []byte("req-1"), time.Minute)
	fmt.Println("first:", fence != 0, "repeat:", again != 0)

	db.Exec(`CREATE TABLE item (id INTEGER PRIMARY KEY, stock INTEGER, version INTEGER)`)
	db.Exec(`INSERT INTO item VALUES (5, 10, 1)`)
	v := sqlstore.Versioned{Dialect: d, Table: "item"}
	fmt.Println(v.Update(ctx, db, "stock = stock - ?", 5, 1, 1))
	err := v.Update(ctx, db, "stock = stock - ?", 5, 1, 1) // a repeat of the same update
	fmt.Println(errors.Is(err, idem.ErrConflict))
	// Output:
	// first: true repeat: false
	// <nil>
	// true
}
