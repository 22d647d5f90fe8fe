package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/outbox-go/outbox/core"
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

An ordered event under the skip policy whose key went on without it (a later
event of its key exists, or existed and was purged since)
is not replayed: the key's later events were delivered,
or are being delivered, as if it had succeeded, so replaying it would deliver it
out of order. It stays DEAD: discard it, or publish a new event.

The table output says "replayed N events" ("would replay N events" in a dry run)
and lists the first %d ids replayed. --json prints one object: dry_run,
matched (the DEAD events selected), replayed (their count, 0 in a dry run),
ids (every id replayed, or in a dry run that would be) and not_replayed.

An event not replayed is listed under "not replayed" with the reason
(not_replayed in --json: id, reason and status): an --id not found, not DEAD,
or DEAD but not matching the other selectors; a selected event whose key went on
without it; one that stopped being DEAD meanwhile (replayed or discarded
elsewhere, or purged). The command then exits with status 1 and one line on
stderr; the other selected events are replayed all the same. A dry run reports
and exits the same way.

--timeout (10s by default) bounds the whole run: give a replay of many events a
longer one (--timeout 5m). A run cut short by it exits 1 and says on stderr how
many events it replayed (stdout stays empty, with --json too); the batches
replayed before stay replayed: run it again to go on. A batch whose commit the
timeout cut short is read back (for up to 2s more) and counted if it was
committed; should that read fail too, the message says that this last batch,
of N events, may have been replayed as well.`, replayShownIDs),
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
					if res.Replayed > 0 || errors.Is(err, context.DeadlineExceeded) { // cut short: the count, 0 too
						err = fmt.Errorf("%w (%s replayed before the failure)", err, countWere(res.Replayed))
					}
					return missingTable(ctx, err, store)
				}
				others := f.eventType != "" || f.tenant != "" || !filter.From.IsZero() || !filter.To.IsZero()
				missed, err := whyNotReplayed(ctx, store, ids, res.IDs, res.NotReplayed, others)
				if err != nil {
					return fmt.Errorf("dead replay: looking up the ids not replayed: %w (%d %s replayed)", err, res.Replayed, events(res.Replayed))
				}
				if err := printReplay(s, res, missed, dryRun); err != nil {
					return err
				}
				return missedError(missed, res, len(ids) > 0, dryRun)
			}
		},
	}
}

// notReplayed is a selected event that was not replayed (or discarded),
// and why.
type notReplayed struct {
	ID string `json:"id"`
	// Reason is "not found", "not DEAD", "does not match the other
	// selectors", "became DEAD meanwhile" (an --id), or the store's
	// reason for an event it matched (jdbcstore.ReasonKeyWentOn,
	// jdbcstore.ReasonNoLongerDead).
	Reason string `json:"reason"`
	Status string `json:"status,omitempty"` // the event's status when it exists
}

// whyNotReplayed lists the events the store matched but left (unchanged,
// with its reasons), then looks up each of the given ids that is neither
// among the changed ones nor those and says why; others tells whether
// selectors besides --id were given. It reads the statuses of those
// events, not their payloads.
func whyNotReplayed(ctx context.Context, store *jdbcstore.Store, given, changed []string, unchanged []jdbcstore.Unchanged, others bool) ([]notReplayed, error) {
	seen := make(map[string]bool, len(changed)+len(unchanged))
	for _, id := range changed {
		seen[id] = true
	}
	var lookUp []string
	for _, u := range unchanged {
		seen[u.ID] = true
		if u.Reason != jdbcstore.ReasonKeyWentOn {
			lookUp = append(lookUp, u.ID)
		}
	}
	var missing []string
	for _, id := range given {
		if !seen[id] {
			seen[id] = true
			missing = append(missing, id)
		}
	}
	status, err := store.Statuses(ctx, append(lookUp, missing...))
	if err != nil {
		return nil, err
	}
	var missed []notReplayed
	for _, u := range unchanged {
		m := notReplayed{ID: u.ID, Reason: u.Reason, Status: core.StatusDead.String()}
		if u.Reason != jdbcstore.ReasonKeyWentOn {
			m.Status = ""
			if st, ok := status[u.ID]; ok {
				m.Status = st.String()
			}
		}
		missed = append(missed, m)
	}
	for _, id := range missing {
		st, found := status[id]
		switch {
		case !found:
			missed = append(missed, notReplayed{ID: id, Reason: "not found"})
		case st != core.StatusDead:
			missed = append(missed, notReplayed{ID: id, Reason: "not DEAD", Status: st.String()})
		case others:
			missed = append(missed, notReplayed{ID: id, Reason: "does not match the other selectors", Status: st.String()})
		default: // died after the selection was read
			missed = append(missed, notReplayed{ID: id, Reason: "became DEAD meanwhile", Status: st.String()})
		}
	}
	return missed, nil
}

// String is "id (reason)" for people.
func (m notReplayed) String() string {
	switch {
	case m.Reason == "not DEAD":
		return fmt.Sprintf("%s (not DEAD: %s)", cell(m.ID), m.Status)
	default:
		return fmt.Sprintf("%s (%s)", cell(m.ID), m.Reason)
	}
}

// missedShown is how many not-replayed ids the stderr line names.
const missedShown = 5

// missedError is the failure of a replay that left selected events out:
// nil when every one was replayed.
func missedError(missed []notReplayed, res jdbcstore.ReplayResult, byID, dryRun bool) error {
	return missedIDsError("replay", missed, len(res.IDs), byID, dryRun)
}

// missedIDsError is the failure of a dead replay or discard (verb) that
// left selected events out: nil when every one was taken. changed counts
// the other events (in a dry run: that would be changed); byID tells
// whether they were selected by --id.
func missedIDsError(verb string, missed []notReplayed, changed int, byID, dryRun bool) error {
	if len(missed) == 0 {
		return nil
	}
	names := make([]string, 0, missedShown)
	for i, m := range missed {
		if i == missedShown {
			names = append(names, fmt.Sprintf("and %d more", len(missed)-missedShown))
			break
		}
		names = append(names, m.String())
	}
	past := verb + "ed"
	state := "were not " + past
	if len(missed) == 1 {
		state = "was not " + past
	}
	n, done := changed, past
	if dryRun {
		state, done = "would not be "+past, "would be "+past
	}
	others := "no other event " + done
	if n > 0 {
		others = fmt.Sprintf("the %d other %s %s", n, events(n), done)
	}
	of := "of the given ids"
	if !byID {
		of = "of the selected events"
	}
	return fmt.Errorf("dead %s: %d %s %s: %s; %s", verb, len(missed), of, state, strings.Join(names, ", "), others)
}

type replayJSON struct {
	DryRun      bool          `json:"dry_run"`
	Matched     int           `json:"matched"`
	Replayed    int           `json:"replayed"`
	IDs         []string      `json:"ids"`
	NotReplayed []notReplayed `json:"not_replayed"`
}

func printReplay(s *session, res jdbcstore.ReplayResult, missed []notReplayed, dryRun bool) error {
	if s.g.json {
		ids := res.IDs
		if ids == nil {
			ids = []string{}
		}
		if missed == nil {
			missed = []notReplayed{}
		}
		return writeJSON(s.stdout, replayJSON{DryRun: dryRun, Matched: res.Matched, Replayed: res.Replayed, IDs: ids, NotReplayed: missed})
	}
	printDeadResult(s.stdout, deadAction{verb: "replay", past: "replayed", unchanged: "nothing changed"},
		res.Matched, res.IDs, missed, dryRun)
	return nil
}

// deadAction names what a dead command does to the events it matched,
// for its text output.
type deadAction struct {
	verb, past string // "replay", "replayed"
	unchanged  string // what a dry run leaves: "nothing changed"
}

// printDeadResult prints the text result of a dead command that matched
// matched events and acted (in a dry run: would act) on those of ids,
// not on those in missed.
func printDeadResult(w io.Writer, a deadAction, matched int, ids []string, missed []notReplayed, dryRun bool) {
	n := len(ids)
	of := ""
	if n != matched {
		of = fmt.Sprintf("%d matched", matched)
	}
	switch {
	case dryRun && of != "":
		fmt.Fprintf(w, "would %s %d %s (%s; dry run: %s)\n", a.verb, n, events(n), of, a.unchanged)
	case dryRun:
		fmt.Fprintf(w, "would %s %d %s (dry run: %s)\n", a.verb, n, events(n), a.unchanged)
	case of != "":
		fmt.Fprintf(w, "%s %d %s (%s)\n", a.past, n, events(n), of)
	default:
		fmt.Fprintf(w, "%s %d %s\n", a.past, n, events(n))
	}
	for i, id := range ids {
		if i == replayShownIDs {
			fmt.Fprintf(w, "  … and %d more (--json lists them all)\n", len(ids)-replayShownIDs)
			break
		}
		fmt.Fprintf(w, "  %s\n", cell(id))
	}
	if len(missed) > 0 {
		if dryRun {
			fmt.Fprintf(w, "would not %s:\n", a.verb)
		} else {
			fmt.Fprintf(w, "not %s:\n", a.past)
		}
		for _, m := range missed {
			fmt.Fprintf(w, "  %s\n", m)
		}
	}
}

// countWere is "1 event was" or "N events were".
func countWere(n int) string {
	if n == 1 {
		return "1 event was"
	}
	return fmt.Sprintf("%d events were", n)
}

// events is "event" or "events".
func events(n int) string {
	if n == 1 {
		return "event"
	}
	return "events"
}
