package acceptance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testdb"
)

// pgInsufficientPrivilege is SQLSTATE 42501, insufficient_privilege
// ("permission denied for …").
const pgInsufficientPrivilege = "42501"

// A PostgreSQL role holding nothing but USAGE on the schema and SELECT,
// INSERT, UPDATE and DELETE on the outbox table and on a business table
// runs the whole framework (see runLeastPrivilege), LISTEN/NOTIFY
// included, the schema having been deployed by its owner. The role really
// is least-privilege: it cannot create a table, so it also cannot apply
// the schema, and it is told so by a clear error.
func TestPrivilegePostgresLeastPrivilegeRole(t *testing.T) {
	ctx := context.Background()
	udb := postgresRoleWith(t, "SELECT, INSERT, UPDATE, DELETE")
	var current string
	if err := udb.GetContext(ctx, &current, `SELECT current_user`); err != nil {
		t.Fatal(err)
	}
	var grants []string
	if err := udb.SelectContext(ctx, &grants, `SELECT table_name || ': ' || string_agg(privilege_type, ', ' ORDER BY privilege_type)
		FROM information_schema.role_table_grants WHERE grantee = current_user GROUP BY table_name ORDER BY table_name`); err != nil {
		t.Fatal(err)
	}
	want := []string{"orders: DELETE, INSERT, SELECT, UPDATE", "outbox_event: DELETE, INSERT, SELECT, UPDATE"}
	if strings.Join(grants, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the role holds %q, want %q", grants, want)
	}
	t.Logf("connected as %s with grants:\n  %s", current, strings.Join(grants, "\n  "))

	// Negative: the role cannot create tables in the schema, not even the
	// outbox table that exists already (CREATE TABLE IF NOT EXISTS checks
	// the schema's CREATE privilege first), so New without SkipSchema
	// fails, naming the schema.
	if _, err := udb.ExecContext(ctx, `CREATE TABLE lp_probe (id INT)`); !isPgError(err, pgInsufficientPrivilege) {
		t.Fatalf("CREATE TABLE as the least-privilege role: err = %v, want SQLSTATE %s", err, pgInsufficientPrivilege)
	}
	_, err := outbox.New(ctx, udb, outbox.Config{DisablePoller: true})
	if !isPgError(err, pgInsufficientPrivilege) || !strings.Contains(err.Error(), "permission denied for schema") {
		t.Fatalf("New without SkipSchema as the least-privilege role: err = %v, want SQLSTATE %s (permission denied for schema)", err, pgInsufficientPrivilege)
	}
	t.Logf("New without SkipSchema: %v", err)

	runLeastPrivilege(t, udb)
}

// A role missing a privilege the framework needs is told which one, by
// the operation that needs it: with SELECT and INSERT only, publishing
// works, but the poller's claim (FOR UPDATE needs UPDATE), the hot path's
// status write and the retention purge (DELETE) fail with
// "permission denied for table outbox_event".
func TestPrivilegePostgresMissingPrivileges(t *testing.T) {
	ctx := context.Background()
	udb, owner := postgresRoleAndOwner(t, "SELECT, INSERT")

	f := newFixture(t, Harness{Open: func(*testing.T) *sqlx.DB { return udb }}, false, func(c *outbox.Config) {
		c.SkipSchema = true
		c.Poller.SkipRecent = -1
	})
	env := mustEvent(t, core.NewEvent("Paid").PayloadJSONString(`{}`))
	if err := f.publish(t, nil, env); err != nil {
		t.Fatalf("publish with SELECT and INSERT: %v", err)
	}
	// A DONE row a year old, for the purge to delete (it reads a page of
	// old rows first, which SELECT allows, and deletes only what it found).
	old := mustEvent(t, core.NewEvent("Paid").PayloadJSONString(`{}`))
	if err := f.publish(t, nil, old); err != nil {
		t.Fatalf("publish with SELECT and INSERT: %v", err)
	}
	if _, err := owner.ExecContext(ctx, `UPDATE outbox_event SET status = $1, done_at = $2 WHERE event_id = $3`,
		int(core.StatusDone), time.Now().Add(-365*24*time.Hour), old.ID()); err != nil {
		t.Fatal(err)
	}
	denied := func(what string, err error) {
		t.Helper()
		if !isPgError(err, pgInsufficientPrivilege) || !strings.Contains(err.Error(), "permission denied for table outbox_event") {
			t.Errorf("%s without the privilege: err = %v, want SQLSTATE %s (permission denied for table outbox_event)", what, err, pgInsufficientPrivilege)
			return
		}
		t.Logf("%s: %v", what, err)
	}
	p := parts.Outbox(f.ob)
	_, err := p.Poller.PollOnce(ctx)
	denied("the poller's claim", err)
	_, err = p.Store.MarkDone(ctx, p.Dispatcher.Owner(), []string{env.ID()})
	denied("a DONE write", err)
	c, err := cleanup.New(p.Store, cleanup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RunOnce(ctx)
	denied("the retention purge", err)
	if rec := f.status(t, env.ID()); rec.Status != core.StatusNew {
		t.Errorf("event %v, want NEW", rec.Status)
	}
}

// postgresRoleWith deploys the outbox and orders tables in a new schema
// as its owner and returns a pool of a new role holding privileges on
// both (see createLeastPrivilegeRole).
func postgresRoleWith(t *testing.T, privileges string) *sqlx.DB {
	t.Helper()
	role, _ := postgresRoleAndOwner(t, privileges)
	return role
}

// postgresRoleAndOwner is postgresRoleWith that also returns the owner's
// pool, to set up rows the role may not write.
func postgresRoleAndOwner(t *testing.T, privileges string) (role, owner *sqlx.DB) {
	t.Helper()
	dsn := testdb.PostgresSchemaDSN(t)
	root := testdb.OpenPostgres(t, dsn)
	deployForLeastPrivilege(t, root)
	return testdb.OpenPostgres(t, createLeastPrivilegeRole(t, root, dsn, privileges, "outbox_event", "orders")), root
}

// createLeastPrivilegeRole creates a login role with a unique name,
// granted USAGE on the schema of dsn (its search_path) and privileges
// (e.g. "SELECT, INSERT") on the given tables, and nothing else; drops it
// when t ends (after the pools opened later are closed) and returns dsn
// for that role.
func createLeastPrivilegeRole(t *testing.T, root *sqlx.DB, dsn, privileges string, tables ...string) string {
	t.Helper()
	ctx := context.Background()
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := root.GetContext(ctx, &schema, `SELECT current_schema()`); err != nil {
		t.Fatal(err)
	}
	// role is hex made here and schema a name testdb made: safe to write
	// into the statements.
	role := "outbox_lp_" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() {
		ctx := context.Background()
		// DROP OWNED revokes the grants in this database; then the role
		// (cluster-wide) can go.
		for _, q := range []string{`DROP OWNED BY "` + role + `"`, `DROP ROLE IF EXISTS "` + role + `"`} {
			if _, err := root.ExecContext(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	stmts := []string{`CREATE ROLE "` + role + `" LOGIN`, fmt.Sprintf(`GRANT USAGE ON SCHEMA %q TO %q`, schema, role)}
	for _, table := range tables {
		stmts = append(stmts, fmt.Sprintf(`GRANT %s ON %q TO %q`, privileges, table, role))
	}
	for _, q := range stmts {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return testdb.WithPostgresParam(t, dsn, "user", role)
}

// isPgError reports whether err carries the SQLSTATE code.
func isPgError(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}
