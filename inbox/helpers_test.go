package inbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// opener gives a test a fresh, empty database.
type opener func(t *testing.T) *sqlx.DB

func openSQLite(t *testing.T) *sqlx.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openMySQL(t *testing.T) *sqlx.DB {
	t.Helper()
	return testdb.MySQL(t)
}

// env is one test's inbox on a fresh database.
type env struct {
	t     *testing.T
	ctx   context.Context
	db    *sqlx.DB
	in    *inbox.Inbox
	clock *testsupport.Clock
	logs  *testsupport.LogBuffer
}

func newEnv(t *testing.T, open opener, cfg inbox.Config) *env {
	t.Helper()
	e := &env{t: t, db: open(t), clock: newClock(), logs: &testsupport.LogBuffer{}}
	// A safety net against a hang, not a bound on speed: the concurrent
	// redelivery test (1,600 contended transactions) ran past a minute on
	// PostgreSQL once in CI, on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	if cfg.Now == nil {
		cfg.Now = e.clock.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = e.logs.Logger()
	}
	in, err := inbox.New(ctx, e.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.in = in
	return e
}

func (e *env) get(source, id string) inbox.Record {
	e.t.Helper()
	rec, err := e.in.Get(e.ctx, source, id)
	if err != nil {
		e.t.Fatalf("get %s/%s: %v", source, id, err)
	}
	if rec.DecodeErr != nil {
		e.t.Fatalf("get %s/%s: decode: %v", source, id, rec.DecodeErr)
	}
	return rec
}

func (e *env) enqueue(m inbox.Message) {
	e.t.Helper()
	if m.Payload == nil {
		m.Payload = []byte(`{}`)
	}
	if m.Topic == "" {
		m.Topic = "topic"
	}
	if err := e.in.Enqueue(e.ctx, m); err != nil {
		e.t.Fatalf("enqueue %s/%s: %v", m.Source, m.MessageID, err)
	}
}

func (e *env) claim(owner string, lease time.Duration, n int) []inbox.Record {
	e.t.Helper()
	recs, err := e.in.Claim(e.ctx, owner, lease, n)
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return recs
}

// count returns the number of rows in the inbox table.
func (e *env) count() int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRowContext(e.ctx, "SELECT COUNT(*) FROM "+e.in.Table()).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func keysOf(recs []inbox.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Source + "/" + r.MessageID
	}
	return out
}

func key(source, id string) inbox.Key { return inbox.Key{Source: source, MessageID: id} }

// status returns the stored status of a message, or -1 when missing.
func (e *env) status(source, id string) inbox.Status {
	rec, err := e.in.Get(e.ctx, source, id)
	if errors.Is(err, inbox.ErrNotFound) {
		return -1
	}
	if err != nil {
		e.t.Errorf("get %s/%s: %v", source, id, err)
		return -1
	}
	return rec.Status
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// waitTimeout bounds every wait of this package's tests.
const waitTimeout = 20 * time.Second

// waitFor re-checks cond until it holds and fails the test at waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, waitTimeout, what, cond)
}

// newClock returns a settable clock, microsecond-exact so stored times
// compare equal after a round trip.
func newClock() *testsupport.Clock {
	return testsupport.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC))
}
