package dashboard

import (
	"fmt"
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
	Q      deadQuery
	Errors []string
	ByIDs  bool
	// Events are the events shown that a replay would move back to NEW
	// (preview).
	Events  []jdbcstore.DeadSummary
	Matched int  // how many DEAD events match (the preview: of those it checked, a lower bound when More)
	More    bool // more than previewShown match (the preview), or more ids than shown (the result)
	// Missing are the events (and given ids) that would not be (were
	// not) replayed, with why.
	Missing     []missingID
	MoreMissing bool // more than previewShown of them: the rest are not listed
	// Left counts the matched events a replay would leave (left) DEAD,
	// and Gone those that stopped being DEAD meanwhile (in the preview
	// they count in Left): both with their reasons in Missing.
	Left, Gone int
	Replayed   int
	IDs        []string
}

// replayPreview shows what a replay would do (a dry run) and, when
// mutations are enabled, the form that confirms it. The events listed
// (at most previewShown) go through the store's own dry run of the
// replay, as outboxctl dead replay --dry-run does: the events it would
// leave DEAD (an ordered event under the skip policy whose key went on
// without it) are named with its reason, not announced as replayed.
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
		v.Matched = len(recs)
		if len(recs) > 0 {
			f := v.Q.filter
			f.IDs = make([]string, len(recs))
			for i, rec := range recs {
				f.IDs[i] = rec.ID
			}
			res, err := src.store.ReplayDead(r.Context(), f, jdbcstore.ReplayOptions{DryRun: true})
			if err != nil {
				h.failStore(w, r, src, "previewing the replay", err)
				return
			}
			v.sortOut(recs, res)
		}
		if v.ByIDs {
			if err := h.whyMissing(r, src, &v, recs); err != nil {
				h.failStore(w, r, src, "previewing the replay", err)
				return
			}
		}
	}
	h.render(w, r, src, status, "replay", &page{Title: "Replay preview", Nav: "dead", Data: v})
}

// sortOut splits the listed events recs by the dry run res over them:
// those it would replay go to Events, the others to Missing with the
// store's reason. One listed but not in res stopped matching between
// the list and the dry run.
func (v *replayView) sortOut(recs []jdbcstore.DeadSummary, res jdbcstore.ReplayResult) {
	would := make(map[string]bool, len(res.IDs))
	for _, id := range res.IDs {
		would[id] = true
	}
	why := make(map[string]string, len(res.NotReplayed))
	for _, u := range res.NotReplayed {
		why[u.ID] = u.Reason
	}
	for _, rec := range recs {
		switch {
		case would[rec.ID]:
			v.Events = append(v.Events, rec)
		case why[rec.ID] != "":
			v.Missing = append(v.Missing, missingID{ID: rec.ID, Why: why[rec.ID]})
		default:
			v.Missing = append(v.Missing, missingID{ID: rec.ID, Why: jdbcstore.ReasonNoLongerDead})
		}
	}
	v.Left = len(recs) - len(v.Events)
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

// whyMissing lists the given ids that do not match, and why. An id that
// cannot be read is listed with the error, unless the page's work was
// cut short (its context ended): that error is returned.
func (h *handler) whyMissing(r *http.Request, src *source, v *replayView, matched []jdbcstore.DeadSummary) error {
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
				if v.More {
					// Perhaps past the events the preview checked.
					continue
				}
				why = "does not match the other filters"
			}
		} else if r.Context().Err() != nil {
			return err
		} else if !isNotFound(err) {
			why = "cannot be read: " + err.Error()
		}
		v.Missing = append(v.Missing, missingID{ID: id, Why: why})
	}
	return nil
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
	h.log.InfoContext(r.Context(), "outbox dashboard: replay", storeArgs(src.name, "ids", len(v.Q.IDs), "type", v.Q.Type,
		"tenant", v.Q.Tenant, "since", v.Q.Since, "until", v.Q.Until, "all", v.Q.All,
		"matched", res.Matched, "replayed", res.Replayed, "remote", r.RemoteAddr, "error", err)...)
	if err == nil || res.Replayed > 0 {
		// The overview must not show the figures from before the replay.
		src.invalidate(r.Context(), h.cfg.Now)
	}
	if err != nil {
		// A replay commits a batch at a time: those before the failure
		// stay replayed, the rest DEAD.
		switch {
		case res.Replayed == 1:
			err = fmt.Errorf("%w (1 event was replayed before the failure)", err)
		case res.Replayed > 1:
			err = fmt.Errorf("%w (%d events were replayed before the failure)", err, res.Replayed)
		}
		h.failStore(w, r, src, "replaying", err)
		return
	}
	v.Replayed, v.Matched = res.Replayed, res.Matched
	v.IDs = res.IDs
	if len(v.IDs) > previewShown {
		v.IDs, v.More = v.IDs[:previewShown], true
	}
	// The events matched but not replayed, with the store's reason: left
	// DEAD (a skip-policy event whose key went on), or changed meanwhile.
	for _, u := range res.NotReplayed {
		if u.Reason == jdbcstore.ReasonNoLongerDead {
			v.Gone++
		} else {
			v.Left++
		}
		v.miss(u.ID, u.Reason)
	}
	if v.ByIDs {
		for _, id := range v.Q.IDs {
			if !slices.Contains(res.IDs, id) && !slices.ContainsFunc(res.NotReplayed, func(u jdbcstore.Unchanged) bool { return u.ID == id }) {
				v.miss(id, "not DEAD, not found, or not matching")
			}
		}
	}
	h.render(w, r, src, http.StatusOK, "replayed", &page{Title: "Replayed", Nav: "dead", Data: v})
}

// miss adds id to Missing, up to previewShown of them.
func (v *replayView) miss(id, why string) {
	if len(v.Missing) == previewShown {
		v.MoreMissing = true
		return
	}
	v.Missing = append(v.Missing, missingID{ID: id, Why: why})
}
