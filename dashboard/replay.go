package dashboard

import (
	"net/http"
	"slices"
	"strings"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// previewShown is how many matching events a replay preview lists (and,
// for a replay by filter, how far it counts).
const previewShown = 100

type missingID struct {
	ID, Why string
}

type replayView struct {
	Q        deadQuery
	Errors   []string
	ByIDs    bool
	Events   []jdbcstore.DeadSummary // the matching events shown
	Matched  int                     // how many match (a lower bound when More)
	More     bool                    // more than previewShown match
	Missing  []missingID             // given ids that would not be replayed
	Replayed int
	IDs      []string
}

// replayPreview shows what a replay would do (a dry run) and, when
// mutations are enabled, the form that confirms it.
func (h *handler) replayPreview(w http.ResponseWriter, r *http.Request, src *source) {
	v, status := h.replaySelection(r.URL.Query())
	if status == http.StatusOK {
		recs, err := src.store.ListDeadSummaries(r.Context(), v.Q.filter, "", previewShown+1)
		if err != nil {
			h.failStore(w, r, src, "previewing the replay", err)
			return
		}
		if len(recs) > previewShown {
			recs, v.More = recs[:previewShown], true
		}
		v.Events, v.Matched = recs, len(recs)
		if v.ByIDs {
			h.whyMissing(r, src, &v, recs)
		}
	}
	h.render(w, r, src, status, "replay", &page{Title: "Replay preview", Nav: "dead", Data: v})
}

// replaySelection parses the selection of a replay: the view with the
// status to render it with (400 with the errors on bad input).
func (h *handler) replaySelection(form map[string][]string) (replayView, int) {
	q, err := parseDeadQuery(form, h.cfg.PageSize, h.cfg.Now())
	v := replayView{Q: q, ByIDs: len(q.IDs) > 0}
	switch {
	case err != nil:
		v.Errors = strings.Split(err.Error(), "\n")
	case q.All && q.selected():
		v.Errors = []string{"all replays every DEAD event: do not combine it with ids or filters"}
	case !q.All && !q.selected():
		v.Errors = []string{"nothing selected: pick events in the dead letters list, or filter by type, tenant or time"}
	}
	if len(v.Errors) > 0 {
		return v, http.StatusBadRequest
	}
	return v, http.StatusOK
}

// whyMissing lists the given ids that do not match, and why.
func (h *handler) whyMissing(r *http.Request, src *source, v *replayView, matched []jdbcstore.DeadSummary) {
	seen := map[string]bool{}
	for _, rec := range matched {
		seen[rec.ID] = true
	}
	for _, id := range v.Q.IDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		why := "not found"
		if rec, err := src.store.Get(r.Context(), id); err == nil {
			why = "not DEAD (" + rec.Status.String() + ")"
			if rec.Status == core.StatusDead {
				why = "does not match the other filters"
			}
		} else if !isNotFound(err) {
			why = "cannot be read: " + err.Error()
		}
		v.Missing = append(v.Missing, missingID{ID: id, Why: why})
	}
}

// replay moves the selected DEAD events back to NEW (POST, checked).
func (h *handler) replay(w http.ResponseWriter, r *http.Request, src *source) {
	if r.PostForm.Get("confirm") != "yes" {
		h.fail(w, r, src, http.StatusBadRequest, "the replay was not confirmed")
		return
	}
	v, status := h.replaySelection(r.PostForm)
	if status != http.StatusOK {
		h.render(w, r, src, status, "replay", &page{Title: "Replay preview", Nav: "dead", Data: v})
		return
	}
	res, err := src.store.ReplayDead(r.Context(), v.Q.filter, jdbcstore.ReplayOptions{All: v.Q.All})
	h.log.InfoContext(r.Context(), "outbox dashboard: replay", "db", src.name, "ids", len(v.Q.IDs), "type", v.Q.Type,
		"tenant", v.Q.Tenant, "since", v.Q.Since, "until", v.Q.Until, "all", v.Q.All,
		"matched", res.Matched, "replayed", res.Replayed, "remote", r.RemoteAddr, "err", err)
	if err != nil {
		h.failStore(w, r, src, "replaying", err)
		return
	}
	// The overview must not show the figures from before the replay.
	src.invalidate(r.Context(), h.cfg.Now)
	v.Replayed, v.Matched = res.Replayed, res.Matched
	v.IDs = res.IDs
	if len(v.IDs) > previewShown {
		v.IDs, v.More = v.IDs[:previewShown], true
	}
	// The events matched but left DEAD, with the store's reason (a
	// skip-policy event whose key went on, one changed meanwhile).
	for _, u := range res.NotReplayed {
		if len(v.Missing) == previewShown {
			v.More = true
			break
		}
		v.Missing = append(v.Missing, missingID{ID: u.ID, Why: u.Reason})
	}
	if v.ByIDs {
		for _, id := range v.Q.IDs {
			if !slices.Contains(res.IDs, id) && !slices.ContainsFunc(v.Missing, func(m missingID) bool { return m.ID == id }) {
				v.Missing = append(v.Missing, missingID{ID: id, Why: "not DEAD, not found, or not matching"})
			}
		}
	}
	h.render(w, r, src, http.StatusOK, "replayed", &page{Title: "Replayed", Nav: "dead", Data: v})
}
