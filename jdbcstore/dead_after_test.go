package jdbcstore_test

import (
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// A page cursor no event id can be (not valid UTF-8, or holding NUL) is
// refused with a *core.ConfigError on every database: PostgreSQL failed
// with its own encoding error (SQLSTATE 22021) where SQLite and MariaDB
// compared it.
func TestListDeadAfterCursorNotAnID(t *testing.T) {
	for name, open := range orderedStores {
		t.Run(name, func(t *testing.T) {
			st, _ := open(t)
			deadEvents(t, st, "a1", "b1")
			for _, after := range []string{"\xff", "a\xff", "a\x00", "\xe2\x82"} {
				var ce *core.ConfigError
				if _, err := st.ListDeadSummaries(t.Context(), jdbcstore.DeadFilter{}, after, 10); !errors.As(err, &ce) || ce.Field != "after" {
					t.Errorf("ListDeadSummaries(after %q) = %v, want a *core.ConfigError of field after", after, err)
				}
				if _, err := st.ListDead(t.Context(), jdbcstore.DeadFilter{}, after, 10); !errors.As(err, &ce) || ce.Field != "after" {
					t.Errorf("ListDead(after %q) = %v, want a *core.ConfigError of field after", after, err)
				}
			}
			recs, err := st.ListDeadSummaries(t.Context(), jdbcstore.DeadFilter{}, "a1", 10)
			if err != nil || len(recs) != 1 || recs[0].ID != "b1" {
				t.Fatalf("ListDeadSummaries(after a1) = %+v, %v; want b1", recs, err)
			}
		})
	}
}
