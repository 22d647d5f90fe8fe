package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/jdbcstore"
)

// testInbox checks the dialect's inbox table (Dialect.InboxSchema) through
// package inbox, on the database of a fresh store: the schema applies
// twice, a message is processed once however often and however
// concurrently it is delivered, a failed processing leaves it to the next
// delivery, and the work queue hands each message to one claimer only.
func (s *suite) testInbox(t *testing.T) {
	t.Parallel()
	t.Run("Schema", s.testInboxSchema)
	t.Run("ProcessOnce", s.testInboxProcessOnce)
	t.Run("ProcessConcurrent", s.testInboxProcessConcurrent)
	t.Run("WorkQueue", s.testInboxWorkQueue)
}

// newInbox returns an inbox on the database of a fresh store, with its
// schema applied, and that database.
func (s *suite) newInbox(t *testing.T) (*inbox.Inbox, *sqlx.DB) {
	t.Helper()
	db := s.newStore(t, nil, jdbcstore.Config{}).DB()
	in, err := inbox.New(t.Context(), db, inbox.Config{Dialect: s.h.Dialect, Table: "storetest_inbox"})
	if err != nil {
		t.Fatalf("inbox.New: %v", err)
	}
	return in, db
}

func (s *suite) testInboxSchema(t *testing.T) {
	t.Parallel()
	in, db := s.newInbox(t)
	// Applying the schema again changes nothing and fails nothing.
	if err := in.ApplySchema(t.Context()); err != nil {
		t.Errorf("ApplySchema again: %v", err)
	}
	again, err := inbox.New(t.Context(), db, inbox.Config{Dialect: s.h.Dialect, Table: "storetest_inbox"})
	if err != nil {
		t.Fatalf("inbox.New on an existing table: %v", err)
	}
	if again.Table() != "storetest_inbox" {
		t.Errorf("Table() = %q", again.Table())
	}
}

