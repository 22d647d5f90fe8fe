package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
)

// A reaping that keeps failing is logged once per incident, then its
// recovery, as the outbox's poller does: the inbox dispatcher logged a
// WARN at every ReapInterval for as long as the database refused it.
// Here a trigger refuses every UPDATE of the inbox's table, then goes.
func TestReapFailureLoggedOncePerIncidentPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	e := newEnv(t, openPostgres, inbox.Config{})
	table := e.in.Table()
	refuseUpdates(t, e, "refuse_reap")
	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{Owner: "w", PollInterval: 10 * time.Millisecond,
		ReapInterval: 10 * time.Millisecond, Lease: time.Minute, Logger: e.logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AddInbox("a", e.in); err != nil {
		t.Fatal(err)
	}
	mustHandle(t, d, "t", func(context.Context, inbox.Record) error { return nil })
	e.start(d)
	const failed = "inbox: reaping expired leases failed"
	waitFor(t, "three failed reapings", func() bool { return e.logs.Count(failed) >= 3 })
	if n := e.logs.Count("level=WARN", failed); n != 1 {
		t.Errorf("%d WARN lines for one incident of failed reapings, want 1:\n%s", n, e.logs)
	}
	if _, err := e.db.ExecContext(e.ctx, `DROP TRIGGER refuse_reap ON `+table); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the recovery line", func() bool { return e.logs.Count("level=INFO", "inbox: reaping expired leases recovered") == 1 })
	if n := e.logs.Count("level=WARN", failed); n != 1 {
		t.Errorf("%d WARN lines for one incident of failed reapings, want 1:\n%s", n, e.logs)
	}
}

// refuseUpdates makes every UPDATE of e's inbox table fail ("refused"),
// through a statement trigger and its function, both called name
// (PostgreSQL): DROP TRIGGER name ON the table ends it.
func refuseUpdates(t *testing.T, e *env, name string) {
	t.Helper()
	for _, q := range []string{
		`CREATE FUNCTION ` + name + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
		`CREATE TRIGGER ` + name + ` BEFORE UPDATE ON ` + e.in.Table() + ` FOR EACH STATEMENT EXECUTE FUNCTION ` + name + `()`,
	} {
		if _, err := e.db.ExecContext(e.ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}
