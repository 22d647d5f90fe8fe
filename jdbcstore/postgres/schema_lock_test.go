package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/postgres"
)

// Applying the schema of an existing outbox or inbox table, as every node
// does at start, does not wait for a transaction that wrote to the table
// and stays open: CREATE INDEX IF NOT EXISTS took the table's SHARE lock
// before it found the index, so the starting node waited for that
// transaction, and every write to the table waited behind it.
func TestPostgresApplySchemaBesideAnOpenWrite(t *testing.T) {
	t.Parallel()
	db := testdb.Postgres(t)
	ctx := t.Context()
	st := newPGStore(t, db, jdbcstore.Config{})
	in, err := inbox.New(ctx, db, inbox.Config{Dialect: postgres.Dialect, Table: "pg_inbox"})
	if err != nil {
		t.Fatalf("inbox.New: %v", err)
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if err := st.Insert(ctx, tx, mustBuild(t, core.NewEvent("T").ID("open").PayloadJSONString(`{}`)), testLease); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM pg_inbox WHERE false`); err != nil {
		t.Fatal(err)
	}
	// Generous: the applies take milliseconds; before, they waited until
	// the transaction ended (here: until this deadline).
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	again, err := jdbcstore.New(db, jdbcstore.Config{Dialect: postgres.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.ApplySchema(actx); err != nil {
		t.Errorf("outbox ApplySchema beside an open write: %v", err)
	}
	if err := in.ApplySchema(actx); err != nil {
		t.Errorf("inbox ApplySchema beside an open write: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "open"); err != nil {
		t.Errorf("the open transaction's event: %v", err)
	}
}
