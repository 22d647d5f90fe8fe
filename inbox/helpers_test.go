package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
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

// clock is a settable test clock, microsecond-exact so stored times
// compare equal after a round trip.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the log lines containing every one of parts.
func (b *logBuffer) lines(parts ...string) []string {
	var out []string
	for line := range strings.Lines(b.String()) {
		ok := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// env is one test's inbox on a fresh database.
type env struct {
	t     *testing.T
	ctx   context.Context
	db    *sqlx.DB
	in    *inbox.Inbox
	clock *clock
	logs  *logBuffer
}

func newEnv(t *testing.T, open opener, cfg inbox.Config) *env {
	t.Helper()
	e := &env{t: t, db: open(t), clock: newClock(), logs: &logBuffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e.ctx = ctx
	if cfg.Now == nil {
		cfg.Now = e.clock.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
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
	if err := e.db.QueryRowContext(e.ctx, "SELECT COUNT(*) FROM "+e.in.Store().Table()).Scan(&n); err != nil {
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

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

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
