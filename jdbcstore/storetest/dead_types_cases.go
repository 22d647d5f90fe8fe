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

// testTrailingSpaces: "A " and "A" are two event types, "t1 " and "t1" two
// tenants, on every database: the dead-letter filters, counts and discards
// tell them apart (MySQL's PAD SPACE collation compares them equal).
func (s *suite) testTrailingSpaces(t *testing.T) {
	t.Parallel()
	st, _ := s.opsFixture(t) // DEAD: a-0, a-1 (A, t1), a-2 (A), b-0 (B)
	ctx := t.Context()
	insert(t, st, build(t, core.NewEvent("A ").ID("s-0").TenantID("t1 ").PayloadJSONString(`{}`)))
	if ok, err := st.MarkDead(ctx, testOwner, "s-0", "poison"); !ok || err != nil {
		t.Fatalf("MarkDead s-0: %v %v", ok, err)
	}
	listed := func(f jdbcstore.DeadFilter) []string {
		t.Helper()
		recs, err := st.ListDead(ctx, f, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(recs))
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    jdbcstore.DeadFilter
		want []string
	}{
		{"type A", jdbcstore.DeadFilter{EventType: "A"}, []string{"a-0", "a-1", "a-2"}},
		{"type A+space", jdbcstore.DeadFilter{EventType: "A "}, []string{"s-0"}},
		{"type A+2 spaces", jdbcstore.DeadFilter{EventType: "A  "}, []string{}},
		{"tenant t1", jdbcstore.DeadFilter{TenantID: "t1"}, []string{"a-0", "a-1"}},
		{"tenant t1+space", jdbcstore.DeadFilter{TenantID: "t1 "}, []string{"s-0"}},
	} {
		if got := listed(c.f); !slices.Equal(got, c.want) {
			t.Errorf("ListDead(%s) = %q, want %q", c.name, got, c.want)
		}
	}
	got, err := st.DeadTypes(ctx, 0, 10)
	want := []jdbcstore.DeadTypeCount{{Type: "A", Count: 3}, {Type: "A ", Count: 1}, {Type: "B", Count: 1}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("DeadTypes = %q, %v; want %q", got, err, want)
	}
	stats, err := st.Stats(ctx)
	if wantStats := map[string]int{"A": 3, "A ": 1, "B": 1}; err != nil || !maps.Equal(stats.DeadByType, wantStats) {
		t.Errorf("Stats.DeadByType = %q, %v; want %q", stats.DeadByType, err, wantStats)
	}
	res, err := st.DiscardDead(ctx, jdbcstore.DeadFilter{EventType: "A "}, jdbcstore.DiscardOptions{})
	if err != nil || res.Matched != 1 || res.Discarded != 1 {
		t.Errorf(`DiscardDead(type "A ") = %+v, %v; want 1 matched and discarded`, res, err)
	}
	if got := listed(jdbcstore.DeadFilter{}); !slices.Equal(got, []string{"a-0", "a-1", "a-2", "b-0"}) {
		t.Errorf("DEAD after the discard: %q", got)
	}
}
