package jdbcstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/outbox-go/outbox/core"
)

// MaxPurgeBatch bounds PurgeOptions.BatchSize: a batch is deleted by a
// list of that many ids, within every supported database's limit of
// statement parameters.
const MaxPurgeBatch = 10_000

// MaxPauseFactor bounds PurgeOptions.PauseFactor: the purge then keeps
// the database busy at least 1% of its run.
const MaxPauseFactor = 99

// PurgeOptions selects what Purge removes.
type PurgeOptions struct {
	// DoneOlderThan removes DONE rows finished longer ago than this; 0
	// keeps every DONE row.
	DoneOlderThan time.Duration
	// DeadOlderThan removes DEAD rows finished longer ago than this; 0
	// keeps every DEAD row.
	DeadOlderThan time.Duration
	// BatchSize is the most rows deleted per statement, so no transaction
	// runs long: 1..MaxPurgeBatch. Defaults to DefaultOpsBatch.
	BatchSize int
	// PauseFactor paces a long purge: after each batch Purge waits
	// PauseFactor times as long as the batch took, so it keeps the
	// database busy at most 1/(1+PauseFactor) of the time and leaves the
	// rest to the application, however fast the database is. 0 runs the
	// batches back to back.
	PauseFactor float64
	// MaxRate caps the rows deleted per second over the run (the wait
	// after each batch is stretched to hold it), so a purge that has
	// millions of rows to catch up does not run faster than it needs to:
	// at twice the peak publish rate it keeps up with room to spare and
	// costs publishers the least. 0 means no cap (PauseFactor alone paces).
	//
	// PauseFactor and MaxRate pace this call only: several purges at once
	// (one per node) each take their share. A batch is paced by the rows
	// it read, so one whose rows another purge deleted first waits as if
	// it had deleted them.
	MaxRate float64
	// DryRun counts what would be removed, removing nothing.
	DryRun bool
}

// PurgeResult counts removed (or, in a dry run, removable) rows.
type PurgeResult struct {
	Done, Dead int64
	Batches    int // DELETE statements run
}

// Purge deletes DONE and DEAD rows past their retention, in batches of at
// most BatchSize rows, each a short read of the next range of the done
// index (status, done_at) and one DELETE of those rows by primary key (on
// a single-writer database, SQLite, one DELETE whose subquery reads the
// range): no statement scans rows it keeps or locks more than the rows it deletes,
// so publishers and workers are not held up, and the purge does not slow
// down as the table grows. NEW and RETRY rows are never touched, nor a
// DEAD row replayed while the purge runs. On a single-writer database
// (SQLite, which keeps no keys table), the last row of an ordering key
// whose earlier event is DEAD under the skip policy is kept until that
// DEAD event is gone (purged, discarded or replayed), one row per such
// key: it is what tells ReplayDead that the key went on without the DEAD
// event. DEAD rows age from done_at
// (when they died), or created_at for rows written before done_at was set
// on DEAD.
//
// Before its first delete a store makes sure that its table is an outbox
// table (as [Store.CheckTable]; known already after ApplySchema): any
// table with an event_id, a status and a done_at column would do for the
// purge's statements, and a table of the application's, named by
// mistake, lost its rows. Another table is refused with a
// *core.ConfigError of field Table.
//
// When ctx ends, Purge stops and returns what it removed with ctx's
// error. The batch under way is rolled back (its rows go with a later
// purge), unless its commit had reached the database as ctx ended: then
// its rows are gone, and not counted.
func (s *Store) Purge(ctx context.Context, o PurgeOptions) (PurgeResult, error) {
	if ctx == nil {
		return PurgeResult{}, core.ErrNilContext
	}
	if o.DoneOlderThan < 0 || o.DeadOlderThan < 0 {
		return PurgeResult{}, &core.ConfigError{Field: "retention", Msg: "must not be negative"}
	}
	if !(o.PauseFactor >= 0 && o.PauseFactor <= MaxPauseFactor) { // also refuses NaN
		return PurgeResult{}, &core.ConfigError{Field: "PauseFactor", Msg: fmt.Sprintf("must be 0..%g", float64(MaxPauseFactor))}
	}
	if !(o.MaxRate >= 0 && !math.IsInf(o.MaxRate, 1)) { // also refuses NaN
		return PurgeResult{}, &core.ConfigError{Field: "MaxRate", Msg: "must be a finite number of rows per second, at least 0"}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultOpsBatch
	}
	if o.BatchSize < 1 || o.BatchSize > MaxPurgeBatch {
		return PurgeResult{}, &core.ConfigError{Field: "BatchSize", Msg: fmt.Sprintf("must be 1..%d", MaxPurgeBatch)}
	}
	if !s.shapeChecked.Load() {
		if err := s.CheckTable(ctx); err != nil {
			return PurgeResult{}, fmt.Errorf("outbox: jdbcstore: purge %q: %w", s.table, err)
		}
	}
	p := purger{s: s, o: o, now: s.now()}
	if o.DoneOlderThan > 0 {
		if err := p.status(ctx, core.StatusDone, o.DoneOlderThan, &p.res.Done); err != nil {
			return p.res, err
		}
	}
	if o.DeadOlderThan > 0 {
		if err := p.status(ctx, core.StatusDead, o.DeadOlderThan, &p.res.Dead); err != nil {
			return p.res, err
		}
		if err := p.legacyDead(ctx); err != nil {
			return p.res, err
		}
	}
	return p.res, nil
}

