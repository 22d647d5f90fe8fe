package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func statsCommand() *command {
	return &command{
		name:    "stats",
		summary: "events per status, outbox lag, DEAD events per type, blocked ordering keys",
		help: `Counts the events of each status (NEW, DONE, RETRY, DEAD), finds the oldest pending
(NEW or RETRY) event and the outbox lag: how long the pending event due first has
been due (an event waiting for its NotBefore, its next retry or an earlier event of its
ordering key is no lag), counts
DEAD events per event type and counts the blocked ordering keys: keys whose later
events wait behind a DEAD event under the block policy. The first --keys blocked keys (longest blocked
first) are listed with the DEAD event holding each; 'dead replay --id' (deliver it)
or 'dead discard --id' (drop it) releases a key. Read-only: five short statements,
six when a key is blocked.

--json prints one object: dialect, database (password masked), table, counts (NEW,
DONE, RETRY, DEAD), total, pending (NEW+RETRY), oldest_pending (RFC 3339 or null),
lag_seconds, dead_by_type (type → count), blocked_keys (the count) and blocked (the
first --keys of them: key, event_id, event_type, seq, died_at, last_error).`,
		define: func(fs *flag.FlagSet) action {
			keys := defaultBlockedShown
			fs.IntVar(&keys, "keys", keys, fmt.Sprintf("most blocked keys to list, 1..%d", jdbcstore.MaxBlockedKeys))
			return func(ctx context.Context, s *session, _ []string) error {
				if keys < 1 || keys > jdbcstore.MaxBlockedKeys {
					return usagef("--keys must be 1..%d, got %d", jdbcstore.MaxBlockedKeys, keys)
				}
				return runStats(ctx, s, keys)
			}
		},
	}
}

// defaultBlockedShown is how many blocked keys stats lists by default.
const defaultBlockedShown = 10

// blockedJSON is one blocked ordering key.
type blockedJSON struct {
	Key       string  `json:"key"`
	EventID   string  `json:"event_id"`
	EventType string  `json:"event_type"`
	Seq       int64   `json:"seq"`
	DiedAt    *string `json:"died_at"`
	LastError string  `json:"last_error"`
}

// statusCounts are the counts of the four statuses, in status order.
type statusCounts struct {
	New   int `json:"NEW"`
	Done  int `json:"DONE"`
	Retry int `json:"RETRY"`
	Dead  int `json:"DEAD"`
}

type statsJSON struct {
	Dialect       string         `json:"dialect"`
	Database      string         `json:"database"`
	Table         string         `json:"table"`
	Counts        statusCounts   `json:"counts"`
	Other         map[string]int `json:"other_statuses,omitempty"`
	Total         int            `json:"total"`
	Pending       int            `json:"pending"`
	OldestPending *string        `json:"oldest_pending"`
	LagSeconds    float64        `json:"lag_seconds"`
	DeadByType    map[string]int `json:"dead_by_type"`
	BlockedKeys   int            `json:"blocked_keys"`
	Blocked       []blockedJSON  `json:"blocked"`
}

func runStats(ctx context.Context, s *session, shown int) error {
	store, err := s.open(ctx, false)
	if err != nil {
		return err
	}
	st, err := store.Stats(ctx)
	if err != nil {
		return missingTable(ctx, err, store)
	}
	out := statsJSON{
		Dialect: store.Dialect().Name(), Database: s.target.shown, Table: store.Table(),
		Counts: statusCounts{
			New: st.Counts[core.StatusNew], Done: st.Counts[core.StatusDone],
			Retry: st.Counts[core.StatusRetry], Dead: st.Counts[core.StatusDead],
		},
		OldestPending: jsonTime(st.OldestPending),
		LagSeconds:    st.Lag.Seconds(),
		DeadByType:    st.DeadByType,
		BlockedKeys:   st.BlockedKeys,
		Blocked:       []blockedJSON{},
	}
	var blocked []jdbcstore.BlockedKey
	if st.BlockedKeys > 0 {
		if blocked, err = store.BlockedKeys(ctx, shown); err != nil {
			return err
		}
	}
	for _, b := range blocked {
		out.Blocked = append(out.Blocked, blockedJSON{Key: b.Key, EventID: b.EventID, EventType: b.EventType,
			Seq: b.Seq, DiedAt: jsonTime(b.DiedAt), LastError: b.LastError})
	}
	for status, n := range st.Counts {
		out.Total += n
		if !status.Valid() {
			if out.Other == nil {
				out.Other = map[string]int{}
			}
			out.Other[strconv.Itoa(int(status))] = n
		}
	}
	out.Pending = out.Counts.New + out.Counts.Retry
	if s.g.json {
		return writeJSON(s.stdout, out)
	}

	w := s.stdout
	fmt.Fprintf(w, "table %s on %s %s\n\n", cell(out.Table), out.Dialect, cell(out.Database))
	tw := newTable(w)
	row(tw, "STATUS", "CODE", "EVENTS")
	for _, status := range []core.Status{core.StatusNew, core.StatusDone, core.StatusRetry, core.StatusDead} {
		row(tw, status.String(), strconv.Itoa(int(status)), strconv.Itoa(st.Counts[status]))
	}
	for _, code := range slices.Sorted(maps.Keys(out.Other)) {
		row(tw, "unknown", code, strconv.Itoa(out.Other[code]))
	}
	fmt.Fprintf(tw, "total\t\t%d\n", out.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.OldestPending.IsZero() {
		fmt.Fprintf(w, "\nlag: 0s (no pending event)\n")
	} else {
		fmt.Fprintf(w, "\nlag: %s (oldest pending event created %s; %d pending)\n",
			formatLag(st.Lag), formatTime(st.OldestPending), out.Pending)
	}
	if len(st.DeadByType) == 0 {
		fmt.Fprintf(w, "\nno DEAD events\n")
	} else {
		types := slices.SortedFunc(maps.Keys(st.DeadByType), func(a, b string) int {
			return cmp.Or(cmp.Compare(st.DeadByType[b], st.DeadByType[a]), cmp.Compare(a, b))
		})
		fmt.Fprintln(w)
		tw = newTable(w)
		row(tw, "DEAD BY TYPE", "EVENTS")
		for _, t := range types {
			row(tw, t, strconv.Itoa(st.DeadByType[t]))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return printBlocked(w, st.BlockedKeys, blocked)
}

// printBlocked writes the blocked ordering keys: the count, then the
// listed ones with the DEAD event holding each.
func printBlocked(w io.Writer, n int, blocked []jdbcstore.BlockedKey) error {
	if n == 0 {
		_, err := fmt.Fprintf(w, "\nno blocked ordering keys\n")
		return err
	}
	fmt.Fprintf(w, "\nblocked ordering keys: %d (release one with 'dead replay --id ID' or 'dead discard --id ID')\n", n)
	tw := newTable(w)
	row(tw, "BLOCKED KEY", "SEQ", "DEAD EVENT", "TYPE", "DIED_AT", "LAST_ERROR")
	for _, b := range blocked {
		row(tw, b.Key, strconv.FormatInt(b.Seq, 10), b.EventID, b.EventType, formatTime(b.DiedAt),
			truncate(cell(b.LastError), listErrorWidth))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more := n - len(blocked); more > 0 {
		_, err := fmt.Fprintf(w, "… and %d more (--keys N lists more)\n", more)
		return err
	}
	return nil
}
