package jdbcstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Status writes retry SQLITE_BUSY even on a connection without busy
// timeout, until the lock holder commits.
func TestStatusWriteRetriesWhileLocked(t *testing.T) {
	t.Parallel()
	holder, path := openTestStore(t, jdbcstore.Config{})
	ctx := t.Context()

	st, err := jdbcstore.New(openRaw(t, path, "_busy_timeout=0&_journal_mode=WAL"), jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	env := mustEnv(t, core.NewEvent("Locked").PayloadJSONString(`{}`))
	if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}

	retrying := busySignal(st)
	tx, err := holder.DB().BeginTxx(ctx, nil) // takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := markDone(ctx, st, env.ID())
		done <- result{ok, err}
	}()
	<-retrying // MarkDone met SQLITE_BUSY and is waiting to retry
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.ok {
		t.Fatalf("MarkDone = %v, %v; want true, nil", r.ok, r.err)
	}
	rec, err := st.Get(ctx, env.ID())
	if err != nil || rec.Status != core.StatusDone {
		t.Fatalf("Get = %v, %v; want DONE", rec.Status, err)
	}
}

// The busy retry gives up when ctx ends and says why.
func TestStatusWriteRetryBoundedByContext(t *testing.T) {
	t.Parallel()
	holder, path := openTestStore(t, jdbcstore.Config{})
	st, err := jdbcstore.New(openRaw(t, path, "_busy_timeout=0&_journal_mode=WAL"), jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	env := mustEnv(t, core.NewEvent("Locked").PayloadJSONString(`{}`))
	if err := st.Insert(t.Context(), st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	ok, err := st.MarkRetry(ctx, testOwner, env.ID(), time.Now(), testLease.Until, "x")
	if ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("MarkRetry = %v, %v; want false and a deadline error", ok, err)
	}
	if sqlite.Dialect.Classify(err) != jdbcstore.ClassBusy {
		t.Errorf("error lost the driver's SQLITE_BUSY: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "outbox: ") {
		t.Errorf("error %q lacks the outbox: prefix", err)
	}
	// A ctx ended with a cause of its own: both the deadline and the
	// cause are in the error (the cause alone was).
	mine := errors.New("the request was abandoned")
	cctx, ccancel := context.WithTimeoutCause(t.Context(), 100*time.Millisecond, mine)
	defer ccancel()
	ok, err = st.MarkRetry(cctx, testOwner, env.ID(), time.Now(), testLease.Until, "x")
	if ok || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, mine) {
		t.Errorf("MarkRetry with a ctx's cause = %v, %v; want false, the deadline and the cause", ok, err)
	}
}

// Corrupt stored columns surface as Record.DecodeErr; they never fail the
// poll or hide the healthy rows.
func TestCorruptRowsBecomeDecodeErrors(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, jdbcstore.Config{})
	ctx := t.Context()
	ids := []string{"ok", "bad-kind", "bad-time", "bad-headers", "bad-payload-type", "text-payload"}
	for _, id := range ids {
		if err := st.Insert(ctx, st.DB(), mustEnv(t, core.NewEvent("E").ID(id).PayloadJSONString(`{"a":1}`)), testLease); err != nil {
			t.Fatal(err)
		}
	}
	corrupt := map[string]string{
		"bad-kind":         `UPDATE outbox_event SET payload_kind = 9 WHERE event_id = ?`,
		"bad-time":         `UPDATE outbox_event SET occurred_at = 'yesterday' WHERE event_id = ?`,
		"bad-headers":      `UPDATE outbox_event SET headers = '{not json' WHERE event_id = ?`,
		"bad-payload-type": `UPDATE outbox_event SET payload = 3.5 WHERE event_id = ?`,
		"text-payload":     `UPDATE outbox_event SET payload = CAST(payload AS TEXT) WHERE event_id = ?`,
	}
	for id, q := range corrupt {
		if _, err := st.DB().ExecContext(ctx, q, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	recs, err := st.PollPending(ctx, time.Now().Add(time.Hour), 0, 100)
	if err != nil {
		t.Fatalf("PollPending: %v", err)
	}
	if len(recs) != len(ids) {
		t.Fatalf("polled %d records, want %d", len(recs), len(ids))
	}
	byID := map[string]core.Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	for _, id := range []string{"bad-kind", "bad-time", "bad-payload-type"} {
		r := byID[id]
		if r.DecodeErr == nil {
			t.Errorf("%s: DecodeErr is nil", id)
		}
		if _, err := r.Envelope(); !errors.Is(err, core.ErrDecode) {
			t.Errorf("%s: Envelope() err = %v, want ErrDecode", id, err)
		}
	}
	if r := byID["bad-headers"]; r.DecodeErr != nil {
		t.Errorf("bad-headers: DecodeErr = %v; headers are decoded by core", r.DecodeErr)
	} else if _, err := r.Envelope(); !errors.Is(err, core.ErrDecode) {
		t.Errorf("bad-headers: Envelope() err = %v, want ErrDecode", err)
	}
	for _, id := range []string{"ok", "text-payload"} {
		env, err := byID[id].Envelope()
		if err != nil || env.PayloadString() != `{"a":1}` {
			t.Errorf("%s: Envelope() = %q, %v", id, env.PayloadString(), err)
		}
	}
	if rec, err := st.Get(ctx, "bad-kind"); err != nil || rec.DecodeErr == nil {
		t.Errorf("Get(bad-kind) = DecodeErr %v, err %v; want a DecodeErr and no error", rec.DecodeErr, err)
	}
}

func TestApplySchemaWarnsWithoutBusyTimeout(t *testing.T) {
	t.Parallel()
	_, path := openTestStore(t, jdbcstore.Config{})
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := jdbcstore.New(openRaw(t, path, "_busy_timeout=0"), jdbcstore.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "busy_timeout is 0") {
		t.Errorf("no busy_timeout warning; logs:\n%s", logs.String())
	}

	logs.Reset()
	good, _ := openTestStore(t, jdbcstore.Config{Logger: log})
	if err := good.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Errorf("warnings for an sqlite.Open database:\n%s", logs.String())
	}
}

// Processes that start at once on a new SQLite file all apply the schema:
// the first connection of each turns the file to WAL, which SQLite fails
// at once (no busy wait) while another connection holds the write lock in
// rollback-journal mode. ApplySchema retries opening its connection until
// the lock holder is done instead of failing with "database is locked".
func TestApplySchemaWaitsForTheWALSwitch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	ctx := t.Context()
	holder := openRaw(t, path, "_busy_timeout=0") // rollback journal, as a new file is
	if _, err := holder.ExecContext(ctx, "CREATE TABLE business (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	// The insert takes the write lock.
	if _, err := tx.ExecContext(ctx, "INSERT INTO business VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	retrying := busySignal(st)
	done := make(chan error, 1)
	go func() { done <- st.ApplySchema(ctx) }()
	select {
	case <-retrying: // its connection met SQLITE_BUSY and waits to retry
	case err := <-done:
		t.Fatalf("ApplySchema while another connection holds the write lock = %v, want it to wait", err)
	case <-time.After(30 * time.Second):
		t.Fatal("ApplySchema neither retried nor returned")
	}
	// The commit needs every other connection's read lock gone, and the
	// retrying connection takes one at each attempt: the commit waits for
	// it (it failed at once, "database is locked", once in CI).
	if _, err := tx.ExecContext(ctx, "PRAGMA busy_timeout = 30000"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ApplySchema after the lock was released: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ApplySchema did not return after the lock was released")
	}
	var mode string
	if err := db.GetContext(ctx, &mode, "PRAGMA journal_mode"); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// busySignal returns a channel that receives when a statement of st met
// SQLITE_BUSY and waits to retry (coalesced: it holds one signal).
func busySignal(st *jdbcstore.Store) <-chan struct{} {
	retrying := make(chan struct{}, 1)
	jdbcstore.SetBusyHook(st, func(int, error) {
		select {
		case retrying <- struct{}{}:
		default:
		}
	})
	return retrying
}
