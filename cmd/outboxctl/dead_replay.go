package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/outbox-go/outbox/jdbcstore"
)

// replayShownIDs is how many ids the table output of dead replay lists.
const replayShownIDs = 20

func deadReplayCommand() *command {
	return &command{
		name:    "replay",
		summary: "move DEAD events back to NEW for redelivery",
		help: fmt.Sprintf(`Moves the selected DEAD events back to NEW with attempts 0, no error and no lease,
due now: a running poller then delivers them through the normal path. Rows are
changed in batches of --batch, each its own short statement.

Select with --id (repeatable), --type, --tenant, --since/--until (on created_at),
combined with AND, or with --all for every DEAD event. Without a selector nothing is
replayed (exit status 2). --dry-run changes nothing and tells what would be replayed.

The table output says "replayed N events" ("would replay N events" in a dry run)
and lists the first %d ids. --json prints one object: dry_run, matched, replayed
and ids (every id matched).`, replayShownIDs),
		define: func(fs *flag.FlagSet) action {
			var (
				f      deadFilterFlags
				ids    stringList
				all    bool
				dryRun bool
				batch  int
			)
			fs.Var(&ids, "id", "replay the event with this `id`; repeat for several")
			f.register(fs)
			fs.BoolVar(&all, "all", false, "replay every DEAD event (not with the other selectors)")
			fs.BoolVar(&dryRun, "dry-run", false, "change nothing; print what would be replayed")
			fs.IntVar(&batch, "batch", jdbcstore.DefaultOpsBatch, fmt.Sprintf("most rows changed per statement, 1..%d", jdbcstore.MaxListLimit))
			return func(ctx context.Context, s *session, _ []string) error {
				filter, err := f.filter()
				if err != nil {
					return err
				}
				filter.IDs = ids
				selected := len(ids) > 0 || f.eventType != "" || f.tenant != "" || !filter.From.IsZero() || !filter.To.IsZero()
				switch {
				case all && selected:
					return usagef("--all replays every DEAD event: do not combine it with --id, --type, --tenant, --since or --until")
				case !all && !selected:
					return usagef("nothing selected: give --id, --type, --tenant, --since/--until, or --all")
				case batch < 1 || batch > jdbcstore.MaxListLimit:
					return usagef("--batch must be 1..%d, got %d", jdbcstore.MaxListLimit, batch)
				}
				store, err := s.open(ctx, false)
				if err != nil {
					return err
				}
				res, err := store.ReplayDead(ctx, filter, jdbcstore.ReplayOptions{All: all, DryRun: dryRun, BatchSize: batch})
				if err != nil {
					if res.Replayed > 0 {
						err = fmt.Errorf("%w (%d events were replayed before the failure)", err, res.Replayed)
					}
					return missingTable(err, store.Table())
				}
				return printReplay(s, res, dryRun)
			}
		},
	}
}

type replayJSON struct {
	DryRun   bool     `json:"dry_run"`
	Matched  int      `json:"matched"`
	Replayed int      `json:"replayed"`
	IDs      []string `json:"ids"`
}

func printReplay(s *session, res jdbcstore.ReplayResult, dryRun bool) error {
	if s.g.json {
		ids := res.IDs
		if ids == nil {
			ids = []string{}
		}
		return writeJSON(s.stdout, replayJSON{DryRun: dryRun, Matched: res.Matched, Replayed: res.Replayed, IDs: ids})
	}
	w := s.stdout
	switch {
	case dryRun:
		fmt.Fprintf(w, "would replay %d %s (dry run: nothing changed)\n", res.Matched, events(res.Matched))
	case res.Replayed != res.Matched:
		fmt.Fprintf(w, "replayed %d %s (%d matched; the others stopped being DEAD meanwhile)\n",
			res.Replayed, events(res.Replayed), res.Matched)
	default:
		fmt.Fprintf(w, "replayed %d %s\n", res.Replayed, events(res.Replayed))
	}
	for i, id := range res.IDs {
		if i == replayShownIDs {
			fmt.Fprintf(w, "  … and %d more (--json lists them all)\n", len(res.IDs)-replayShownIDs)
			break
		}
		fmt.Fprintf(w, "  %s\n", cell(id))
	}
	return nil
}

// events is "event" or "events".
func events(n int) string {
	if n == 1 {
		return "event"
	}
	return "events"
}
