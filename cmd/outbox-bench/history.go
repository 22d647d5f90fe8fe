package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/historyseed"
	"github.com/outbox-go/outbox/jdbcstore"
)

// The history scenario: publish and end_to_end on a table that already
// holds a long-lived deployment's finished events, and the retention
// purge running beside the publishers.
const (
	scenarioHistory = "history"
	// defaultHistoryDone and defaultHistoryDead are the rows seeded
	// before the history scenario's timed parts.
	defaultHistoryDone = 5_000_000
	defaultHistoryDead = 100_000
	// historySpan is the time the seeded rows' creation is spread over,
	// ending historyAge ago; the purge keeps historyDoneRetention of DONE
	// and historyDeadRetention of DEAD rows, so about three quarters of
	// the seeded rows are past retention.
	historySpan          = 120 * 24 * time.Hour
	historyAge           = time.Hour
	historyDoneRetention = 30 * 24 * time.Hour
	historyDeadRetention = 60 * 24 * time.Hour
	// defaultHistoryPurgeRate is -history-purge-rate: the purge beside the
	// publishers may delete 2.5 rows per event published, room above the
	// 2x target without running faster than needed.
	defaultHistoryPurgeRate = 2.5
)

// Targets of the history scenario, checked by the summary.
const (
	targetHistoryRatio = 0.9 // history rate / empty-table rate (publish, end_to_end), at least
	targetPurgeKeepsUp = 2.0 // purge rows/s during publishing / publish rate, at least
	targetPurgeCost    = 0.9 // publish rate with the purge running / without, at least
)

// historyMeasure is what the history scenario measured, for the summary.
type historyMeasure struct {
	publish, e2e         float64 // medians on the seeded table
	publishRatio         float64 // median of the rounds' publish rate on the seeded / the empty table
	e2eRatio             float64 // median of the rounds' end_to_end rate on the seeded / the empty table
	keepsUp              float64 // median of the rounds' purge rows/s / publish rate, both while the purge runs
	purgeCost            float64 // median of the rounds' publish rate with the purge / without
	publishPurge         float64 // median publish rate with the purge running
	purgeDuring          float64 // median purge rows/s while publishing
	purgeAlone           float64 // median purge rows/s with nothing else running
	seedSeconds          float64
	seededDone, seededDD int
}

