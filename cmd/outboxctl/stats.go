package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/outbox-go/outbox/core"
)

func statsCommand() *command {
	return &command{
		name:    "stats",
		summary: "events per status, outbox lag, DEAD events per type",
		help: `Counts the events of each status (NEW, DONE, RETRY, DEAD), finds the oldest pending
(NEW or RETRY) event, whose age is the outbox lag, and counts DEAD events per event
type. Read-only: three short statements.

--json prints one object: dialect, database (password masked), table, counts (NEW,
DONE, RETRY, DEAD), total, pending (NEW+RETRY), oldest_pending (RFC 3339 or null),
lag_seconds and dead_by_type (type → count).`,
		define: func(*flag.FlagSet) action { return runStats },
	}
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
}

func runStats(ctx context.Context, s *session, _ []string) error {
	store, err := s.open(ctx, false)
	if err != nil {
		return err
	}
	st, err := store.Stats(ctx)
	if err != nil {
		return missingTable(err, store.Table())
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
		_, err = fmt.Fprintf(w, "\nno DEAD events\n")
		return err
	}
	types := slices.SortedFunc(maps.Keys(st.DeadByType), func(a, b string) int {
		return cmp.Or(cmp.Compare(st.DeadByType[b], st.DeadByType[a]), cmp.Compare(a, b))
	})
	fmt.Fprintln(w)
	tw = newTable(w)
	row(tw, "DEAD BY TYPE", "EVENTS")
	for _, t := range types {
		row(tw, t, strconv.Itoa(st.DeadByType[t]))
	}
	return tw.Flush()
}
