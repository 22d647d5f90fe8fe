package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/outbox-go/outbox/core"
	"strconv"

	"github.com/outbox-go/outbox/jdbcstore"
)

// listErrorWidth is how many characters of last_error the table shows.
const listErrorWidth = 60

func deadListCommand() *command {
	return &command{
		name:    "list",
		summary: "list DEAD events, a page at a time",
		help: fmt.Sprintf(`Lists DEAD events ordered by event id, at most --limit (1..%d) of them. When a page is
full the last line says how to get the next one: "next: --after <id>", the id quoted for
the shell ($'...' for an id holding control characters, which the table shows escaped).

The table shows EVENT_ID, TYPE, TENANT, ATTEMPTS, DIED_AT (UTC) and the first %d
characters of LAST_ERROR; 'dead show ID' prints one event in full. --since and --until
filter on created_at, when the event was published.

--json prints one JSON array of events: the fields of 'dead show --json' but the
headers, the payload and payload_size (the list reads no payloads), with last_error
in full. When it holds --limit elements, pass the event_id of the last one as
--after to get the next page. When the event died is died_at (DIED_AT above).
An --after no id can be (not UTF-8, or with a NUL byte) is refused.`, jdbcstore.MaxListLimit, listErrorWidth),
		define: func(fs *flag.FlagSet) action {
			var (
				f     deadFilterFlags
				limit int
				after string
			)
			f.register(fs)
			fs.IntVar(&limit, "limit", defaultLimit, fmt.Sprintf("most events to list, 1..%d", jdbcstore.MaxListLimit))
			fs.StringVar(&after, "after", "", "list events whose id sorts after this event `id` (the cursor of the previous page)")
			return func(ctx context.Context, s *session, _ []string) error {
				filter, err := f.filter()
				if err != nil {
					return err
				}
				if limit < 1 || limit > jdbcstore.MaxListLimit {
					return usagef("--limit must be 1..%d, got %d", jdbcstore.MaxListLimit, limit)
				}
				var ce *core.ConfigError
				if errors.As(jdbcstore.CheckCursor(after), &ce) { // the store's own check and words
					return usagef("--%s %s", ce.Field, ce.Msg)
				}
				store, err := s.open(ctx, false)
				if err != nil {
					return err
				}
				recs, err := store.ListDeadSummaries(ctx, filter, after, limit)
				if err != nil {
					return missingTable(ctx, err, store)
				}
				return printDeadList(s, recs, limit)
			}
		},
	}
}

func printDeadList(s *session, recs []jdbcstore.DeadSummary, limit int) error {
	if s.g.json {
		out := make([]recordJSON, len(recs))
		for i, r := range recs {
			out[i] = summaryJSON(r)
		}
		return writeJSON(s.stdout, out)
	}
	if len(recs) == 0 {
		_, err := fmt.Fprintln(s.stdout, "no DEAD events match")
		return err
	}
	tw := newTable(s.stdout)
	row(tw, "EVENT_ID", "TYPE", "TENANT", "ATTEMPTS", "DIED_AT", "LAST_ERROR")
	for _, r := range recs {
		row(tw, r.ID, r.Type, r.TenantID, strconv.Itoa(r.Attempts), formatTime(r.DiedAt),
			truncate(cell(r.LastError), listErrorWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(recs) == limit {
		_, err := fmt.Fprintf(s.stdout, "next: --after %s\n", shellQuote(recs[len(recs)-1].ID))
		return err
	}
	return nil
}
