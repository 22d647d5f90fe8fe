package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/jdbcstore"
)

// floorTable holds the floor's outbox-shaped rows. It is created from the
// store's own schema under another name, so it has exactly the outbox
// table's columns, types, primary key and index; only the DDL comes from
// the library, every measured statement is plain database/sql.
const floorTable = "bench_floor_event"

// floorInsert inserts one row with the same columns and values the store's
// Insert writes for a published event (status NEW, attempts 0, this node's
// lease).
const floorInsert = "INSERT INTO " + floorTable + " (event_id, event_type, aggregate_type, aggregate_id, tenant_id," +
	" occurred_at, payload, payload_kind, headers, status, attempts, available_at, created_at," +
	" locked_by, locked_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?)"

// runFloor measures the floor: per transaction BEGIN, INSERT the business
// row, INSERT an outbox-shaped row with plain database/sql, COMMIT; W
// writers until N transactions are done.
func (b *bench) runFloor(ctx context.Context) (result, error) {
	return b.floor(ctx, scenarioFloor, b.opts.workers, b.opts.n)
}

// floor is runFloor with the given number of writers and transactions,
// reported as the scenario's line.
func (b *bench) floor(ctx context.Context, scenario string, workers, n int) (result, error) {
	f, err := openFresh(ctx, b.opts)
	if err != nil {
		return result{}, err
	}
	defer b.closeDB(f)
	tx, err := b.floorTx(ctx, f)
	if err != nil {
		return result{}, err
	}
	if _, err := runPool(ctx, workers, b.opts.warmup, func(ctx context.Context, i int) error {
		return tx(ctx, "warm", i)
	}); err != nil {
		return result{}, err
	}
	b.resetRSS()
	cpu := startCPU()
	elapsed, err := runPool(ctx, workers, n, func(ctx context.Context, i int) error {
		return tx(ctx, "floor", i)
	})
	if err != nil {
		return result{}, err
	}
	r := b.newResult(scenario, n)
	r.Workers = workers
	r.CPUusPerEvent = cpu.perEvent(n)
	r.rate = rate(n, elapsed)
	return r, nil
}

// floorTx creates the floor table in f (unless it exists) and returns the
// floor's transaction: order i of prefix and its event row.
func (b *bench) floorTx(ctx context.Context, f *freshDB) (func(ctx context.Context, prefix string, i int) error, error) {
	store, err := jdbcstore.New(f.db, jdbcstore.Config{Table: floorTable, Logger: b.log})
	if err != nil {
		return nil, err
	}
	if err := store.ApplySchema(ctx); err != nil {
		return nil, fmt.Errorf("create floor table: %w", err)
	}
	db := f.db.DB
	// Values are encoded by the store's dialect, as Insert encodes them.
	enc := store.Dialect()
	insertRow := f.db.Rebind(floorInsert)
	owner := ident.OwnerToken()
	tx := func(ctx context.Context, prefix string, i int) error {
		ref := orderRef(prefix, i)
		amount := orderAmount(i)
		t, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("floor: begin: %w", err)
		}
		defer rollback(t)
		if _, err := t.ExecContext(ctx, f.insertOrder, ref, amount); err != nil {
			return fmt.Errorf("floor: insert order: %w", err)
		}
		// The event is made inside the transaction, as Publish makes it.
		doc := orderPayload(ref, amount)
		id := ulid.Make().String()
		occurred := time.Now()
		now := time.Now()
		payload, err := enc.EncodePayload(core.PayloadJSON, doc)
		if err != nil {
			return fmt.Errorf("floor: encode payload: %w", err)
		}
		if _, err := t.ExecContext(ctx, insertRow, id, eventType, aggregateType, ref, nil,
			enc.EncodeTime(occurred), payload, 0, nil, enc.EncodeTime(now), enc.EncodeTime(now),
			owner, enc.EncodeTime(now.Add(dispatcher.DefaultLease))); err != nil {
			return fmt.Errorf("floor: insert event row: %w", err)
		}
		if err := t.Commit(); err != nil {
			return fmt.Errorf("floor: commit: %w", err)
		}
		return nil
	}
	return tx, nil
}

// rollback rolls back a transaction that was not committed (a no-op after
// Commit).
func rollback(t *sql.Tx) { _ = t.Rollback() }
