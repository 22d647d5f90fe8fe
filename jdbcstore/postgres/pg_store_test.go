package postgres_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// A duplicate id is core.ErrDuplicateEvent in autocommit and inside a
// transaction, which stays usable: the insert uses ON CONFLICT DO NOTHING
// instead of failing (a failed statement would abort the transaction).
// So does a JSON payload jsonb cannot store, refused before the server.
func TestPostgresDuplicateKeepsTransactionUsable(t *testing.T) {
	t.Parallel()
	st := newPGStore(t, testdb.Postgres(t), jdbcstore.Config{})
	ctx := t.Context()
	ids := []string{"evt-a", "EVT-A", "evt-a ", "evt-á"}
	for _, id := range ids {
		if err := st.Insert(ctx, st.DB(), mustBuild(t, core.NewEvent("T").ID(id).PayloadJSONString(`{}`)), testLease); err != nil {
			t.Fatalf("insert %q: %v", id, err)
		}
	}
	dup := mustBuild(t, core.NewEvent("T").ID("evt-a").PayloadJSONString(`{"again":true}`))
	if err := st.Insert(ctx, st.DB(), dup, testLease); !errors.Is(err, core.ErrDuplicateEvent) {
		t.Fatalf("autocommit duplicate: err = %v", err)
	}
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if err := st.Insert(ctx, tx, dup, testLease); !errors.Is(err, core.ErrDuplicateEvent) || !strings.Contains(err.Error(), "still usable") {
		t.Fatalf("duplicate in transaction: err = %v", err)
	}
	nul := mustBuild(t, core.NewEvent("T").ID("evt-nul").PayloadJSONString(`{"a":"\u0000"}`))
	if err := st.Insert(ctx, tx, nul, testLease); err == nil || !strings.Contains(err.Error(), "jsonb") {
		t.Fatalf(`payload with \u0000: err = %v`, err)
	}
	if err := st.Insert(ctx, tx, mustBuild(t, core.NewEvent("T").ID("evt-after-dup").PayloadJSONString(`{}`)), testLease); err != nil {
		t.Fatalf("insert after the duplicate in the same transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if c, err := st.CountByStatus(ctx); err != nil || c[core.StatusNew] != len(ids)+1 {
		t.Errorf("NEW rows = %v, %v; want %d", c, err, len(ids)+1)
	}
}

// Any other failed insert inside a caller's transaction says that
// PostgreSQL aborted the transaction.
func TestPostgresFailedInsertSaysTransactionAborted(t *testing.T) {
	t.Parallel()
	st := newPGStore(t, testdb.Postgres(t), jdbcstore.Config{})
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	// Invalid JSON reaches the server only through a hand-made envelope;
	// a missing table is the simplest server-side failure.
	other, err := jdbcstore.New(st.DB(), jdbcstore.Config{Table: "no_such_table"})
	if err != nil {
		t.Fatal(err)
	}
	err = other.Insert(ctx, tx, mustBuild(t, core.NewEvent("T").ID("x").PayloadJSONString(`{}`)), testLease)
	if err == nil || !strings.Contains(err.Error(), "aborted the transaction") {
		t.Fatalf("insert into a missing table: %v", err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "25P02") {
		t.Errorf("the transaction is not aborted: %v", err)
	}
}

// The payload column is jsonb: a JSON payload is queryable with jsonb
// operators; a 1 MiB bytes payload round-trips byte-exact.
func TestPostgresPayloadColumn(t *testing.T) {
	t.Parallel()
	st := newPGStore(t, testdb.Postgres(t), jdbcstore.Config{})
	ctx := t.Context()
	bin := make([]byte, core.MaxPayloadBytes)
	for i := range bin {
		bin[i] = byte(i*7 + i>>8)
	}
	for _, env := range []core.Envelope{
		mustBuild(t, core.NewEvent("J").ID("p-json").PayloadJSONString(`{"total": 12.5, "items": ["a"]}`)),
		mustBuild(t, core.NewEvent("B").ID("p-big").PayloadBytes(bin)),
	} {
		if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
			t.Fatal(err)
		}
	}
	var total float64
	if err := st.DB().GetContext(ctx, &total, `SELECT (payload->>'total')::float8 FROM outbox_event WHERE event_id = 'p-json'`); err != nil || total != 12.5 {
		t.Errorf("payload->>'total' = %v, %v; want 12.5", total, err)
	}
	var typ string
	if err := st.DB().GetContext(ctx, &typ, `SELECT jsonb_typeof(payload) FROM outbox_event WHERE event_id = 'p-big'`); err != nil || typ != "string" {
		t.Errorf("bytes payload stored as %q, %v; want a JSON string", typ, err)
	}
	rec, err := st.Get(ctx, "p-big")
	if err != nil || rec.DecodeErr != nil || !bytes.Equal(rec.Payload, bin) {
		t.Fatalf("1 MiB round trip: %d bytes, %v, %v", len(rec.Payload), err, rec.DecodeErr)
	}
}

// The schema is idempotent; the pending index is partial and in claim
// order; the claim uses it.
func TestPostgresSchema(t *testing.T) {
	t.Parallel()
	db := testdb.Postgres(t)
	ctx := t.Context()
	st := newPGStore(t, db, jdbcstore.Config{})
	if err := st.Insert(ctx, db, mustBuild(t, core.NewEvent("T").ID("kept").PayloadJSONString(`{}`)), testLease); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.ApplySchema(ctx); err != nil {
			t.Fatalf("ApplySchema again: %v", err)
		}
	}
	if _, err := st.Get(ctx, "kept"); err != nil {
		t.Fatalf("row lost by ApplySchema: %v", err)
	}
	var def string
	if err := db.GetContext(ctx, &def, `SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'outbox_event_pending_idx'`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "(available_at, created_at, event_id) WHERE (status = ANY (ARRAY[0, 2]))") {
		t.Errorf("pending index: %s", def)
	}
	type column struct {
		Name      string  `db:"column_name"`
		Type      string  `db:"data_type"`
		Collation *string `db:"collation_name"`
	}
	var cols []column
	if err := db.SelectContext(ctx, &cols, `SELECT column_name, data_type, collation_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'outbox_event'`); err != nil {
		t.Fatal(err)
	}
	for _, c := range cols {
		switch c.Name {
		case "payload", "headers":
			if c.Type != "jsonb" {
				t.Errorf("%s is %s", c.Name, c.Type)
			}
		case "occurred_at", "available_at", "created_at", "done_at", "locked_until":
			if c.Type != "timestamp with time zone" {
				t.Errorf("%s is %s", c.Name, c.Type)
			}
		case "event_id":
			if c.Collation == nil || *c.Collation != "C" {
				t.Errorf("event_id collation %v", c.Collation)
			}
		}
	}
	long := newPGStore(t, db, jdbcstore.Config{Table: strings.Repeat("t", 48)})
	if err := long.Insert(ctx, db, mustBuild(t, core.NewEvent("T").ID("long").PayloadJSONString(`{}`)), testLease); err != nil {
		t.Fatal(err)
	}
}