// delete runs the DELETE of one page of rows and returns how many it
// removed. Where rows lock it runs in a transaction of its own (execRC),
// so that a ctx ending while the statement runs on the server rolls its
// rows back: MySQL/MariaDB finish a statement whose client went away
// (go-sql-driver/mysql closes the connection, it kills no query), and
// PostgreSQL's cancel request may come after the statement finished, so
// an autocommit DELETE removed its rows after Purge had returned without
// counting them.
func (p *purger) delete(ctx context.Context, op, query string, args ...any) (int64, error) {
	return p.s.execRC(ctx, op, query, args...)
}

// purgeHooks, when set (by tests), observe a purge: page receives the ids
// of each page read (before its DELETE, on the paths that read pages),
// pause the wait after each batch that handled rows.
type purgeHooks struct {
	page  func(ids []any)
	pause func(wait time.Duration)
}

// purger is one Purge call.
type purger struct {
	s   *Store
	o   PurgeOptions
	now time.Time
	res PurgeResult
	// busy is how long the last batch took when it handled rows, and
	// handled how many: the next one pauses first.
	busy    time.Duration
	handled int64
}

// status removes the rows of st finished before now-olderThan, adding
// them to n.
func (p *purger) status(ctx context.Context, st core.Status, olderThan time.Duration, n *int64) error {
	s, d := p.s, p.s.dialect
	cutoff := d.EncodeTime(p.now.Add(-olderThan))
	op := "purge " + st.String()
	if p.o.DryRun {
		c, err := p.count(ctx, s.q.purgeCount, int64(st), cutoff)
		*n += c
		if err != nil {
			return s.mapError("count for "+op, "", err)
		}
		return nil
	}
	if d.Capabilities().SingleWriter {
		return p.singleWriter(ctx, op, st, cutoff, n)
	}
	// From year 1, not the Unix epoch: rows finished before 1970 (a
	// clock set back, rows imported) are past any retention too.
	lower := d.EncodeTime(time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC))
	for {
		if err := p.pause(ctx); err != nil {
			return err
		}
		began := time.Now()
		var last any
		ids, err := p.page(ctx, s.q.purgePage, []any{int64(st), lower, cutoff, p.o.BatchSize}, &last)
		if err != nil {
			return s.mapError("read page for "+op, "", err)
		}
		if len(ids) == 0 {
			return nil
		}
		t, err := d.DecodeTime(last)
		if err != nil {
			return fmt.Errorf("outbox: jdbcstore: %s: done_at of %v: %w", op, ids[len(ids)-1], err)
		}
		// The next page starts at the last row's done_at: rows finished
		// at the same instant are read again if this batch left them.
		lower = d.EncodeTime(t)
		if h := s.purgeHooks; h != nil && h.page != nil {
			h.page(ids)
		}
		deleted, err := p.delete(ctx, op, inList(d, s.q.purgeDeletePrefix, len(ids), s.q.purgeDeleteSuffix),
			append(ids, int64(st), cutoff)...)
		*n += deleted
		p.res.Batches++
		if err != nil {
			return err
		}
		// Paced by the page read, not by the rows deleted: a node whose
		// DELETE found the rows gone (another node purging the same
		// range) waits as long, rather than reading the next page at once.
		p.done(began, int64(len(ids)))
		if len(ids) < p.o.BatchSize {
			return nil
		}
	}
}