// effects creates a business table and returns a function that counts the
// rows of one key in it and the statement that inserts one.
func effects(t *testing.T, db *sqlx.DB, d jdbcstore.Dialect) (count func(key string) int, insert string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE storetest_effect (k VARCHAR(64) NOT NULL)`); err != nil {
		t.Fatalf("create the business table: %v", err)
	}
	count = func(key string) int {
		var n int
		q := sqlx.Rebind(d.BindType(), `SELECT COUNT(*) FROM storetest_effect WHERE k = ?`)
		if err := db.QueryRowContext(t.Context(), q, key).Scan(&n); err != nil {
			t.Fatalf("count effects: %v", err)
		}
		return n
	}
	return count, sqlx.Rebind(d.BindType(), `INSERT INTO storetest_effect (k) VALUES (?)`)
}

func (s *suite) testInboxProcessOnce(t *testing.T) {
	t.Parallel()
	in, db := s.newInbox(t)
	count, insert := effects(t, db, s.h.Dialect)
	ctx := t.Context()
	msg := inbox.Message{Source: "storetest", MessageID: "m-1", Topic: "t"}
	write := func(ctx context.Context, tx *sqlx.Tx) error {
		_, err := tx.ExecContext(ctx, insert, msg.MessageID)
		return err
	}

	// A failed processing commits nothing: the next delivery runs again.
	boom := errors.New("storetest: business failure")
	processed, err := in.Process(ctx, msg, func(ctx context.Context, tx *sqlx.Tx) error {
		if err := write(ctx, tx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || processed {
		t.Fatalf("Process with a failing fn = %v, %v; want false and its error", processed, err)
	}
	if n := count(msg.MessageID); n != 0 {
		t.Fatalf("a failed processing left %d business rows, want 0", n)
	}

	if processed, err := in.Process(ctx, msg, write); err != nil || !processed {
		t.Fatalf("Process = %v, %v; want true", processed, err)
	}
	calls := 0
	if processed, err := in.Process(ctx, msg, func(context.Context, *sqlx.Tx) error { calls++; return nil }); err != nil || processed || calls != 0 {
		t.Fatalf("Process of a Done message = %v, %v, fn ran %d times; want false, nil, 0", processed, err, calls)
	}
	if n := count(msg.MessageID); n != 1 {
		t.Errorf("business rows = %d, want 1", n)
	}
	rec, err := in.Get(ctx, msg.Source, msg.MessageID)
	if err != nil || rec.Status != inbox.StatusDone {
		t.Errorf("Get = %+v, %v; want a Done record", rec, err)
	}
	if done, err := in.AlreadyProcessed(ctx, msg.Source, msg.MessageID, nil); err != nil || !done {
		t.Errorf("AlreadyProcessed = %v, %v; want true", done, err)
	}
	// The key is exact: another case is another message.
	if done, err := in.AlreadyProcessed(ctx, msg.Source, "M-1", nil); err != nil || done {
		t.Errorf("AlreadyProcessed(M-1) = %v, %v; want false", done, err)
	}
}

func (s *suite) testInboxProcessConcurrent(t *testing.T) {
	t.Parallel()
	const deliveries = 8
	in, db := s.newInbox(t)
	count, insert := effects(t, db, s.h.Dialect)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	msg := inbox.Message{Source: "storetest", MessageID: "concurrent"}
	var processed atomic.Int32
	errs := make(chan error, deliveries)
	var wg sync.WaitGroup
	for range deliveries {
		wg.Go(func() {
			ok, err := in.Process(ctx, msg, func(ctx context.Context, tx *sqlx.Tx) error {
				_, err := tx.ExecContext(ctx, insert, msg.MessageID)
				return err
			})
			if err != nil {
				errs <- err
			}
			if ok {
				processed.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Process: %v", err)
	}
	if n := processed.Load(); n != 1 {
		t.Errorf("%d of %d concurrent deliveries reported processed, want 1", n, deliveries)
	}
	if n := count(msg.MessageID); n != 1 {
		t.Errorf("business rows = %d, want 1", n)
	}
}

func (s *suite) testInboxWorkQueue(t *testing.T) {
	t.Parallel()
	const messages, claimers = 40, 4
	in, _ := s.newInbox(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range messages {
		msg := inbox.Message{Source: "storetest", MessageID: fmt.Sprintf("q-%02d", i), Topic: "t", Payload: []byte{byte(i)}}
		if err := in.Enqueue(ctx, msg); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}

	// Concurrent claimers never get the same message; together they get
	// every one.
	var (
		mu      sync.Mutex
		claimed = map[string]string{}
		errs    []error
	)
	var wg sync.WaitGroup
	for c := range claimers {
		owner := fmt.Sprintf("storetest-%d", c)
		wg.Go(func() {
			for {
				recs, err := in.Claim(ctx, owner, time.Minute, 3)
				if err != nil || len(recs) == 0 {
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					return
				}
				keys := make([]inbox.Key, len(recs))
				mu.Lock()
				for i, r := range recs {
					if prev, dup := claimed[r.MessageID]; dup {
						errs = append(errs, fmt.Errorf("%s claimed by %s and %s", r.MessageID, prev, owner))
					}
					claimed[r.MessageID] = owner
					keys[i] = r.Key()
				}
				mu.Unlock()
				if n, err := in.Ack(ctx, owner, keys); err != nil || n != len(keys) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("ack by %s = %d, %v; want %d", owner, n, err, len(keys)))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(claimed) != messages {
		ids := make([]string, 0, len(claimed))
		for id := range claimed {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		t.Errorf("claimed %d messages, want %d: %v", len(claimed), messages, ids)
	}
	counts, err := in.CountByStatus(ctx)
	if err != nil || counts[inbox.StatusDone] != messages {
		t.Errorf("CountByStatus = %v, %v; want %d Done", counts, err, messages)
	}

	// A redelivery of a Done message changes nothing.
	if err := in.Enqueue(ctx, inbox.Message{Source: "storetest", MessageID: "q-00", Topic: "t", Payload: []byte{0}}); err != nil {
		t.Fatalf("Enqueue again: %v", err)
	}
	if recs, err := in.Claim(ctx, "storetest-late", time.Minute, 10); err != nil || len(recs) != 0 {
		t.Errorf("Claim after a Done message was enqueued again = %d records, %v; want none", len(recs), err)
	}

	// A failed message goes Dead with its error.
	if err := in.Enqueue(ctx, inbox.Message{Source: "storetest", MessageID: "fails", Topic: "t", Payload: []byte{}}); err != nil {
		t.Fatal(err)
	}
	recs, err := in.Claim(ctx, "storetest-f", time.Minute, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Claim = %d records, %v; want 1", len(recs), err)
	}
	if n, err := in.Fail(ctx, "storetest-f", []inbox.Key{recs[0].Key()}, "storetest: broken"); err != nil || n != 1 {
		t.Fatalf("Fail = %d, %v", n, err)
	}
	rec, err := in.Get(ctx, "storetest", "fails")
	if err != nil || rec.Status != inbox.StatusDead || rec.LastError != "storetest: broken" || rec.Attempt != 1 {
		t.Errorf("Get after Fail = %+v, %v; want Dead, attempt 1, its error", rec, err)
	}
}
