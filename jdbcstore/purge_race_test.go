package jdbcstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Two nodes purging the same range at once: both read a page, one DELETE
// removes its rows and the other finds them gone. The node that deleted
// nothing still waits after the batch (PauseFactor, MaxRate) instead of
// reading the next page at once: every batch of each node is followed by
// a pause, but for its last when that read a short page (which ends the
// run). Counted through the store's hooks, not timed.
func TestPurgeRacingNodesPauseAfterEveryBatch(t *testing.T) {
	for _, name := range []string{"postgres", "mysql"} {
		t.Run(name, func(t *testing.T) {
			st, db := orderedStores[name](t)
			other, err := jdbcstore.New(db, jdbcstore.Config{Dialect: st.Dialect()})
			if err != nil {
				t.Fatal(err)
			}
			const rows, batch = 400, 100
			seedDone(t, st, db, rows)
			// Both nodes read their first page before either deletes it.
			var (
				both    sync.WaitGroup
				mu      sync.Mutex
				pauses  [2][]time.Duration
				lastLen [2]int // rows of the last page read
			)
			both.Add(2)
			for i, s := range []*jdbcstore.Store{st, other} {
				var first sync.Once
				jdbcstore.SetPurgeHooks(s, func(ids []any) {
					lastLen[i] = len(ids)
					first.Do(func() { both.Done(); both.Wait() })
				}, func(wait time.Duration) {
					mu.Lock()
					defer mu.Unlock()
					pauses[i] = append(pauses[i], wait)
				})
			}
			var (
				wg   sync.WaitGroup
				res  [2]jdbcstore.PurgeResult
				errs [2]error
			)
			for i, s := range []*jdbcstore.Store{st, other} {
				wg.Go(func() {
					res[i], errs[i] = s.Purge(t.Context(), jdbcstore.PurgeOptions{DoneOlderThan: time.Hour, BatchSize: batch, PauseFactor: 1, MaxRate: 2000})
				})
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil || res[0].Done+res[1].Done != rows {
				t.Fatalf("Purge: %+v, %v and %+v, %v; want %d rows deleted in all", res[0], errs[0], res[1], errs[1], rows)
			}
			for i := range 2 {
				// A short last page ends the run without a pause; after a
				// full one the run reads again (nothing left), pausing first.
				want := res[i].Batches
				if lastLen[i] < batch {
					want--
				}
				if n := len(pauses[i]); n != want {
					t.Errorf("node %d: %d statements (deleted %d rows, last page %d rows), %d pauses %v; want %d, one after each batch that read a full page",
						i, res[i].Batches, res[i].Done, lastLen[i], n, pauses[i], want)
				}
				for _, w := range pauses[i] {
					if w <= 0 {
						t.Errorf("node %d: a pause of %s after a batch; want > 0", i, w)
					}
				}
			}
		})
	}
}

// seedDone inserts n DONE rows finished two days ago, a millisecond apart,
// with ids e-0000, e-0001, …
func seedDone(t *testing.T, st *jdbcstore.Store, db *sqlx.DB, n int) {
	t.Helper()
	old := time.Now().Add(-48 * time.Hour).UTC()
	d := st.Dialect()
	for i := range n {
		_, err := db.Exec(db.Rebind("INSERT INTO outbox_event (event_id, event_type, occurred_at, payload, payload_kind, status, attempts,"+
			" available_at, created_at, done_at) VALUES (?, 'T', ?, ?, 0, ?, 1, ?, ?, ?)"),
			fmt.Sprintf("e-%04d", i), d.EncodeTime(old), `{}`, int(core.StatusDone), d.EncodeTime(old), d.EncodeTime(old),
			d.EncodeTime(old.Add(time.Duration(i)*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
	}
}
