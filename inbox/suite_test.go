package inbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/retry"
	"github.com/outbox-go/outbox/txctx"
)

// suite is every behaviour test, run once per database (sqlite_test.go,
// mysql_test.go).
var suite = []struct {
	name string
	fn   func(t *testing.T, open opener)
}{
	{"Schema", testSchema},
	{"NaturalKeyIsExact", testNaturalKeyIsExact},
	{"AlreadyProcessed", testAlreadyProcessed},
	{"ProcessTx", testProcessTx},
	{"ProcessTxMixedWithWorkQueue", testProcessTxMixedWithWorkQueue},
	{"ProcessTxAfterSilentRollback", testProcessTxAfterSilentRollback},
	{"ProcessTxRolledBackToASavepoint", testProcessTxRolledBackToASavepoint},
	{"Process", testProcess},
	{"Enqueue", testEnqueue},
	{"EnqueueUpsert", testEnqueueUpsert},
	{"EnqueueConcurrent", testEnqueueConcurrent},
	{"DueTime", testDueTime},
	{"Claim", testClaim},
	{"ClaimConcurrent", testClaimConcurrent},
	{"Ack", testAck},
	{"ManyKeys", testManyKeys},
	{"BadKeys", testBadKeys},
	{"Abandon", testAbandon},
	{"Fail", testFail},
	{"List", testList},
	{"ListPreview", testListPreview},
	{"Reap", testReap},
	{"Cleanup", testCleanup},
	{"RetentionFromCompletion", testRetentionFromCompletion},
	{"Validation", testValidation},
	{"DispatcherRoutes", testDispatcherRoutes},
	{"DispatcherRetriesThenDead", testDispatcherRetriesThenDead},
	{"DispatcherWakesWhenDue", testDispatcherWakesWhenDue},
	{"DispatcherNoHandlerAndPanic", testDispatcherNoHandlerAndPanic},
	{"DispatcherHandlerGoexit", testDispatcherHandlerGoexit},
	{"HandlerProcessesItsOwnMessage", testHandlerProcessesItsOwnMessage},
	{"DispatcherConcurrency", testDispatcherConcurrency},
	{"DispatcherNeverSameMessageTwice", testDispatcherNeverSameMessageTwice},
	{"DispatcherReapsAndCleansUp", testDispatcherReapsAndCleansUp},
	{"DispatcherStop", testDispatcherStop},
	{"DispatcherHardCloseGivesBack", testDispatcherHardCloseGivesBack},
	{"StaleClaimOutcome", testStaleClaimOutcome},
	{"CrashedHandlingCountsAnAttempt", testCrashedHandlingCountsAnAttempt},
	{"MultiSelectorOrder", testMultiSelectorOrder},
	{"MultiOutcomeToOrigin", testMultiOutcomeToOrigin},
	{"MultiWakeReapAdd", testMultiWakeReapAdd},
	{"MultiDrainsAll", testMultiDrainsAll},
	{"MultiRemoveInbox", testMultiRemoveInbox},
	{"MultiBadPaths", testMultiBadPaths},
}