// singleWriter removes the rows of st finished before cutoff on a
// single-writer database: one DELETE per batch.
func (p *purger) singleWriter(ctx context.Context, op string, st core.Status, cutoff any, n *int64) error {
	for {
		if err := p.pause(ctx); err != nil {
			return err
		}
		began := time.Now()
		deleted, err := p.s.exec(ctx, op, "", p.s.q.purgeBatch, int64(st), cutoff, p.o.BatchSize)
		*n += deleted
		p.res.Batches++
		if err != nil {
			return err
		}
		p.done(began, deleted)
		if deleted < int64(p.o.BatchSize) {
			return nil
		}
	}
}

// legacyDead removes the DEAD rows without done_at created before
// now-DeadOlderThan, in event id order.
func (p *purger) legacyDead(ctx context.Context) error {
	s, d := p.s, p.s.dialect
	cutoff := d.EncodeTime(p.now.Add(-p.o.DeadOlderThan))
	if p.o.DryRun {
		c, err := p.count(ctx, s.q.purgeLegacyCount, cutoff)
		p.res.Dead += c
		if err != nil {
			return s.mapError("count for purge DEAD", "", err)
		}
		return nil
	}
	after := ""
	for {
		if err := p.pause(ctx); err != nil {
			return err
		}
		began := time.Now()
		ids, err := p.page(ctx, s.q.purgeLegacyPage, []any{cutoff, after, p.o.BatchSize}, nil)
		if err != nil {
			return s.mapError("read page for purge DEAD", "", err)
		}
		if len(ids) == 0 {
			return nil
		}
		after = ids[len(ids)-1].(string)
		deleted, err := p.delete(ctx, "purge DEAD", inList(d, s.q.purgeDeletePrefix, len(ids), s.q.purgeDeleteLegacySuffix),
			append(ids, cutoff)...)
		p.res.Dead += deleted
		p.res.Batches++
		if err != nil {
			return err
		}
		p.done(began, int64(len(ids)))
		if len(ids) < p.o.BatchSize {
			return nil
		}
	}
}

// done records a batch that began at began and handled n rows: read and
// deleted, or (the page-and-delete paths) read, whether this DELETE or
// another node's removed them.
func (p *purger) done(began time.Time, n int64) {
	if n > 0 {
		p.busy, p.handled = time.Since(began), n
	}
}

// pause waits after a batch that handled rows: PauseFactor times the
// batch's duration, or longer if MaxRate needs it. It returns ctx's error.
func (p *purger) pause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	wait := time.Duration(float64(p.busy) * p.o.PauseFactor)
	if p.o.MaxRate > 0 && p.handled > 0 {
		// The batch and the wait together take handled/MaxRate.
		wait = max(wait, time.Duration(float64(p.handled)/p.o.MaxRate*float64(time.Second))-p.busy)
	}
	batch := p.handled > 0
	p.busy, p.handled = 0, 0
	if h := p.s.purgeHooks; h != nil && h.pause != nil && batch {
		h.pause(wait)
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// page reads the event ids (first column) of one page, retrying lock
// contention; when last is not nil, it receives the second column of the
// last row.
func (p *purger) page(ctx context.Context, query string, args []any, last *any) ([]any, error) {
	return retryBusy(ctx, p.s, func() ([]any, error) {
		rows, err := p.s.db.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		ids := make([]any, 0, p.o.BatchSize+2) // room for the delete's arguments
		for rows.Next() {
			var id string
			dest := []any{&id}
			if last != nil {
				dest = append(dest, last)
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	})
}

// count runs a one-row COUNT query.
func (p *purger) count(ctx context.Context, query string, args ...any) (int64, error) {
	return retryBusy(ctx, p.s, func() (int64, error) {
		var c int64
		err := p.s.db.QueryRowContext(ctx, query, args...).Scan(&c)
		return c, err
	})
}
