package jdbcstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

func TestOpenSQLiteSettings(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, Config{})
	ctx := t.Context()
	conn, err := st.DB().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checks := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "10000"},
		{"synchronous", "1"}, // NORMAL
		{"foreign_keys", "1"},
	}
	for _, c := range checks {
		var got string
		if err := conn.QueryRowxContext(ctx, "PRAGMA "+c.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", c.pragma, err)
		}
		if !strings.EqualFold(got, c.want) {
			t.Errorf("PRAGMA %s = %q, want %q", c.pragma, got, c.want)
		}
	}
}

// A transaction begun on an OpenSQLite pool holds the write lock from
// BEGIN (BEGIN IMMEDIATE): a second writer cannot start.
func TestOpenSQLiteImmediateTransactions(t *testing.T) {
	t.Parallel()
	st, path := openTestStore(t, Config{})
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()

	other := openRaw(t, path, "_busy_timeout=0&_txlock=immediate")
	tx2, err := other.BeginTxx(ctx, nil)
	if err == nil {
		_ = tx2.Rollback()
		t.Fatal("second BEGIN IMMEDIATE succeeded while the first transaction is open")
	}
	if SQLite.classify(err) != errBusy {
		t.Fatalf("second BEGIN: err = %v, want SQLITE_BUSY", err)
	}
}

// Status writes retry SQLITE_BUSY even on a connection without busy
// timeout, until the lock holder commits.
func TestStatusWriteRetriesWhileLocked(t *testing.T) {
	t.Parallel()
	holder, path := openTestStore(t, Config{})
	ctx := t.Context()

	st, err := New(openRaw(t, path, "_busy_timeout=0&_journal_mode=WAL"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	env := mustEnv(t, core.NewEvent("Locked").PayloadJSONString(`{}`))
	if err := st.Insert(ctx, st.DB(), env, testLease); err != nil {
		t.Fatal(err)
	}

	retrying := make(chan struct{}, 1)
	st.busyHook = func(int, error) {
		select {
		case retrying <- struct{}{}:
		default:
		}
	}
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
	holder, path := openTestStore(t, Config{})
	st, err := New(openRaw(t, path, "_busy_timeout=0&_journal_mode=WAL"), Config{})
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
	if SQLite.classify(err) != errBusy {
		t.Errorf("error lost the driver's SQLITE_BUSY: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "outbox: ") {
		t.Errorf("error %q lacks the outbox: prefix", err)
	}
}

// Corrupt stored columns surface as Record.DecodeErr; they never fail the
// poll or hide the healthy rows.
func TestCorruptRowsBecomeDecodeErrors(t *testing.T) {
	t.Parallel()
	st, _ := openTestStore(t, Config{})
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

func TestInMemoryDatabase(t *testing.T) {
	t.Parallel()
	db, err := OpenSQLite(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := New(db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	env := mustEnv(t, core.NewEvent("Mem").PayloadJSONString(`{}`))
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(ctx, tx, env, testLease); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if ok, err := markDone(ctx, st, env.ID()); err != nil || !ok {
		t.Fatalf("MarkDone = %v, %v", ok, err)
	}
}

func TestApplySchemaWarnsWithoutBusyTimeout(t *testing.T) {
	t.Parallel()
	_, path := openTestStore(t, Config{})
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := New(openRaw(t, path, "_busy_timeout=0"), Config{Logger: log})
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
	good, _ := openTestStore(t, Config{Logger: log})
	if err := good.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Errorf("warnings for an OpenSQLite database:\n%s", logs.String())
	}
}

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()
	const params = "_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_stmt_cache_size=64&_synchronous=NORMAL&_txlock=immediate"
	cases := []struct {
		path, want string
	}{
		{"app.db", "app.db?" + params},
		{"/var/lib/app/app.db", "/var/lib/app/app.db?" + params},
		{":memory:", ":memory:?" + params},
		{"file:app.db", "file:app.db?" + params},
		{"file:app.db?mode=rwc", "file:app.db?mode=rwc&" + params},
	}
	for _, c := range cases {
		got, err := SQLiteDSN(c.path)
		if err != nil || got != c.want {
			t.Errorf("SQLiteDSN(%q) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "app.db?x=1"} {
		if _, err := SQLiteDSN(bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("SQLiteDSN(%q): err = %v, want ErrInvalidConfig", bad, err)
		}
		if _, err := OpenSQLite(bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("OpenSQLite(%q): err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestIsSQLiteMemory(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		":memory:":                          true,
		"file::memory:":                     true,
		"file:x?mode=memory":                true,
		"file::memory:?cache=shared":        false,
		"file:x?mode=memory&cache=shared":   false,
		"app.db":                            false,
		"file:app.db":                       false,
		"file:app.db?mode=rwc&_txlock=none": false,
	}
	for path, want := range cases {
		if got := isSQLiteMemory(path); got != want {
			t.Errorf("isSQLiteMemory(%q) = %v, want %v", path, got, want)
		}
	}
}
