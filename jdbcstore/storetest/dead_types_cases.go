package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// testDeadTypes: DeadTypes pages the DEAD counts per type, most first
// (ties by type), and StatsWith reads only the MaxDeadTypes first.
func (s *suite) testDeadTypes(t *testing.T) {
	t.Parallel()
	st, _ := s.opsFixture(t) // DEAD: 3 of A, 1 of B
	ctx := t.Context()
	for i := range 3 {
		id := fmt.Sprintf("c-%d", i)
		insert(t, st, build(t, core.NewEvent("C").ID(id).PayloadJSONString(`{}`)))
		if ok, err := st.MarkDead(ctx, testOwner, id, "poison"); !ok || err != nil {
			t.Fatalf("MarkDead %s: %v %v", id, ok, err)
		}
	}
	all := []jdbcstore.DeadTypeCount{{Type: "A", Count: 3}, {Type: "C", Count: 3}, {Type: "B", Count: 1}}
	for _, c := range []struct {
		offset, limit int
		want          []jdbcstore.DeadTypeCount
	}{
		{0, 10, all},
		{0, 2, all[:2]},
		{1, 1, all[1:2]},
		{2, 5, all[2:]},
		{3, 5, nil},
	} {
		got, err := st.DeadTypes(ctx, c.offset, c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("DeadTypes(%d, %d) = %v, %v; want %v", c.offset, c.limit, got, err, c.want)
		}
	}
	for _, c := range []struct{ offset, limit int }{{0, 0}, {0, jdbcstore.MaxListLimit + 1}, {-1, 1}, {jdbcstore.MaxDeadTypesOffset + 1, 1}} {
		if _, err := st.DeadTypes(ctx, c.offset, c.limit); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("DeadTypes(%d, %d): err %v", c.offset, c.limit, err)
		}
	}

	for n, want := range map[int]map[string]int{
		0: {"A": 3, "B": 1, "C": 3},
		2: {"A": 3, "C": 3},
		1: {"A": 3},
	} {
		stats, err := st.StatsWith(ctx, jdbcstore.StatsOptions{MaxDeadTypes: n})
		if err != nil || !maps.Equal(stats.DeadByType, want) {
			t.Errorf("StatsWith(MaxDeadTypes %d).DeadByType = %v, %v; want %v", n, stats.DeadByType, err, want)
		}
		if stats.Counts[core.StatusDead] != 7 {
			t.Errorf("StatsWith(MaxDeadTypes %d).Counts = %v", n, stats.Counts)
		}
	}
	for _, bad := range []int{-1, jdbcstore.MaxListLimit + 1} {
		if _, err := st.StatsWith(ctx, jdbcstore.StatsOptions{MaxDeadTypes: bad}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("MaxDeadTypes %d: err %v", bad, err)
		}
	}
}
