package jdbcstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// deadEvents inserts DEAD events with ids, through the store.
func deadEvents(t *testing.T, st *jdbcstore.Store, ids ...string) {
	t.Helper()
	lease := core.Lease{Owner: "o", Until: time.Now().Add(time.Hour)}
	for _, id := range ids {
		if err := st.Insert(t.Context(), st.DB(), mustEnv(t, core.NewEvent("T").ID(id).PayloadJSONString(`{}`)), lease); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.MarkDead(t.Context(), "o", id, "poison"); err != nil || !ok {
			t.Fatalf("MarkDead %s: %v %v", id, ok, err)
		}
	}
}

// meanwhile makes the hook between a batch's read and its write run
// stmt (with args) once, as another operator or the purge would.
func meanwhile(t *testing.T, st *jdbcstore.Store, db *sqlx.DB, stmt string, args ...any) {
	t.Helper()
	ran := false
	jdbcstore.SetDeadPageHook(st, func([]jdbcstore.DeadSummary) {
		if ran {
			return
		}
		ran = true
		if _, err := db.Exec(db.Rebind(stmt), args...); err != nil {
			t.Errorf("meanwhile: %v", err)
		}
	})
}

// A row that stops being DEAD between the read of its batch and the
// write is not counted or listed as replayed: it is in NotReplayed, with
// why.
func TestReplayDeadReportsRowsChangedMeanwhile(t *testing.T) {
	for name, open := range orderedStores {
		t.Run(name, func(t *testing.T) {
			st, db := open(t)
			deadEvents(t, st, "a", "b", "c")
			meanwhile(t, st, db, "UPDATE outbox_event SET status = ? WHERE event_id = ?", int(core.StatusDone), "b")
			res, err := st.ReplayDead(t.Context(), jdbcstore.DeadFilter{IDs: []string{"a", "b", "c"}}, jdbcstore.ReplayOptions{})
			want := []jdbcstore.Unchanged{{ID: "b", Reason: jdbcstore.ReasonNoLongerDead}}
			if err != nil || res.Matched != 3 || res.Replayed != 2 || !slices.Equal(res.IDs, []string{"a", "c"}) || !slices.Equal(res.NotReplayed, want) {
				t.Fatalf("ReplayDead = %+v, %v; want a and c replayed, b not (DONE meanwhile)", res, err)
			}
			if r, err := st.Get(t.Context(), "b"); err != nil || r.Status != core.StatusDone {
				t.Fatalf("b: %v, %v; want DONE as the other writer left it", r.Status, err)
			}
		})
	}
}

// DiscardDead keeps a row that stopped being DEAD between the read of its
// batch and the write, and reports it in NotDiscarded, not in IDs.
func TestDiscardDeadReportsRowsChangedMeanwhile(t *testing.T) {
	for name, open := range orderedStores {
		t.Run(name, func(t *testing.T) {
			st, db := open(t)
			deadEvents(t, st, "a", "b", "c")
			meanwhile(t, st, db, "UPDATE outbox_event SET status = ? WHERE event_id = ?", int(core.StatusNew), "b")
			res, err := st.DiscardDead(t.Context(), jdbcstore.DeadFilter{IDs: []string{"a", "b", "c"}}, jdbcstore.DiscardOptions{})
			want := []jdbcstore.Unchanged{{ID: "b", Reason: jdbcstore.ReasonNoLongerDead}}
			if err != nil || res.Matched != 3 || res.Discarded != 2 || !slices.Equal(res.IDs, []string{"a", "c"}) || !slices.Equal(res.NotDiscarded, want) {
				t.Fatalf("DiscardDead = %+v, %v; want a and c discarded, b not (replayed meanwhile)", res, err)
			}
			if r, err := st.Get(t.Context(), "b"); err != nil || r.Status != core.StatusNew {
				t.Fatalf("b: %v, %v; want NEW, kept", r.Status, err)
			}
		})
	}
}
