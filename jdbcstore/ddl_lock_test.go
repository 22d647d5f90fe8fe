package jdbcstore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// ddlLockDialect is the PostgreSQL dialect with the statements bounding
// the schema session's lock wait replaced.
type ddlLockDialect struct {
	jdbcstore.Dialect
	set, reset string
}

func (d *ddlLockDialect) DDLLockTimeout() (set, reset string) { return d.set, d.reset }

func (d *ddlLockDialect) LockSchema(ctx context.Context, conn *sql.Conn, name string) (func(bool) error, error) {
	return d.Dialect.(jdbcstore.SchemaLocker).LockSchema(ctx, conn, name)
}

// A bound the server refuses fails ApplySchema with an error saying so,
// and gives the schema lock back (the next ApplySchema would wait for
// it); a session whose bound could not be reset is not given back to the
// pool (the next user of the connection would have met the schema
// session's short lock timeout).
func TestDDLLockTimeoutSessionHandling(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	db := testdb.OpenPostgres(t, dsn)
	db.SetMaxOpenConns(2)
	ctx := t.Context()
	refused := &ddlLockDialect{Dialect: pgdialect.Dialect, set: "SET no_such_setting_here = 1", reset: "RESET lock_timeout"}
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: refused})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(ctx); err == nil || !strings.Contains(err.Error(), "bound the wait for table locks") {
		t.Fatalf("ApplySchema with a bound the server refuses: %v, want an error saying so", err)
	}
	// Another node: a session of its own (the lock is re-entrant).
	good, err := jdbcstore.New(testdb.OpenPostgres(t, dsn), jdbcstore.Config{Dialect: pgdialect.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := good.ApplySchema(wctx); err != nil {
		t.Fatalf("ApplySchema after a refused bound (the schema lock kept?): %v", err)
	}

	unreset := &ddlLockDialect{Dialect: pgdialect.Dialect, set: "SET lock_timeout = '4321ms'", reset: "RESET no_such_setting_here"}
	st, err = jdbcstore.New(db, jdbcstore.Config{Dialect: unreset})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatalf("ApplySchema whose reset fails: %v", err)
	}
	for i := range 2 { // every connection the pool may hold
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var v string
		if err := conn.QueryRowContext(ctx, "SHOW lock_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v == "4321ms" {
			t.Errorf("pool connection %d kept the schema session's lock_timeout %s", i+1, v)
		}
	}
}