// runHistory seeds -history-done DONE and -history-dead DEAD rows into a
// fresh database (bulk SQL, then ANALYZE), then runs -rounds rounds of:
// publish (as the publish scenario), end_to_end (as the end_to_end
// scenario, its completion checked through the pending index rather than
// a count of millions of rows), the purge alone, and publish with the
// retention purge (package cleanup, default settings) running beside it.
// Each round starts with the publish and end_to_end scenarios on an empty
// table, so each seeded-table rate has an empty-table rate measured just
// before it; the summary's ratios are the medians of the rounds' ratios.
// Its line carries the median publish rate on the seeded table.
func (b *bench) runHistory(ctx context.Context) (result, error) {
	f, err := openFresh(ctx, b.opts)
	if err != nil {
		return result{}, err
	}
	defer b.closeDB(f)
	store, err := jdbcstore.New(f.db, jdbcstore.Config{})
	if err != nil {
		return result{}, err
	}
	if err := store.ApplySchema(ctx); err != nil {
		return result{}, err
	}
	start := time.Now()
	err = historyseed.Seed(ctx, f.db, f.kind, historyseed.Spec{
		Table: store.Table(), Done: b.opts.historyDone, Dead: b.opts.historyDead,
		End: start.Add(-historyAge), Span: historySpan,
	})
	if err != nil {
		return result{}, err
	}
	m := &historyMeasure{seedSeconds: time.Since(start).Seconds(), seededDone: b.opts.historyDone, seededDD: b.opts.historyDead}
	fmt.Fprintf(b.stderr, "outbox-bench: history: seeded %d DONE and %d DEAD rows in %.1f s\n",
		b.opts.historyDone, b.opts.historyDead, m.seedSeconds)
	pending := pendingCounter(f.db, store.Table())
	ccfg := cleanup.Config{DoneRetention: historyDoneRetention, DeadRetention: historyDeadRetention, Logger: b.log,
		PauseFactor: max(b.opts.purgePause, 0), NoPause: b.opts.purgePause == -1, BatchSize: b.opts.purgeBatch}
	cleaner, err := cleanup.New(store, ccfg)
	if err != nil {
		return result{}, err
	}
	var pub, e2e, pubPurge, purgeDuring, purgeAlone, pubRatio, e2eRatio, keepsUp, cost []float64
	for range b.opts.rounds {
		// The empty-table baseline right before the seeded table, so that
		// the machine's drifting load hits both alike.
		empty, err := b.runPublish(ctx)
		if err != nil {
			return result{}, fmt.Errorf("empty-table publish: %w", err)
		}
		r, err := b.historyPublish(ctx, f, pending, nil)
		if err != nil {
			return result{}, err
		}
		pub = append(pub, r.publish)
		pubRatio = append(pubRatio, r.publish/empty.rate)
		emptyE2E, err := b.runEndToEnd(ctx)
		if err != nil {
			return result{}, fmt.Errorf("empty-table end_to_end: %w", err)
		}
		er, _, err := b.endToEndVia(ctx, scenarioHistory, b.opts.n, func(int) string { return "" }, outboxSetup{db: f, pending: pending})
		if err != nil {
			return result{}, err
		}
		e2e = append(e2e, er.rate)
		e2eRatio = append(e2eRatio, er.rate/emptyE2E.rate)
		alone, err := purgeFor(ctx, cleaner, time.Duration(float64(b.opts.n)/r.publish*float64(time.Second)))
		if err != nil {
			return result{}, err
		}
		purgeAlone = append(purgeAlone, alone)
		paced := cleaner
		if b.opts.purgeRate > 0 {
			// The purge beside the publishers deletes at most purgeRate
			// times the publish rate just measured (cleanup.Config.MaxRate).
			pcfg := ccfg
			pcfg.MaxRate = b.opts.purgeRate * r.publish
			if paced, err = cleanup.New(store, pcfg); err != nil {
				return result{}, err
			}
		}
		r, err = b.historyPublish(ctx, f, pending, paced)
		if err != nil {
			return result{}, err
		}
		pubPurge = append(pubPurge, r.publish)
		purgeDuring = append(purgeDuring, r.purge)
		keepsUp = append(keepsUp, r.purge/r.publish)
		cost = append(cost, r.publish/pub[len(pub)-1])
	}
	if err := checkSeededDead(ctx, f.db, store.Table(), b.opts.historyDead); err != nil {
		return result{}, err
	}
	m.publish, m.e2e, m.publishPurge = median(pub), median(e2e), median(pubPurge)
	m.publishRatio, m.e2eRatio = median(pubRatio), median(e2eRatio)
	m.keepsUp, m.purgeCost = median(keepsUp), median(cost)
	m.purgeDuring, m.purgeAlone = median(purgeDuring), median(purgeAlone)
	b.history = m
	res := b.newResult(scenarioHistory, b.opts.n)
	res.rate = m.publish
	res.EventsPerS = round(m.publish, 1)
	res.HistoryRows = ptr(b.opts.historyDone + b.opts.historyDead)
	res.SeedS = round(m.seedSeconds, 1)
	res.HistoryE2EPerS = round(m.e2e, 1)
	res.PublishPurgePerS = round(m.publishPurge, 1)
	res.PurgePerS = round(m.purgeDuring, 1)
	res.PurgeAlonePerS = round(m.purgeAlone, 1)
	if b.opts.rounds > 1 {
		for i := range pub {
			res.Notes = append(res.Notes, fmt.Sprintf("round%d=publish:%.0f(x%.3f),e2e:%.0f(x%.3f),publish+purge:%.0f,purge:%.0f,purge_alone:%.0f",
				i+1, pub[i], pubRatio[i], e2e[i], e2eRatio[i], pubPurge[i], purgeDuring[i], purgeAlone[i]))
		}
	}
	return res, nil
}

// historyRound is one publish round on the seeded table.
type historyRound struct {
	publish float64 // transactions/s
	purge   float64 // rows purged/s during the publishing (with a cleaner)
}