func runSuite(t *testing.T, open opener) {
	for _, c := range suite {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// The schema is applied by New, idempotent, skippable; the
// table name is validated and configurable.
func testSchema(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if err := e.in.ApplySchema(e.ctx); err != nil {
		t.Fatalf("second ApplySchema: %v", err)
	}
	if _, err := inbox.New(e.ctx, e.db, inbox.Config{Now: e.clock.Now}); err != nil {
		t.Fatalf("New on an existing table: %v", err)
	}
	if !strings.Contains(e.in.SchemaSQL(), inbox.DefaultTable) {
		t.Fatalf("schema does not name %s:\n%s", inbox.DefaultTable, e.in.SchemaSQL())
	}
	mustEqual(t, "rows", e.count(), 0)

	skipped, err := inbox.New(e.ctx, e.db, inbox.Config{Table: "never_created", SkipSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := skipped.Get(e.ctx, "s", "m"); err == nil || errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("SkipSchema: Get on a missing table = %v, want a database error", err)
	}

	if _, err := inbox.New(e.ctx, e.db, inbox.Config{Table: "bad name; DROP"}); !errors.Is(err, core.ErrInvalidIdentifier) {
		t.Fatalf("bad table name: %v", err)
	}
	custom, err := inbox.New(e.ctx, e.db, inbox.Config{Table: "my_inbox", Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := custom.Enqueue(e.ctx, inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := custom.Get(e.ctx, "s", "m"); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "rows in the default table", e.count(), 0)
}

// (source, message id) is the key, compared byte for byte: case,
// trailing spaces and 4-byte characters all count; 255 characters fit.
func testNaturalKeyIsExact(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	long := strings.Repeat("😀", inbox.MaxIDLen) // 1,020 bytes
	ids := []string{"a", "A", "a ", " a", "ä", long}
	for _, id := range ids {
		for _, src := range []string{"src", "SRC", "src "} {
			done, err := e.in.AlreadyProcessed(e.ctx, src, id, nil)
			if err != nil || done {
				t.Fatalf("AlreadyProcessed(%q, %q) = %v, %v", src, id, done, err)
			}
		}
	}
	mustEqual(t, "rows", e.count(), len(ids)*3)
	rec := e.get("src ", long)
	mustEqual(t, "long id", rec.MessageID, long)
	mustEqual(t, "source", rec.Source, "src ")
	if err := e.in.MarkProcessed(e.ctx, "src", "a"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []inbox.Key{key("src", "A"), key("src", "a "), key("SRC", "a"), key("src ", "a")} {
		mustEqual(t, "status of "+k.Source+"/"+k.MessageID, e.get(k.Source, k.MessageID).Status, inbox.StatusSeen)
	}
	mustEqual(t, "status of src/a", e.get("src", "a").Status, inbox.StatusDone)
}

// The deduplication check.
func testAlreadyProcessed(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	h1, h2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	t0 := e.clock.Now()

	done, err := e.in.AlreadyProcessed(e.ctx, "stripe", "evt_1", h1[:])
	if err != nil || done {
		t.Fatalf("first check = %v, %v; want false", done, err)
	}
	rec := e.get("stripe", "evt_1")
	mustEqual(t, "status", rec.Status, inbox.StatusSeen)
	mustEqual(t, "first seen", rec.FirstSeenAt, t0)
	mustEqual(t, "last seen", rec.LastSeenAt, t0)
	mustEqual(t, "hash stored", bytes.Equal(rec.Hash, h1[:]), true)
	mustEqual(t, "debug log", len(e.logs.Lines("deduplication check")) > 0, true)

	t1 := e.clock.Advance(time.Minute)
	if done, err = e.in.AlreadyProcessed(e.ctx, "stripe", "evt_1", h1[:]); err != nil || done {
		t.Fatalf("second check = %v, %v; want false", done, err)
	}
	rec = e.get("stripe", "evt_1")
	mustEqual(t, "first seen kept", rec.FirstSeenAt, t0)
	mustEqual(t, "last seen", rec.LastSeenAt, t1)
	mustEqual(t, "status", rec.Status, inbox.StatusSeen)
	mustEqual(t, "no warning yet", len(e.logs.Lines("level=WARN")), 0)

	// A different hash is a warning, never an error.
	if done, err = e.in.AlreadyProcessed(e.ctx, "stripe", "evt_1", h2[:]); err != nil || done {
		t.Fatalf("check with another hash = %v, %v", done, err)
	}
	if lines := e.logs.Lines("level=WARN", "different content hash", "evt_1"); len(lines) != 1 {
		t.Fatalf("want one hash warning, got %q", e.logs.String())
	}
	mustEqual(t, "first hash kept", bytes.Equal(e.get("stripe", "evt_1").Hash, h1[:]), true)

	// Done reports true.
	if err := e.in.MarkProcessed(e.ctx, "stripe", "evt_1"); err != nil {
		t.Fatal(err)
	}
	if done, err = e.in.AlreadyProcessed(e.ctx, "stripe", "evt_1", nil); err != nil || !done {
		t.Fatalf("after MarkProcessed = %v, %v; want true", done, err)
	}
	mustEqual(t, "Done row is still Done", e.get("stripe", "evt_1").Status, inbox.StatusDone)

	// A hash given later is stored when none was.
	if _, err := e.in.AlreadyProcessed(e.ctx, "stripe", "evt_2", nil); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "no hash", e.get("stripe", "evt_2").Hash == nil, true)
	if _, err := e.in.AlreadyProcessed(e.ctx, "stripe", "evt_2", h2[:]); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "hash filled in", bytes.Equal(e.get("stripe", "evt_2").Hash, h2[:]), true)

	// MarkProcessed of an unknown message records it Done; it is idempotent.
	for range 2 {
		if err := e.in.MarkProcessed(e.ctx, "stripe", "evt_3"); err != nil {
			t.Fatal(err)
		}
	}
	mustEqual(t, "unknown marked", e.get("stripe", "evt_3").Status, inbox.StatusDone)
}

// The transactional mode: fn runs once, its effect and the Done mark commit
// together; a rollback leaves no trace.
func testProcessTx(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE effects (id INTEGER NOT NULL PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(e.ctx, `INSERT INTO effects (id, n) VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	effect := func(ctx context.Context, tx inbox.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE effects SET n = n + 1 WHERE id = 1`)
		return err
	}
	effects := func() int {
		var n int
		if err := e.db.QueryRowContext(e.ctx, `SELECT n FROM effects WHERE id = 1`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// deliver runs one delivery in its own transaction; fail makes fn fail,
	// commitAnyway commits even then.
	deliver := func(id string, fail, commitAnyway bool) (bool, error) {
		tx, err := e.db.BeginTxx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		processed, err := e.in.ProcessTx(e.ctx, tx, inbox.Message{Source: "orders", MessageID: id, Topic: "order.paid", Payload: []byte(`{"n":1}`)},
			func(ctx context.Context) error {
				if err := effect(ctx, tx); err != nil {
					return err
				}
				if fail {
					return errors.New("business rule violated")
				}
				return nil
			})
		if err != nil && !commitAnyway {
			_ = tx.Rollback()
			return processed, err
		}
		if cerr := tx.Commit(); cerr != nil {
			t.Fatal(cerr)
		}
		return processed, err
	}

	t0 := e.clock.Now()
	if p, err := deliver("m1", false, false); err != nil || !p {
		t.Fatalf("first delivery = %v, %v", p, err)
	}
	mustEqual(t, "effects", effects(), 1)
	rec := e.get("orders", "m1")
	mustEqual(t, "status", rec.Status, inbox.StatusDone)
	mustEqual(t, "topic", rec.Topic, "order.paid")
	t1 := e.clock.Advance(time.Second)
	if p, err := deliver("m1", false, false); err != nil || p {
		t.Fatalf("redelivery = %v, %v; want skipped", p, err)
	}
	mustEqual(t, "effects after redelivery", effects(), 1)
	rec = e.get("orders", "m1")
	mustEqual(t, "first seen", rec.FirstSeenAt, t0)
	mustEqual(t, "last seen", rec.LastSeenAt, t1)

	// fn fails, the caller rolls back: no row, no effect; the next
	// delivery processes the message.
	if _, err := deliver("m2", true, false); err == nil || !strings.Contains(err.Error(), "business rule") {
		t.Fatalf("failing fn: err = %v", err)
	}
	if _, err := e.in.Get(e.ctx, "orders", "m2"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("rolled-back delivery left a row: %v", err)
	}
	mustEqual(t, "effects", effects(), 1)
	if p, err := deliver("m2", false, false); err != nil || !p {
		t.Fatalf("delivery after rollback = %v, %v", p, err)
	}
	mustEqual(t, "effects", effects(), 2)

	// fn fails but the caller commits anyway: the row stays Seen (not
	// Done), so the next delivery still processes the message.
	if _, err := deliver("m3", true, true); err == nil {
		t.Fatal("failing fn returned nil")
	}
	mustEqual(t, "status after a failed fn", e.get("orders", "m3").Status, inbox.StatusSeen)
	if p, err := deliver("m3", false, false); err != nil || !p {
		t.Fatalf("delivery after a committed failure = %v, %v", p, err)
	}
	mustEqual(t, "status", e.get("orders", "m3").Status, inbox.StatusDone)

	// A *sql.Tx works as well as a *sqlx.Tx, and so does a txctx.Tx.
	sqlTx, err := e.db.DB.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := e.in.ProcessTx(e.ctx, sqlTx, inbox.Message{Source: "orders", MessageID: "m4"}, func(ctx context.Context) error {
		return effect(ctx, sqlTx)
	}); err != nil || !p {
		t.Fatalf("*sql.Tx: %v, %v", p, err)
	}
	if err := sqlTx.Commit(); err != nil {
		t.Fatal(err)
	}
	err = txctx.NewX(e.db).Do(e.ctx, func(ctx context.Context) error {
		tx, _ := txctx.From(ctx)
		_, err := e.in.ProcessTx(ctx, tx, inbox.Message{Source: "orders", MessageID: "m5"}, func(ctx context.Context) error {
			return effect(ctx, tx)
		})
		return err
	})
	if err != nil {
		t.Fatalf("txctx: %v", err)
	}
	// m1, m2, m3 (the failed run whose transaction was committed anyway,
	// and the successful one), m4, m5.
	mustEqual(t, "effects", effects(), 6)
	mustEqual(t, "m5", e.get("orders", "m5").Status, inbox.StatusDone)

	// A pool is not a transaction.
	if _, err := e.in.ProcessTx(e.ctx, e.db, inbox.Message{Source: "orders", MessageID: "m6"}, func(context.Context) error { return nil }); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("pool: %v", err)
	}
	if _, err := e.in.ProcessTx(e.ctx, nil, inbox.Message{Source: "orders", MessageID: "m6"}, func(context.Context) error { return nil }); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("nil tx: %v", err)
	}
}

// A row from the work-queue mode: ProcessTx takes over an unleased
// Processing or a Dead message, refuses one a worker holds.
func testProcessTxMixedWithWorkQueue(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	runs := 0
	process := func(id string) (bool, error) {
		return e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: id}, func(context.Context, *sqlx.Tx) error {
			runs++
			return nil
		})
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "queued"})
	if p, err := process("queued"); err != nil || !p {
		t.Fatalf("queued: %v, %v", p, err)
	}
	mustEqual(t, "status", e.get("s", "queued").Status, inbox.StatusDone)
	mustEqual(t, "claimable after", len(e.claim("w", time.Minute, 10)), 0)

	e.enqueue(inbox.Message{Source: "s", MessageID: "leased"})
	if got := e.claim("w", time.Minute, 10); len(got) != 1 {
		t.Fatalf("claimed %v", keysOf(got))
	}
	if p, err := process("leased"); !errors.Is(err, inbox.ErrInProgress) || p {
		t.Fatalf("leased: %v, %v; want ErrInProgress", p, err)
	}
	mustEqual(t, "fn runs", runs, 1)
	e.clock.Advance(time.Minute + time.Millisecond) // the worker's lease expired
	if p, err := process("leased"); err != nil || !p {
		t.Fatalf("expired lease: %v, %v", p, err)
	}
	rec := e.get("s", "leased")
	mustEqual(t, "status", rec.Status, inbox.StatusDone)
	mustEqual(t, "lease released", rec.LockedBy, "")
	if n, err := e.in.Ack(e.ctx, "w", []inbox.Key{key("s", "leased")}); err != nil || n != 0 {
		t.Fatalf("late ack of the old worker = %d, %v; want fenced off", n, err)
	}

	e.enqueue(inbox.Message{Source: "s", MessageID: "dead"})
	e.claim("w", time.Minute, 10)
	if _, err := e.in.Fail(e.ctx, "w", []inbox.Key{key("s", "dead")}, "poison"); err != nil {
		t.Fatal(err)
	}
	if p, err := process("dead"); err != nil || !p {
		t.Fatalf("dead: %v, %v", p, err)
	}
	mustEqual(t, "status", e.get("s", "dead").Status, inbox.StatusDone)
	mustEqual(t, "fn runs", runs, 3)
}

// Process: its own transaction, the effect once, fn's error returned.
func testProcess(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE seen (id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	fn := func(ctx context.Context, tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO seen (id) VALUES ('x')`) // a second run would violate the key
		return err
	}
	msg := inbox.Message{Source: "s", MessageID: "m", Topic: "t"}
	for i, want := range []bool{true, false, false} {
		p, err := e.in.Process(e.ctx, msg, fn)
		if err != nil || p != want {
			t.Fatalf("delivery %d = %v, %v; want %v", i, p, err, want)
		}
	}
	boom := errors.New("boom")
	if _, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "n"}, func(context.Context, *sqlx.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if _, err := e.in.Get(e.ctx, "s", "n"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("failed Process left a row: %v", err)
	}
}

// A new message.
func testEnqueue(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	t0 := e.clock.Now()
	binary := []byte{0, 1, 2, 0xff, 0xfe, '"', '\\', 0}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	h := sha256.Sum256(binary)
	for id, p := range map[string][]byte{"empty": {}, "binary": binary, "big": big, "json": []byte(`{"a": 1}`)} {
		hash := []byte(nil)
		if id == "binary" {
			hash = h[:]
		}
		if err := e.in.Enqueue(e.ctx, inbox.Message{Source: "src", MessageID: id, Topic: "Order.Created", Payload: p, Hash: hash}); err != nil {
			t.Fatalf("enqueue %s: %v", id, err)
		}
		rec := e.get("src", id)
		mustEqual(t, id+" status", rec.Status, inbox.StatusProcessing)
		mustEqual(t, id+" attempt", rec.Attempt, 0)
		mustEqual(t, id+" payload", bytes.Equal(rec.Payload, p), true)
		mustEqual(t, id+" payload not nil", rec.Payload != nil, true)
		mustEqual(t, id+" topic", rec.Topic, "Order.Created")
		mustEqual(t, id+" first seen", rec.FirstSeenAt, t0)
		mustEqual(t, id+" last seen", rec.LastSeenAt, t0)
		mustEqual(t, id+" next attempt", rec.NextAttemptAt, t0)
		mustEqual(t, id+" due", rec.DueAt.IsZero(), true)
		mustEqual(t, id+" lease", rec.LockedBy, "")
		mustEqual(t, id+" hash", bytes.Equal(rec.Hash, hash), true)
	}
	// Payloads never reach the log.
	if strings.Contains(e.logs.String(), "0123456789abcdef") || strings.Contains(e.logs.String(), `"a": 1`) {
		t.Fatal("a payload was logged")
	}
}

// Enqueueing a known message.
func testEnqueueUpsert(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	h1, h2 := sha256.Sum256([]byte("1")), sha256.Sum256([]byte("2"))
	t0 := e.clock.Now()
	e.enqueue(inbox.Message{Source: "s", MessageID: "p", Topic: "old", Payload: []byte("old"), Hash: h1[:]})
	// A Processing message with one failed attempt.
	e.claim("w", time.Minute, 1)
	if _, err := e.in.AbandonAfter(e.ctx, "w", []inbox.Key{key("s", "p")}, "flaky", time.Second); err != nil {
		t.Fatal(err)
	}
	t1 := e.clock.Advance(time.Hour)
	due := t1.Add(time.Hour)
	e.enqueue(inbox.Message{Source: "s", MessageID: "p", Topic: "new", Payload: []byte("new"), Hash: h2[:], DueAt: due})
	rec := e.get("s", "p")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "topic", rec.Topic, "new")
	mustEqual(t, "payload", string(rec.Payload), "new")
	mustEqual(t, "hash", bytes.Equal(rec.Hash, h2[:]), true)
	mustEqual(t, "due", rec.DueAt, due)
	mustEqual(t, "last seen", rec.LastSeenAt, t1)
	mustEqual(t, "first seen", rec.FirstSeenAt, t0)
	mustEqual(t, "attempt kept", rec.Attempt, 1)
	mustEqual(t, "last error kept", rec.LastError, "flaky")
	if len(e.logs.Lines("level=WARN", "different content hash", "message_id=p")) != 1 {
		t.Fatalf("no hash warning:\n%s", e.logs.String())
	}

	// Done: nothing changes but the last sighting.
	e.enqueue(inbox.Message{Source: "s", MessageID: "d", Topic: "t", Payload: []byte("v1")})
	e.claim("w", time.Minute, 10)
	if _, err := e.in.Ack(e.ctx, "w", []inbox.Key{key("s", "d")}); err != nil {
		t.Fatal(err)
	}
	t2 := e.clock.Advance(time.Minute)
	e.enqueue(inbox.Message{Source: "s", MessageID: "d", Topic: "t2", Payload: []byte("v2"), DueAt: t2.Add(time.Hour)})
	rec = e.get("s", "d")
	mustEqual(t, "Done status", rec.Status, inbox.StatusDone)
	mustEqual(t, "Done topic", rec.Topic, "t")
	mustEqual(t, "Done payload", string(rec.Payload), "v1")
	mustEqual(t, "Done due", rec.DueAt.IsZero(), true)
	mustEqual(t, "Done last seen", rec.LastSeenAt, t2)
	mustEqual(t, "not claimable", len(e.claim("w2", time.Minute, 10)), 0)

	// Seen (from a deduplication check) becomes Processing and claimable.
	if _, err := e.in.AlreadyProcessed(e.ctx, "s", "seen", nil); err != nil {
		t.Fatal(err)
	}
	t3 := e.clock.Advance(time.Minute)
	e.enqueue(inbox.Message{Source: "s", MessageID: "seen", Topic: "t", Payload: []byte("x")})
	rec = e.get("s", "seen")
	mustEqual(t, "Seen→", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "Seen next attempt", rec.NextAttemptAt, t3)
	mustEqual(t, "Seen topic", rec.Topic, "t")
	if got := keysOf(e.claim("w3", time.Minute, 10)); !slices.Contains(got, "s/seen") {
		t.Fatalf("claimed %v, want s/seen", got)
	}

	// Dead: fields updated, still Dead (a redelivery does not revive a
	// poison message).
	e.enqueue(inbox.Message{Source: "s", MessageID: "dead", Topic: "t", Payload: []byte("v1")})
	e.claim("w4", time.Minute, 10)
	if _, err := e.in.Fail(e.ctx, "w4", []inbox.Key{key("s", "dead")}, "poison"); err != nil {
		t.Fatal(err)
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "dead", Topic: "t9", Payload: []byte("v9")})
	rec = e.get("s", "dead")
	mustEqual(t, "Dead status", rec.Status, inbox.StatusDead)
	mustEqual(t, "Dead topic", rec.Topic, "t9")
	mustEqual(t, "Dead payload", string(rec.Payload), "v9")
	mustEqual(t, "Dead error", rec.LastError, "poison")
}

// Concurrent first enqueues of one message are safe.
func testEnqueueConcurrent(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	for round := range 10 {
		id := fmt.Sprintf("m%d", round)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				<-start
				errs <- e.in.Enqueue(e.ctx, inbox.Message{Source: "s", MessageID: id, Topic: "t", Payload: []byte{byte(g)}})
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	mustEqual(t, "rows", e.count(), 10)
	mustEqual(t, "claimed", len(e.claim("w", time.Minute, 100)), 10)
}

// Due times.
func testDueTime(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	now := e.clock.Now()
	e.enqueue(inbox.Message{Source: "s", MessageID: "future", DueAt: now.Add(time.Hour)})
	e.enqueue(inbox.Message{Source: "s", MessageID: "past", DueAt: now.Add(-time.Hour)})
	e.enqueue(inbox.Message{Source: "s", MessageID: "none"})
	// The record says when the message may be claimed: at its due time,
	// not at the retry time it also has (now).
	if rec, err := e.in.Get(e.ctx, "s", "future"); err != nil || !rec.NextAttemptAt.Equal(rec.DueAt) || !rec.DueAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("Get = NextAttemptAt %v, DueAt %v, %v; want both %v", rec.NextAttemptAt, rec.DueAt, err, now.Add(time.Hour))
	}
	if rec, err := e.in.Get(e.ctx, "s", "past"); err != nil || !rec.NextAttemptAt.Equal(now) {
		t.Fatalf("Get past = NextAttemptAt %v, %v; want %v", rec.NextAttemptAt, err, now)
	}
	got := keysOf(e.claim("w", 2*time.Hour, 10))
	slices.Sort(got)
	mustEqual(t, "claimed", strings.Join(got, ","), "s/none,s/past")
	e.clock.Advance(time.Hour - time.Millisecond)
	mustEqual(t, "before due", len(e.claim("w2", time.Second, 10)), 0)
	e.clock.Advance(time.Millisecond)
	mustEqual(t, "at due", strings.Join(keysOf(e.claim("w2", time.Second, 10)), ","), "s/future")
}

// Claiming.
func testClaim(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	// One message per state; only the Processing one is claimable.
	if _, err := e.in.AlreadyProcessed(e.ctx, "s", "seen", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.in.MarkProcessed(e.ctx, "s", "done"); err != nil {
		t.Fatal(err)
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "dead"})
	e.claim("x", time.Minute, 10)
	if _, err := e.in.Fail(e.ctx, "x", []inbox.Key{key("s", "dead")}, "e"); err != nil {
		t.Fatal(err)
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "p1", Topic: "t", Payload: []byte("payload")})
	now := e.clock.Now()
	recs := e.claim("w1", 30*time.Second, 10)
	mustEqual(t, "claimed", strings.Join(keysOf(recs), ","), "s/p1")
	r := recs[0]
	mustEqual(t, "owner", r.LockedBy, "w1")
	mustEqual(t, "until", r.LockedUntil, now.Add(30*time.Second))
	mustEqual(t, "payload", string(r.Payload), "payload")
	stored := e.get("s", "p1")
	mustEqual(t, "stored owner", stored.LockedBy, "w1")
	mustEqual(t, "stored until", stored.LockedUntil, now.Add(30*time.Second))
	mustEqual(t, "claim logged at debug", len(e.logs.Lines("level=DEBUG", "inbox: claimed", "owner=w1", "messages=1")), 1)

	// Leased messages are not claimed, by others or by the owner.
	mustEqual(t, "other owner", len(e.claim("w2", time.Minute, 10)), 0)
	mustEqual(t, "same owner", len(e.claim("w1", time.Minute, 10)), 0)
	e.clock.Advance(30 * time.Second)
	mustEqual(t, "lease ends", len(e.claim("w2", time.Minute, 10)), 0) // not yet expired: until == now
	e.clock.Advance(time.Microsecond)
	mustEqual(t, "after expiry", strings.Join(keysOf(e.claim("w2", time.Minute, 10)), ","), "s/p1")

	// Batch limits, empty result.
	for i := range 5 {
		e.enqueue(inbox.Message{Source: "b", MessageID: fmt.Sprint(i)})
	}
	for _, want := range []int{2, 2, 1, 0, 0} {
		got, err := e.in.Claim(e.ctx, "w3", time.Minute, 2)
		if err != nil || len(got) != want || got == nil && want > 0 {
			t.Fatalf("claim = %v, %v; want %d", keysOf(got), err, want)
		}
	}

	// The next attempt time holds a message back.
	e.enqueue(inbox.Message{Source: "n", MessageID: "1"})
	e.claim("w4", time.Minute, 1)
	if _, err := e.in.AbandonAfter(e.ctx, "w4", []inbox.Key{key("n", "1")}, "", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "before next attempt", len(e.claim("w5", time.Minute, 10)), 0)
	e.clock.Advance(10 * time.Second)
	mustEqual(t, "at next attempt", len(e.claim("w5", time.Minute, 10)), 1)
}

// Concurrent claimers never share a message.
func testClaimConcurrent(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	const total = 120
	for i := range total {
		e.enqueue(inbox.Message{Source: "s", MessageID: fmt.Sprintf("%03d", i)})
	}
	var (
		mu  sync.Mutex
		got = map[string]string{}
		wg  sync.WaitGroup
	)
	for w := range 6 {
		owner := fmt.Sprintf("worker-%d", w)
		wg.Go(func() {
			for {
				recs, err := e.in.Claim(e.ctx, owner, time.Minute, 7)
				if err != nil {
					t.Errorf("%s: %v", owner, err)
					return
				}
				if len(recs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range recs {
					if prev, dup := got[r.MessageID]; dup {
						t.Errorf("%s claimed by %s and %s", r.MessageID, prev, owner)
					}
					got[r.MessageID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	mustEqual(t, "claimed", len(got), total)
}

// Acknowledging.
func testAck(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	e.enqueue(inbox.Message{Source: "s", MessageID: "1"})
	e.enqueue(inbox.Message{Source: "s", MessageID: "2"})
	e.claim("w", time.Minute, 10)
	keys := []inbox.Key{key("s", "1"), key("s", "2"), key("s", "1"), key("s", "unknown")}
	if n, err := e.in.Ack(e.ctx, "intruder", keys); err != nil || n != 0 {
		t.Fatalf("wrong owner: %d, %v", n, err)
	}
	mustEqual(t, "still leased", e.get("s", "1").LockedBy, "w")
	if n, err := e.in.Ack(e.ctx, "w", keys); err != nil || n != 2 { // duplicates and unknown ids tolerated
		t.Fatalf("ack = %d, %v", n, err)
	}
	for _, id := range []string{"1", "2"} {
		rec := e.get("s", id)
		mustEqual(t, "status", rec.Status, inbox.StatusDone)
		mustEqual(t, "owner cleared", rec.LockedBy, "")
		mustEqual(t, "until cleared", rec.LockedUntil.IsZero(), true)
	}
	e.clock.Advance(time.Hour)
	mustEqual(t, "claimable after ack", len(e.claim("w2", time.Minute, 10)), 0)
	for _, ks := range [][]inbox.Key{nil, {}} {
		if n, err := e.in.Ack(e.ctx, "w", ks); err != nil || n != 0 {
			t.Fatalf("empty ack = %d, %v", n, err)
		}
	}
	if n, err := e.in.Ack(e.ctx, "w", []inbox.Key{key("s", "1")}); err != nil || n != 0 {
		t.Fatalf("second ack = %d, %v", n, err)
	}
}

// Key lists longer than one statement's chunk are handled in one
// transaction, duplicates included.
func testManyKeys(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	const total = 600
	var keys []inbox.Key
	for i := range total {
		id := fmt.Sprintf("%04d", i)
		e.enqueue(inbox.Message{Source: "s", MessageID: id})
		keys = append(keys, key("s", id), key("s", id))
	}
	mustEqual(t, "claimed", len(e.claim("w", time.Minute, total)), total)
	if n, err := e.in.Abandon(e.ctx, "w", keys, "x"); err != nil || n != total {
		t.Fatalf("abandon = %d, %v", n, err)
	}
	e.clock.Advance(time.Minute)
	mustEqual(t, "claimed again", len(e.claim("w", time.Minute, total)), total)
	if n, err := e.in.Ack(e.ctx, "w", keys[:2*total-2]); err != nil || n != total-1 {
		t.Fatalf("ack = %d, %v", n, err)
	}
	if n, err := e.in.Fail(e.ctx, "w", keys, "x"); err != nil || n != 1 {
		t.Fatalf("fail = %d, %v", n, err)
	}
	mustEqual(t, "last", e.get("s", fmt.Sprintf("%04d", total-1)).Status, inbox.StatusDead)
	mustEqual(t, "first: claimed twice", e.get("s", "0000").Attempt, 2)
}

// Abandoning and the backoff.
func testAbandon(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	k := []inbox.Key{key("s", "1")}
	e.enqueue(inbox.Message{Source: "s", MessageID: "1"})
	e.claim("w", time.Minute, 1)
	if n, err := e.in.Abandon(e.ctx, "intruder", k, "x"); err != nil || n != 0 {
		t.Fatalf("wrong owner: %d, %v", n, err)
	}
	now := e.clock.Now()
	if n, err := e.in.Abandon(e.ctx, "w", append(k, key("s", "nope")), "boom"); err != nil || n != 1 {
		t.Fatalf("abandon = %d, %v", n, err)
	}
	rec := e.get("s", "1")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "owner", rec.LockedBy, "")
	mustEqual(t, "until", rec.LockedUntil.IsZero(), true)
	mustEqual(t, "attempt", rec.Attempt, 1)
	mustEqual(t, "error", rec.LastError, "boom")
	mustEqual(t, "next attempt", rec.NextAttemptAt, now.Add(2*time.Second))
	mustEqual(t, "before backoff", len(e.claim("w", time.Minute, 1)), 0)
	e.clock.Advance(2 * time.Second)
	mustEqual(t, "after backoff", len(e.claim("w", time.Minute, 1)), 1)

	now = e.clock.Now()
	if _, err := e.in.Abandon(e.ctx, "w", k, ""); err != nil {
		t.Fatal(err)
	}
	rec = e.get("s", "1")
	mustEqual(t, "attempt", rec.Attempt, 2)
	mustEqual(t, "next attempt", rec.NextAttemptAt, now.Add(4*time.Second))
	mustEqual(t, "empty error stored as none", rec.LastError, "")

	e.clock.Advance(4 * time.Second)
	e.claim("w", time.Minute, 1)
	now = e.clock.Now()
	if _, err := e.in.AbandonAfter(e.ctx, "w", k, "later", 90*time.Second); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "fixed delay", e.get("s", "1").NextAttemptAt, now.Add(90*time.Second))
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := e.in.AbandonAfter(e.ctx, "w", k, "", d); !errors.Is(err, inbox.ErrInvalidDelay) {
			t.Fatalf("delay %v: %v", d, err)
		}
	}
	if n, err := e.in.Abandon(e.ctx, "w", nil, "x"); err != nil || n != 0 {
		t.Fatalf("empty abandon = %d, %v", n, err)
	}

	// A custom backoff.
	c := newEnv(t, open, inbox.Config{Backoff: retry.PolicyFunc(func(attempts int) time.Duration {
		return time.Duration(attempts) * 7 * time.Second
	})})
	c.enqueue(inbox.Message{Source: "s", MessageID: "1"})
	c.claim("w", time.Minute, 1)
	now = c.clock.Now()
	if _, err := c.in.Abandon(c.ctx, "w", k, "x"); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "custom backoff", c.get("s", "1").NextAttemptAt, now.Add(7*time.Second))
}

// Failing.
func testFail(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	k := []inbox.Key{key("s", "1")}
	e.enqueue(inbox.Message{Source: "s", MessageID: "1"})
	e.claim("w", time.Minute, 1)
	if n, err := e.in.Fail(e.ctx, "intruder", k, "x"); err != nil || n != 0 {
		t.Fatalf("wrong owner: %d, %v", n, err)
	}
	if n, err := e.in.Fail(e.ctx, "w", append(k, key("s", "nope")), "poison message"); err != nil || n != 1 {
		t.Fatalf("fail = %d, %v", n, err)
	}
	rec := e.get("s", "1")
	mustEqual(t, "status", rec.Status, inbox.StatusDead)
	mustEqual(t, "error", rec.LastError, "poison message")
	mustEqual(t, "owner", rec.LockedBy, "")
	mustEqual(t, "until", rec.LockedUntil.IsZero(), true)
	mustEqual(t, "attempt counts the failure", rec.Attempt, 1)
	e.clock.Advance(time.Hour)
	mustEqual(t, "claimable", len(e.claim("w", time.Minute, 10)), 0)
	if n, err := e.in.Fail(e.ctx, "w", nil, "x"); err != nil || n != 0 {
		t.Fatalf("empty fail = %d, %v", n, err)
	}
	if n, err := e.in.Fail(e.ctx, "w", k, "again"); err != nil || n != 0 {
		t.Fatalf("fail of a Dead message = %d, %v", n, err)
	}
}

// Reaping expired leases.
func testReap(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	for _, id := range []string{"a-done", "b-dead", "c-long", "d-short"} {
		e.enqueue(inbox.Message{Source: "s", MessageID: id})
	}
	mustEqual(t, "claim", len(e.claim("w", time.Hour, 2)), 2) // a-done, b-dead
	if _, err := e.in.Ack(e.ctx, "w", []inbox.Key{key("s", "a-done")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.in.Fail(e.ctx, "w", []inbox.Key{key("s", "b-dead")}, "x"); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "claim long", len(e.claim("w", time.Hour, 1)), 1)    // c-long
	mustEqual(t, "claim short", len(e.claim("w", time.Second, 1)), 1) // d-short
	// A Done row carrying a stale lease (written by hand): never touched.
	if _, err := e.db.ExecContext(e.ctx, e.db.Rebind("UPDATE "+inbox.DefaultTable+" SET locked_by = 'w', locked_until = first_seen_at WHERE message_id = ?"), "a-done"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	n, err := e.in.ReapExpired(e.ctx)
	if err != nil || n != 1 {
		t.Fatalf("reap = %d, %v; want 1", n, err)
	}
	rec := e.get("s", "d-short")
	mustEqual(t, "reaped owner", rec.LockedBy, "")
	mustEqual(t, "reaped until", rec.LockedUntil.IsZero(), true)
	mustEqual(t, "reaped status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "reaped attempt (the claim's, still charged)", rec.Attempt, 1)
	mustEqual(t, "long lease kept", e.get("s", "c-long").LockedBy, "w")
	mustEqual(t, "Done untouched", e.get("s", "a-done").LockedBy, "w")
	mustEqual(t, "Done status", e.get("s", "a-done").Status, inbox.StatusDone)
	mustEqual(t, "Dead status", e.get("s", "b-dead").Status, inbox.StatusDead)
	mustEqual(t, "claim after reap", strings.Join(keysOf(e.claim("w2", time.Minute, 10)), ","), "s/d-short")
	if n, err := e.in.ReapExpired(e.ctx); err != nil || n != 0 {
		t.Fatalf("second reap = %d, %v", n, err)
	}
}

// Cleanup of old Done messages, in batches.
func testCleanup(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	for i := range 5 {
		if err := e.in.MarkProcessed(e.ctx, "old", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.in.AlreadyProcessed(e.ctx, "old", "seen", nil); err != nil {
		t.Fatal(err)
	}
	e.enqueue(inbox.Message{Source: "old", MessageID: "processing"})
	e.enqueue(inbox.Message{Source: "old", MessageID: "dead"})
	e.claim("w", time.Minute, 1) // "dead" sorts first with equal next attempts
	if n, err := e.in.Fail(e.ctx, "w", []inbox.Key{key("old", "dead")}, "x"); err != nil || n != 1 {
		t.Fatalf("fail = %d, %v", n, err)
	}
	e.clock.Advance(20 * 24 * time.Hour)
	for i := range 2 {
		if err := e.in.MarkProcessed(e.ctx, "recent", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// A redelivery renews an old Done message's retention.
	if done, err := e.in.AlreadyProcessed(e.ctx, "old", "4", nil); err != nil || !done {
		t.Fatalf("old/4: %v, %v", done, err)
	}
	e.clock.Advance(11 * 24 * time.Hour)
	n, err := e.in.Cleanup(e.ctx, 30*24*time.Hour, 2)
	if err != nil || n != 4 {
		t.Fatalf("cleanup = %d, %v; want 4", n, err)
	}
	for i := range 4 {
		mustEqual(t, "deleted", e.status("old", fmt.Sprint(i)), inbox.Status(-1))
	}
	mustEqual(t, "renewed kept", e.status("old", "4"), inbox.StatusDone)
	mustEqual(t, "Seen kept", e.status("old", "seen"), inbox.StatusSeen)
	mustEqual(t, "Processing kept", e.status("old", "processing"), inbox.StatusProcessing)
	mustEqual(t, "Dead kept", e.status("old", "dead"), inbox.StatusDead)
	mustEqual(t, "recent kept", e.status("recent", "0"), inbox.StatusDone)
	mustEqual(t, "rows", e.count(), 6)
	if n, err := e.in.Cleanup(e.ctx, 30*24*time.Hour, 2); err != nil || n != 0 {
		t.Fatalf("second cleanup = %d, %v", n, err)
	}
	if _, err := e.in.Cleanup(e.ctx, 0, 2); !errors.Is(err, inbox.ErrInvalidRetention) {
		t.Fatalf("zero retention: %v", err)
	}
	if _, err := e.in.Cleanup(e.ctx, time.Hour, 0); !errors.Is(err, inbox.ErrInvalidBatchSize) {
		t.Fatalf("zero batch: %v", err)
	}
}

// Retention counts from the completion when it came after the last
// sighting: a message acknowledged 40 days after its enqueue (a far DueAt)
// was deleted by the next cleanup, and processed again when redelivered a
// second later. ProcessTx's Done mark and a Dead message record their time
// the same way.
func testRetentionFromCompletion(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	const retention = 30 * 24 * time.Hour
	msg := inbox.Message{Source: "s", MessageID: "due-late", DueAt: e.clock.Now().Add(40 * 24 * time.Hour)}
	e.enqueue(msg)
	e.enqueue(inbox.Message{Source: "s", MessageID: "dead"})
	e.clock.Advance(40*24*time.Hour + time.Second)
	mustEqual(t, "claimed", len(e.claim("w", time.Minute, 2)), 2)
	doneAt := e.clock.Advance(time.Second)
	if n, err := e.in.Ack(e.ctx, "w", []inbox.Key{msg.Key()}); err != nil || n != 1 {
		t.Fatalf("ack = %d, %v", n, err)
	}
	mustEqual(t, "last seen after the ack", e.get("s", "due-late").LastSeenAt, doneAt)
	deadAt := e.clock.Advance(time.Second)
	if n, err := e.in.Fail(e.ctx, "w", []inbox.Key{key("s", "dead")}, "x"); err != nil || n != 1 {
		t.Fatalf("fail = %d, %v", n, err)
	}
	mustEqual(t, "last seen after the fail", e.get("s", "dead").LastSeenAt, deadAt)

	// ProcessTx: the Done mark's time, not the delivery's.
	if _, err := e.in.AlreadyProcessed(e.ctx, "s", "tx", nil); err != nil {
		t.Fatal(err)
	}
	var markedAt time.Time
	if p, err := e.in.Process(e.ctx, inbox.Message{Source: "s", MessageID: "tx"}, func(context.Context, *sqlx.Tx) error {
		markedAt = e.clock.Advance(time.Hour) // a long business function
		return nil
	}); err != nil || !p {
		t.Fatalf("process = %v, %v", p, err)
	}
	mustEqual(t, "last seen after ProcessTx", e.get("s", "tx").LastSeenAt, markedAt)

	e.clock.Advance(time.Second)
	if n, err := e.in.Cleanup(e.ctx, retention, 10); err != nil || n != 0 {
		t.Fatalf("cleanup right after the completion = %d, %v; want 0", n, err)
	}
	msg.DueAt = time.Time{}
	e.enqueue(msg) // a redelivery
	mustEqual(t, "redelivered after completion", e.get("s", "due-late").Status, inbox.StatusDone)
	e.clock.Advance(retention + time.Second)
	if n, err := e.in.Cleanup(e.ctx, retention, 10); err != nil || n != 2 {
		t.Fatalf("cleanup past the retention = %d, %v; want 2", n, err)
	}
	mustEqual(t, "Dead kept", e.status("s", "dead"), inbox.StatusDead)
}

// Invalid arguments
// are rejected with a typed error and nothing is written.
func testValidation(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	ctx := e.ctx
	long := strings.Repeat("x", inbox.MaxIDLen+1)
	longRunes := strings.Repeat("é", inbox.MaxIDLen+1)
	ok := inbox.Message{Source: "s", MessageID: "m", Topic: "t", Payload: []byte{}}
	with := func(f func(*inbox.Message)) inbox.Message { m := ok; f(&m); return m }
	noop := func(context.Context) error { t.Error("fn ran for an invalid message"); return nil }
	// processTx calls ProcessTx in a transaction rolled back at once.
	processTx := func(m inbox.Message) error {
		tx, err := e.db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck
		_, err = e.in.ProcessTx(ctx, tx, m, noop)
		return err
	}
	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"enqueue empty id", inbox.ErrEmptyMessageID, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.MessageID = "" })) }},
		{"enqueue long id", inbox.ErrMessageIDTooLong, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.MessageID = long })) }},
		{"enqueue long id runes", inbox.ErrMessageIDTooLong, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.MessageID = longRunes })) }},
		{"enqueue empty source", inbox.ErrEmptySource, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Source = "" })) }},
		{"enqueue long source", inbox.ErrSourceTooLong, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Source = long })) }},
		{"enqueue empty topic", inbox.ErrEmptyTopic, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Topic = "" })) }},
		{"enqueue long topic", inbox.ErrTopicTooLong, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Topic = long })) }},
		{"enqueue nil payload", inbox.ErrNilPayload, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Payload = nil })) }},
		{"enqueue invalid utf8", inbox.ErrInvalidText, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.MessageID = "\xff" })) }},
		{"enqueue NUL", inbox.ErrInvalidText, func() error { return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Source = "a\x00b" })) }},
		{"enqueue payload too large", inbox.ErrPayloadTooLarge, func() error {
			return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Payload = make([]byte, inbox.MaxPayloadBytes+1) }))
		}},
		{"enqueue payload of 20 MiB", inbox.ErrPayloadTooLarge, func() error {
			return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Payload = make([]byte, 20<<20) }))
		}},
		{"process payload too large", inbox.ErrPayloadTooLarge, func() error {
			return processTx(with(func(m *inbox.Message) { m.Payload = make([]byte, inbox.MaxPayloadBytes+1) }))
		}},
		{"enqueue due in year 10000", inbox.ErrDueAtOutOfRange, func() error {
			return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.DueAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }))
		}},
		{"enqueue due in year 295000", inbox.ErrDueAtOutOfRange, func() error {
			return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.DueAt = time.Date(295000, 1, 1, 0, 0, 0, 0, time.UTC) }))
		}},
		{"enqueue due in year 0", inbox.ErrDueAtOutOfRange, func() error {
			return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.DueAt = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC) }))
		}},
		{"enqueue long hash", inbox.ErrHashTooLong, func() error {
			return e.in.Enqueue(ctx, with(func(m *inbox.Message) { m.Hash = make([]byte, inbox.MaxHashLen+1) }))
		}},
		{"check empty id", inbox.ErrEmptyMessageID, func() error { _, err := e.in.AlreadyProcessed(ctx, "s", "", nil); return err }},
		{"check empty source", inbox.ErrEmptySource, func() error { _, err := e.in.AlreadyProcessed(ctx, "", "m", nil); return err }},
		{"check long id", inbox.ErrMessageIDTooLong, func() error { _, err := e.in.AlreadyProcessed(ctx, "s", long, nil); return err }},
		{"check long source", inbox.ErrSourceTooLong, func() error { _, err := e.in.AlreadyProcessed(ctx, long, "m", nil); return err }},
		{"mark empty id", inbox.ErrEmptyMessageID, func() error { return e.in.MarkProcessed(ctx, "s", "") }},
		{"get empty id", inbox.ErrEmptyMessageID, func() error { _, err := e.in.Get(ctx, "s", ""); return err }},
		{"process empty id", inbox.ErrEmptyMessageID, func() error { return processTx(with(func(m *inbox.Message) { m.MessageID = "" })) }},
		{"process long topic", inbox.ErrTopicTooLong, func() error { return processTx(with(func(m *inbox.Message) { m.Topic = long })) }},
		{"claim empty owner", inbox.ErrEmptyOwner, func() error { _, err := e.in.Claim(ctx, "", time.Second, 1); return err }},
		{"claim long owner", inbox.ErrInvalidOwner, func() error { _, err := e.in.Claim(ctx, strings.Repeat("o", 65), time.Second, 1); return err }},
		{"claim zero lease", inbox.ErrInvalidLease, func() error { _, err := e.in.Claim(ctx, "w", 0, 1); return err }},
		{"claim negative lease", inbox.ErrInvalidLease, func() error { _, err := e.in.Claim(ctx, "w", -time.Second, 1); return err }},
		{"claim zero batch", inbox.ErrInvalidBatchSize, func() error { _, err := e.in.Claim(ctx, "w", time.Second, 0); return err }},
		{"claim negative batch", inbox.ErrInvalidBatchSize, func() error { _, err := e.in.Claim(ctx, "w", time.Second, -1); return err }},
		{"ack empty owner", inbox.ErrEmptyOwner, func() error { _, err := e.in.Ack(ctx, "", nil); return err }},
		{"abandon empty owner", inbox.ErrEmptyOwner, func() error { _, err := e.in.Abandon(ctx, "", nil, ""); return err }},
		{"abandon zero delay", inbox.ErrInvalidDelay, func() error { _, err := e.in.AbandonAfter(ctx, "w", nil, "", 0); return err }},
		{"fail empty owner", inbox.ErrEmptyOwner, func() error { _, err := e.in.Fail(ctx, "", nil, "x"); return err }},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		var ve *core.ValidationError
		if !errors.As(err, &ve) || ve.Field == "" {
			t.Errorf("%s: %v is not a *core.ValidationError naming the field", c.name, err)
		}
		if !strings.HasPrefix(err.Error(), "outbox: inbox: ") {
			t.Errorf("%s: %q lacks the package prefix", c.name, err)
		}
	}
	mustEqual(t, "rows written", e.count(), 0)

	// Exactly at the limits is fine.
	at := strings.Repeat("é", inbox.MaxIDLen)
	if err := e.in.Enqueue(ctx, inbox.Message{Source: at, MessageID: at, Topic: at, Payload: make([]byte, inbox.MaxPayloadBytes), Hash: make([]byte, inbox.MaxHashLen)}); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	rec := e.get(at, at)
	mustEqual(t, "topic at the limit", rec.Topic, at)
	mustEqual(t, "payload at the limit", len(rec.Payload), inbox.MaxPayloadBytes)
	last := time.Date(core.MaxTimeYear, 12, 31, 23, 59, 59, 999999000, time.UTC)
	if err := e.in.Enqueue(ctx, inbox.Message{Source: "s", MessageID: "last", Topic: "t", Payload: []byte{}, DueAt: last}); err != nil {
		t.Fatalf("due at the last storable time: %v", err)
	}
	if got := e.get("s", "last").DueAt; !got.Equal(last) {
		t.Fatalf("DueAt = %v, want %v", got, last)
	}
}
