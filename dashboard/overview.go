package dashboard

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// typesShown is how many event types the overview lists: the ones with
// the most DEAD events, the only ones it reads.
const typesShown = 10

type statusRow struct {
	Name  string
	Code  int
	Count int
}

type typeRow struct {
	Type  string
	Count int
}

type overviewView struct {
	Now          time.Time
	Statuses     []statusRow
	Total        int
	Pending      int
	OldestAt     time.Time
	Lag          time.Duration
	Activity     []jdbcstore.ActivityBucket
	ActivityMax  int
	DoneRecent   int
	DeadRecent   int
	Window       time.Duration
	Bucket       time.Duration
	DeadTypes    []typeRow
	MoreTypes    bool
	BlockedCount int
	Blocked      []jdbcstore.BlockedKey
	ReadAt       time.Time
	Took         time.Duration
	Failed       string // the failure of the last read, newer than these figures
	FailedAt     time.Time
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request, src *source) {
	d, err := src.overview(r.Context(), h.cfg.Now, h.cfg.StatsMaxAge)
	if err != nil {
		// The source logs its failed reads.
		err = timedOut(r.Context(), h.cfg.QueryTimeout, err)
		h.fail(w, r, src, storeStatus(err), "reading the overview failed: "+err.Error())
		return
	}
	v := overviewView{
		Now: h.cfg.Now(), Lag: d.Stats.Lag, OldestAt: d.Stats.OldestPending,
		Activity: d.Activity, Window: time.Duration(len(d.Activity)) * DefaultActivityWidth, Bucket: DefaultActivityWidth,
		BlockedCount: d.Stats.BlockedKeys, Blocked: d.Blocked, ReadAt: d.ReadAt, Took: d.Took,
	}
	if d.Failed != nil {
		v.Failed, v.FailedAt = d.Failed.Error(), d.FailedAt
	}
	for _, s := range []core.Status{core.StatusNew, core.StatusRetry, core.StatusDone, core.StatusDead} {
		v.Statuses = append(v.Statuses, statusRow{Name: s.String(), Code: int(s), Count: d.Stats.Counts[s]})
	}
	for _, n := range d.Stats.Counts {
		v.Total += n
	}
	v.Pending = d.Stats.Counts[core.StatusNew] + d.Stats.Counts[core.StatusRetry]
	for _, b := range d.Activity {
		v.ActivityMax = max(v.ActivityMax, b.Done+b.Dead)
		v.DoneRecent += b.Done
		v.DeadRecent += b.Dead
	}
	v.DeadTypes = deadTypes(d.Stats.DeadByType)
	if len(v.DeadTypes) > typesShown {
		v.MoreTypes = true
		v.DeadTypes = v.DeadTypes[:typesShown]
	}
	h.render(w, r, src, http.StatusOK, "overview", &page{Title: "Overview", Nav: "overview", Data: v})
}

// deadTypes sorts DEAD counts per type, most first.
func deadTypes(m map[string]int) []typeRow {
	rows := make([]typeRow, 0, len(m))
	for _, t := range slices.Sorted(maps.Keys(m)) {
		rows = append(rows, typeRow{Type: t, Count: m[t]})
	}
	slices.SortStableFunc(rows, func(a, b typeRow) int { return cmp.Compare(b.Count, a.Count) })
	return rows
}

type typesView struct {
	Types  []typeRow
	Offset int // of the first type listed
	Limit  int
	Next   int // the offset of the next page, 0 on the last
	Errors []string
}

// types lists the event types with DEAD events, most DEAD events first,
// a page (Config.PageSize types) at a time.
func (h *handler) types(w http.ResponseWriter, r *http.Request, src *source) {
	v := typesView{Limit: h.cfg.PageSize}
	if s := r.URL.Query().Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > jdbcstore.MaxDeadTypesOffset {
			v.Errors = append(v.Errors, fmt.Sprintf("offset must be 0..%d, got %q", jdbcstore.MaxDeadTypesOffset, trunc(20, s)))
			h.render(w, r, src, http.StatusBadRequest, "types", &page{Title: "Event types", Nav: "types", Data: v})
			return
		}
		v.Offset = n
	}
	types, err := src.store.DeadTypes(r.Context(), v.Offset, v.Limit+1)
	if err != nil {
		h.failStore(w, r, src, "reading the event types", err)
		return
	}
	if len(types) > v.Limit {
		types, v.Next = types[:v.Limit], v.Offset+v.Limit
	}
	for _, t := range types {
		v.Types = append(v.Types, typeRow{Type: t.Type, Count: t.Count})
	}
	h.render(w, r, src, http.StatusOK, "types", &page{Title: "Event types", Nav: "types", Data: v})
}

type purgeView struct {
	Done, Dead  string // the ages as given
	Asked       bool
	Result      jdbcstore.PurgeResult
	DoneAge     time.Duration
	DeadAge     time.Duration
	Errors      []string
	CommandLine string // the outboxctl command, without its --dsn
	Database    string // the database's name in a set of several, else ""
}

// purgePreview counts what a purge with the given ages would remove; it
// never removes anything.
func (h *handler) purgePreview(w http.ResponseWriter, r *http.Request, src *source) {
	q := r.URL.Query()
	v := purgeView{Done: strings.TrimSpace(q.Get("done")), Dead: strings.TrimSpace(q.Get("dead"))}
	var err error
	if v.DoneAge, err = parseAge(v.Done); err != nil {
		v.Errors = append(v.Errors, "done: "+err.Error())
	}
	if v.DeadAge, err = parseAge(v.Dead); err != nil {
		v.Errors = append(v.Errors, "dead: "+err.Error())
	}
	status := http.StatusOK
	switch {
	case len(v.Errors) > 0:
		status = http.StatusBadRequest
	case v.DoneAge > 0 || v.DeadAge > 0:
		v.Asked = true
		res, err := src.store.Purge(r.Context(), jdbcstore.PurgeOptions{DoneOlderThan: v.DoneAge, DeadOlderThan: v.DeadAge, DryRun: true})
		if err != nil {
			h.failStore(w, r, src, "counting for the purge preview", err)
			return
		}
		v.Result = res
		v.CommandLine = "outboxctl purge"
		if src.table != "" && src.table != jdbcstore.DefaultTable {
			v.CommandLine += " --table " + src.table // a table name needs no shell quoting
		}
		v.Database = src.name
		if v.DoneAge > 0 {
			v.CommandLine += " --done-older-than " + v.Done
		}
		if v.DeadAge > 0 {
			v.CommandLine += " --dead-older-than " + v.Dead
		}
	}
	h.render(w, r, src, status, "purge", &page{Title: "Purge preview", Nav: "purge", Data: v})
}
