package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/outbox-go/outbox/jdbcstore"
)

func deadDiscardCommand() *command {
	return &command{
		name:    "discard",
		summary: "delete DEAD events for good (releases the ordering keys they block)",
		help: fmt.Sprintf(`Deletes the selected DEAD events: they are never delivered. Rows are deleted in
batches of --batch, each its own short statement. A DEAD event of an ordered key
under the block policy holds the key's later events; discarding it releases the
key, and a running poller delivers the next event of the key as if the discarded
one had succeeded ('stats' lists the blocked keys and the event holding each).
To deliver the event instead, use 'dead replay'.

Select with --id (repeatable), --type, --tenant, --since/--until (on created_at),
combined with AND, or with --all for every DEAD event. Without a selector nothing is
discarded (exit status 2). --dry-run deletes nothing and tells what would be
discarded.

The table output says "discarded N events" ("would discard N events" in a dry run)
and lists the first %d ids discarded. --json prints one object: dry_run,
matched (the DEAD events selected), discarded (their count, 0 in a dry run),
ids (every id discarded, or in a dry run that would be) and not_discarded.

An event not discarded is listed under "not discarded" with the reason
(not_discarded in --json: id, reason and status): an --id not found, not DEAD,
or DEAD but not matching the other selectors; a selected event that stopped
being DEAD meanwhile (replayed or discarded elsewhere, or purged). The command
then exits with status 1 and one line on stderr; the other selected events are
discarded all the same. A dry run reports and exits the same way.

--timeout (10s by default) bounds the whole run: give a discard of many events a
longer one (--timeout 5m). A run cut short by it exits 1 and says on stderr how
many events it discarded (stdout stays empty, with --json too); the batches
discarded before stay discarded: run it again to go on. A batch whose commit the
timeout cut short is read back (for up to 2s more) and counted if it was
committed; should that read fail too, the message says that this last batch,
of N events, may have been discarded as well.`, replayShownIDs),
		define: func(fs *flag.FlagSet) action {
			var (
				f      deadFilterFlags
				ids    stringList
				all    bool
				dryRun bool
				batch  int
			)
			fs.Var(&ids, "id", "discard the event with this `id`; repeat for several")
			f.register(fs)
			fs.BoolVar(&all, "all", false, "discard every DEAD event (not with the other selectors)")
			fs.BoolVar(&dryRun, "dry-run", false, "delete nothing; print what would be discarded")
			fs.IntVar(&batch, "batch", jdbcstore.DefaultOpsBatch, fmt.Sprintf("most rows deleted per statement, 1..%d", jdbcstore.MaxListLimit))
			return func(ctx context.Context, s *session, _ []string) error {
				filter, err := f.filter()
				if err != nil {
					return err
				}
				filter.IDs = ids
				others := f.eventType != "" || f.tenant != "" || !filter.From.IsZero() || !filter.To.IsZero()
				switch {
				case all && (others || len(ids) > 0):
					return usagef("--all discards every DEAD event: do not combine it with --id, --type, --tenant, --since or --until")
				case !all && !others && len(ids) == 0:
					return usagef("nothing selected: give --id, --type, --tenant, --since/--until, or --all")
				case batch < 1 || batch > jdbcstore.MaxListLimit:
					return usagef("--batch must be 1..%d, got %d", jdbcstore.MaxListLimit, batch)
				}
				store, err := s.open(ctx, false)
				if err != nil {
					return err
				}
				res, err := store.DiscardDead(ctx, filter, jdbcstore.DiscardOptions{All: all, DryRun: dryRun, BatchSize: batch})
				if err != nil {
					if res.Discarded > 0 || errors.Is(err, context.DeadlineExceeded) { // cut short: the count, 0 too
						err = fmt.Errorf("%w (%s discarded before the failure)", err, countWere(res.Discarded))
					}
					return missingTable(ctx, err, store)
				}
				missed, err := whyNotReplayed(ctx, store, ids, res.IDs, res.NotDiscarded, others)
				if err != nil {
					return fmt.Errorf("dead discard: looking up the ids not discarded: %w (%d %s discarded)", err, res.Discarded, events(res.Discarded))
				}
				if err := printDiscard(s, res, missed, dryRun); err != nil {
					return err
				}
				return missedIDsError("discard", missed, len(res.IDs), len(ids) > 0, dryRun)
			}
		},
	}
}

type discardJSON struct {
	DryRun       bool          `json:"dry_run"`
	Matched      int           `json:"matched"`
	Discarded    int           `json:"discarded"`
	IDs          []string      `json:"ids"`
	NotDiscarded []notReplayed `json:"not_discarded"`
}

func printDiscard(s *session, res jdbcstore.DiscardResult, missed []notReplayed, dryRun bool) error {
	if s.g.json {
		ids := res.IDs
		if ids == nil {
			ids = []string{}
		}
		if missed == nil {
			missed = []notReplayed{}
		}
		return writeJSON(s.stdout, discardJSON{DryRun: dryRun, Matched: res.Matched, Discarded: res.Discarded, IDs: ids, NotDiscarded: missed})
	}
	printDeadResult(s.stdout, deadAction{verb: "discard", past: "discarded", unchanged: "nothing deleted"},
		res.Matched, res.IDs, missed, dryRun)
	return nil
}