// historyPublish runs the publish scenario's timed part on the seeded
// table; with a cleaner, a purge runs from the first publish to the last
// and its rows per second are returned too.
func (b *bench) historyPublish(ctx context.Context, f *freshDB, pending func(context.Context) (int, error), c *cleanup.Cleaner) (historyRound, error) {
	h, err := b.start(ctx, outboxSetup{db: f, pending: pending,
		listen: func(context.Context, outbox.Envelope) error { return nil }})
	if err != nil {
		return historyRound{}, err
	}
	defer h.close()
	var (
		purged   = make(chan jdbcstore.PurgeResult, 1)
		purgeErr error
	)
	pctx, stopPurge := context.WithCancel(ctx)
	defer stopPurge()
	if c != nil {
		go func() {
			res, err := c.RunOnce(pctx)
			if pctx.Err() == nil {
				purgeErr = err // read after the channel receive
			}
			purged <- res
		}()
	}
	elapsed, err := runPool(ctx, b.opts.workers, b.opts.n, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("hist", i), orderAmount(i), -1)
	})
	stopPurge()
	var r historyRound
	if c != nil {
		res := <-purged
		if purgeErr != nil {
			return r, fmt.Errorf("purge: %w", purgeErr)
		}
		r.purge = rate(int(res.Done+res.Dead), elapsed)
	}
	if err != nil {
		return r, fmt.Errorf("publish: %w", err)
	}
	r.publish = rate(b.opts.n, elapsed)
	return r, nil
}

// purgeFor runs the cleaner alone for at most d and returns the rows it
// removed per second.
func purgeFor(ctx context.Context, c *cleanup.Cleaner, d time.Duration) (float64, error) {
	pctx, cancel := context.WithTimeout(ctx, max(d, 100*time.Millisecond))
	defer cancel()
	start := time.Now()
	res, err := c.RunOnce(pctx)
	elapsed := time.Since(start)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return 0, fmt.Errorf("purge: %w", err)
	}
	return rate(int(res.Done+res.Dead), elapsed), ctx.Err()
}

// pendingCounter returns a counter of the NEW and RETRY rows of table:
// one range of the pending index however many rows have finished.
func pendingCounter(db *sqlx.DB, table string) func(context.Context) (int, error) {
	q := "SELECT COUNT(*) FROM " + table + " WHERE status IN (" +
		strconv.Itoa(int(core.StatusNew)) + ", " + strconv.Itoa(int(core.StatusRetry)) + ")"
	return func(ctx context.Context) (int, error) {
		var n int
		err := db.QueryRowContext(ctx, q).Scan(&n)
		return n, err
	}
}

// checkSeededDead fails when events published by the scenario went DEAD:
// the table then holds more DEAD rows than were seeded.
func checkSeededDead(ctx context.Context, db *sqlx.DB, table string, seeded int) error {
	var n int
	q := "SELECT COUNT(*) FROM " + table + " WHERE status = " + strconv.Itoa(int(core.StatusDead))
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return err
	}
	// The purge removes seeded DEAD rows, never adds any.
	if n > seeded {
		return fmt.Errorf("%d events went DEAD", n-seeded)
	}
	return nil
}

// waitSettled waits until no NEW or RETRY row is left (every event DONE,
// or DEAD, which checkSeededDead reports), checking every `every`.
func (h *harness) waitSettled(ctx context.Context, every time.Duration) (time.Time, error) {
	deadline := time.Now().Add(h.b.opts.timeout)
	for {
		n, err := h.pending(ctx)
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		switch {
		case n == 0:
			return now, nil
		case now.After(deadline):
			return time.Time{}, fmt.Errorf("timed out after %v: %d events still NEW or RETRY", h.b.opts.timeout, n)
		}
		if err := sleepCtx(ctx, every); err != nil {
			return time.Time{}, err
		}
	}
}

// median returns the median of v (the lower middle for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// historySummary fills the summary's history fields and checks their
// targets.
func (b *bench) historySummary(s *summary, miss func(string)) {
	m := b.history
	if m == nil {
		return
	}
	if m.publishRatio > 0 {
		s.HistoryPublishRatio = round(m.publishRatio, 3)
		if *s.HistoryPublishRatio < targetHistoryRatio {
			miss(fmt.Sprintf("history_publish_ratio >= %.2f", targetHistoryRatio))
		}
	}
	if m.e2eRatio > 0 {
		s.HistoryE2ERatio = round(m.e2eRatio, 3)
		if *s.HistoryE2ERatio < targetHistoryRatio {
			miss(fmt.Sprintf("history_e2e_ratio >= %.2f", targetHistoryRatio))
		}
	}
	if m.publishPurge > 0 {
		s.PurgeKeepsUp = round(m.keepsUp, 3)
		if *s.PurgeKeepsUp < targetPurgeKeepsUp {
			miss(fmt.Sprintf("purge_keeps_up >= %.1f", targetPurgeKeepsUp))
		}
	}
	if m.publish > 0 {
		s.PurgeCost = round(m.purgeCost, 3)
		if *s.PurgeCost < targetPurgeCost {
			miss(fmt.Sprintf("purge_cost >= %.2f", targetPurgeCost))
		}
	}
}
