package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

// benchOutbox is an outbox on a fresh SQLite file with a no-op listener.
func benchOutbox(b *testing.B) (*outbox.Outbox, func()) {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	db.MustExec(`CREATE TABLE orders (ref TEXT NOT NULL, amount INTEGER NOT NULL)`)
	ob, err := outbox.New(ctx, db, outbox.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ob.RegisterFunc("OrderPlaced", func(context.Context, outbox.Envelope) error { return nil })
	if err := ob.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return ob, func() { _ = ob.Close(ctx); _ = db.Close() }
}

// BenchmarkPublishSQLite measures a business transaction that writes one
// row and publishes one event, with the dispatcher running (embedded SQLite,
// WAL). Compare with BenchmarkBareInsertSQLite: the same transaction with
// an equivalent plain INSERT.
func BenchmarkPublishSQLite(b *testing.B) {
	ob, done := benchOutbox(b)
	defer done()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (ref, amount) VALUES (?, ?)`, "o-1", 42); err != nil {
				return err
			}
			env, err := outbox.NewEvent("OrderPlaced").AggregateType("Order").AggregateID("o-1").
				PayloadJSONString(`{"ref":"o-1","amount":42}`).Build()
			if err != nil {
				return err
			}
			_, err = ob.Publish(ctx, env)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareInsertSQLite is the floor of BenchmarkPublishSQLite: the
// business row and an equivalent outbox-shaped row in one transaction,
// without the framework.
func BenchmarkBareInsertSQLite(b *testing.B) {
	ob, done := benchOutbox(b)
	defer done()
	db := parts.Outbox(ob).Store.DB()
	// The same schema as the outbox table (indexes included), under another name.
	bare, err := jdbcstore.New(db, jdbcstore.Config{Table: "bare_events"})
	if err != nil {
		b.Fatal(err)
	}
	if err := bare.ApplySchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (ref, amount) VALUES (?, ?)`, "o-1", 42); err != nil {
			b.Fatal(err)
		}
		env, _ := outbox.JSONEvent("OrderPlaced", `{"ref":"o-1","amount":42}`)
		if _, err := tx.ExecContext(ctx, `INSERT INTO bare_events (event_id, event_type, aggregate_type, aggregate_id,
			tenant_id, occurred_at, payload, payload_kind, headers, status, attempts, available_at, created_at,
			locked_by, locked_until) VALUES (?, ?, ?, ?, NULL, ?, ?, 0, NULL, 0, 0, ?, ?, ?, ?)`,
			env.ID(), "OrderPlaced", "Order", "o-1", i, env.RawPayload(), i, i, "node", i+1000); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBatch is the number of events per transaction of the batch
// benchmarks.
const benchBatch = 10

// benchEvents builds benchBatch events of one order.
func benchEvents(b *testing.B) []outbox.Envelope {
	envs := make([]outbox.Envelope, benchBatch)
	for i := range envs {
		env, err := outbox.NewEvent("OrderPlaced").AggregateType("Order").AggregateID("o-1").
			PayloadJSONString(`{"ref":"o-1","amount":42}`).Build()
		if err != nil {
			b.Fatal(err)
		}
		envs[i] = env
	}
	return envs
}

// BenchmarkPublishAllSQLite measures a business transaction that writes
// one row and publishes 10 events with one PublishAll (one multi-row
// INSERT), with the dispatcher running; ns/op is per transaction, events/s
// counts events. Compare with BenchmarkPublishEachSQLite (the same 10
// events with 10 Publish calls) and BenchmarkPublishSQLite (one event per
// transaction).
func BenchmarkPublishAllSQLite(b *testing.B) {
	benchPublishBatch(b, func(ctx context.Context, ob *outbox.Outbox, envs []outbox.Envelope) error {
		_, err := ob.PublishAll(ctx, envs...)
		return err
	})
}

// BenchmarkPublishEachSQLite is BenchmarkPublishAllSQLite with one Publish
// call (one INSERT) per event.
func BenchmarkPublishEachSQLite(b *testing.B) {
	benchPublishBatch(b, func(ctx context.Context, ob *outbox.Outbox, envs []outbox.Envelope) error {
		for _, env := range envs {
			if _, err := ob.Publish(ctx, env); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchPublishBatch runs transactions that insert a business row and
// publish benchBatch new events with publish.
func benchPublishBatch(b *testing.B, publish func(ctx context.Context, ob *outbox.Outbox, envs []outbox.Envelope) error) {
	ob, done := benchOutbox(b)
	defer done()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		envs := benchEvents(b)
		err := ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := tx.ExecContext(ctx, `INSERT INTO orders (ref, amount) VALUES (?, ?)`, "o-1", 42); err != nil {
				return err
			}
			return publish(ctx, ob, envs)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkBareInsertBatchSQLite is the floor of BenchmarkPublishAllSQLite:
// the business row and 10 outbox-shaped rows in one plain multi-row
// INSERT, in one transaction, without the framework. events/s counts
// rows; compare with BenchmarkBareInsertSQLite (one row per transaction)
// for what SQLite itself gains from 10 events per transaction.
func BenchmarkBareInsertBatchSQLite(b *testing.B) {
	ob, done := benchOutbox(b)
	defer done()
	db := parts.Outbox(ob).Store.DB()
	bare, err := jdbcstore.New(db, jdbcstore.Config{Table: "bare_events"})
	if err != nil {
		b.Fatal(err)
	}
	if err := bare.ApplySchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	query := `INSERT INTO bare_events (event_id, event_type, aggregate_type, aggregate_id,
		tenant_id, occurred_at, payload, payload_kind, headers, status, attempts, available_at, created_at,
		locked_by, locked_until) VALUES ` + strings.Repeat(`(?, ?, ?, ?, NULL, ?, ?, 0, NULL, 0, 0, ?, ?, ?, ?), `, benchBatch-1) +
		`(?, ?, ?, ?, NULL, ?, ?, 0, NULL, 0, 0, ?, ?, ?, ?)`
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	args := make([]any, 0, 10*benchBatch)
	for b.Loop() {
		i++
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (ref, amount) VALUES (?, ?)`, "o-1", 42); err != nil {
			b.Fatal(err)
		}
		args = args[:0]
		for range benchBatch {
			env, _ := outbox.JSONEvent("OrderPlaced", `{"ref":"o-1","amount":42}`)
			args = append(args, env.ID(), "OrderPlaced", "Order", "o-1", i, env.RawPayload(), i, i, "node", i+1000)
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "events/s")
}
