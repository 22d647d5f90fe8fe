package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/outbox-go/outbox/jdbcstore"
)

func purgeCommand() *command {
	return &command{
		name:    "purge",
		summary: "delete DONE and DEAD events past their retention",
		help: `Deletes DONE events that finished longer ago than --done-older-than and DEAD events
that died longer ago than --dead-older-than, in batches of --batch rows, each its
own short statement. NEW and RETRY events are never touched. Give at least one of
the two; an omitted one keeps every event of its status.

Durations are Go durations (90m, 36h, 1ns) or days (7d, 1d12h), and must be positive.
--dry-run deletes nothing and counts what would be deleted.

A purge of a big backlog is paced so the application keeps the database:
after each batch it waits --pause-factor times as long as the batch took (0
runs the batches back to back; at most 99), and --max-rate caps the rows
deleted per second over the run (0: no cap). On SQLite, where the purge and
the application share one write lock, about twice the peak publish rate is a
good cap. --timeout (10s by default) bounds the whole purge, pauses included: give
a paced purge of a big backlog a longer one (--timeout 2h). A purge cut short
by it exits 1 and says how many rows it removed (the batch under way may
have been removed too, which the count leaves out); run it again to go on.

--json prints one object: dry_run, done_older_than_seconds and
dead_older_than_seconds (0 when omitted: kept), done and dead (events removed, or
that would be) and batches (DELETE statements run).`,
		define: func(fs *flag.FlagSet) action {
			var (
				done, dead ageValue
				batch      int
				dryRun     bool
				pause      float64
				maxRate    float64
			)
			fs.Var(&done, "done-older-than", "delete DONE events finished more than this `duration` ago (7d, 36h)")
			fs.Var(&dead, "dead-older-than", "delete DEAD events that died more than this `duration` ago (30d)")
			fs.IntVar(&batch, "batch", jdbcstore.DefaultOpsBatch, fmt.Sprintf("most rows deleted per statement, 1..%d", jdbcstore.MaxPurgeBatch))
			fs.BoolVar(&dryRun, "dry-run", false, "delete nothing; count what would be deleted")
			fs.Float64Var(&pause, "pause-factor", 0, "after each batch wait this many times as long as the batch took (0..99; 0: back to back)")
			fs.Float64Var(&maxRate, "max-rate", 0, "most rows deleted per second over the run (0: no cap)")
			return func(ctx context.Context, s *session, _ []string) error {
				switch {
				case !done.set && !dead.set:
					return usagef("give --done-older-than, --dead-older-than or both")
				case done.set && done.d == 0:
					return usagef("--done-older-than must be positive (omit it to keep every DONE event)")
				case dead.set && dead.d == 0:
					return usagef("--dead-older-than must be positive (omit it to keep every DEAD event)")
				case batch < 1 || batch > jdbcstore.MaxPurgeBatch:
					return usagef("--batch must be 1..%d, got %d", jdbcstore.MaxPurgeBatch, batch)
				case !(pause >= 0 && pause <= jdbcstore.MaxPauseFactor): // also refuses NaN
					return usagef("--pause-factor must be 0..%d, got %g", jdbcstore.MaxPauseFactor, pause)
				case !(maxRate >= 0 && !math.IsInf(maxRate, 1)):
					return usagef("--max-rate must be a number of rows per second, at least 0, got %g", maxRate)
				}
				store, err := s.open(ctx, false)
				if err != nil {
					return err
				}
				res, err := store.Purge(ctx, jdbcstore.PurgeOptions{
					DoneOlderThan: done.d, DeadOlderThan: dead.d, BatchSize: batch, DryRun: dryRun,
					PauseFactor: pause, MaxRate: maxRate,
				})
				if err != nil {
					if res.Done+res.Dead > 0 || errors.Is(err, context.DeadlineExceeded) { // cut short: the count, 0 too
						err = fmt.Errorf("%w (%d DONE and %d DEAD events were removed before the failure; the batch under way, up to %d more, may have been removed too)", err, res.Done, res.Dead, batch)
					}
					return missingTable(ctx, err, store)
				}
				if s.g.json {
					return writeJSON(s.stdout, purgeJSON{
						DryRun: dryRun, DoneOlderThan: done.d.Seconds(), DeadOlderThan: dead.d.Seconds(),
						Done: res.Done, Dead: res.Dead, Batches: res.Batches,
					})
				}
				printPurged(s.stdout, "DONE", "--done-older-than", done, res.Done, dryRun)
				printPurged(s.stdout, "DEAD", "--dead-older-than", dead, res.Dead, dryRun)
				if dryRun {
					_, err = fmt.Fprintln(s.stdout, "dry run: nothing deleted")
				}
				return err
			}
		},
	}
}

type purgeJSON struct {
	DryRun        bool    `json:"dry_run"`
	DoneOlderThan float64 `json:"done_older_than_seconds"`
	DeadOlderThan float64 `json:"dead_older_than_seconds"`
	Done          int64   `json:"done"`
	Dead          int64   `json:"dead"`
	Batches       int     `json:"batches"`
}

// printPurged writes one line about the events of one status.
func printPurged(w io.Writer, status, flagName string, age ageValue, n int64, dryRun bool) {
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	if !age.set {
		fmt.Fprintf(w, "kept every %s event (no %s)\n", status, flagName)
		return
	}
	fmt.Fprintf(w, "%s %d %s %s older than %s\n", verb, n, status, events(int(n)), formatAge(age.d))
}
