package storetest

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// testDeadSummaries: ListDeadSummaries lists what ListDead lists, in the
// same order and pages, with the same fields but the payload and headers.
func (s *suite) testDeadSummaries(t *testing.T) {
	t.Parallel()
	st, _ := s.opsFixture(t)
	ctx := t.Context()
	env := build(t, core.NewEvent("C").ID("c-0").AggregateType("Order").AggregateID("o-1").TenantID("t2").
		OrderKey("k").OnDead(core.SkipOnDead).Header("h", "v").PayloadJSONString(`{"big":true}`))
	insert(t, st, env)
	insert(t, st, build(t, core.NewEvent("C").ID("c-1").PayloadBytes([]byte{0, 1})))
	for _, id := range []string{"c-0", "c-1"} {
		if ok, err := st.MarkDead(ctx, testOwner, id, "poison "+id); !ok || err != nil {
			t.Fatalf("MarkDead %s: %v %v", id, ok, err)
		}
	}
	many := []string{"a-1", "c-0", "c-1", "n-0"}
	for i := range 2500 {
		many = append(many, fmt.Sprintf("zz-%04d", i))
	}
	for _, c := range []struct {
		name  string
		f     jdbcstore.DeadFilter
		after string
		limit int
	}{
		{"all", jdbcstore.DeadFilter{}, "", 10},
		{"page 2", jdbcstore.DeadFilter{}, "a-1", 2},
		{"type", jdbcstore.DeadFilter{EventType: "A"}, "", 10},
		{"tenant", jdbcstore.DeadFilter{TenantID: "t2"}, "", 10},
		{"created", jdbcstore.DeadFilter{From: t0.Add(time.Second), To: t0.Add(3 * time.Second)}, "", 10},
		{"many ids", jdbcstore.DeadFilter{IDs: many}, "", 10},
		{"many ids, page 2", jdbcstore.DeadFilter{IDs: many}, "a-1", 1},
	} {
		recs, err := st.ListDead(ctx, c.f, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		sums, err := st.ListDeadSummaries(ctx, c.f, c.after, c.limit)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(sums) != len(recs) {
			t.Errorf("%s: %d summaries, %d events", c.name, len(sums), len(recs))
			continue
		}
		for i, r := range recs {
			m := sums[i]
			if m.ID != r.ID || m.Type != r.Type || m.AggregateType != r.AggregateType || m.AggregateID != r.AggregateID ||
				m.TenantID != r.TenantID || m.Attempts != r.Attempts || m.LastError != r.LastError || m.OrderKey != r.OrderKey ||
				m.OrderSeq != r.OrderSeq || m.OnDead != r.OnDead || m.LockedBy != r.LockedBy || m.PayloadKind != r.PayloadKind ||
				m.DecodeErr != nil {
				t.Errorf("%s: summary %+v of %+v", c.name, m, r)
			}
			sameTime(t, c.name+" CreatedAt", m.CreatedAt, r.CreatedAt)
			sameTime(t, c.name+" DiedAt", m.DiedAt, r.DoneAt)
			sameTime(t, c.name+" OccurredAt", m.OccurredAt, r.OccurredAt)
			sameTime(t, c.name+" AvailableAt", m.AvailableAt, r.AvailableAt)
			sameTime(t, c.name+" LockedUntil", m.LockedUntil, r.LockedUntil)
			if m.DiedAt.IsZero() {
				t.Errorf("%s: %s has no DiedAt", c.name, m.ID)
			}
		}
	}
	// Statuses: of the ids that exist, in statements of at most 1000.
	got, err := st.Statuses(ctx, append(many, "a-0", "d-0", "r-0"))
	want := map[string]core.Status{"a-0": core.StatusDead, "a-1": core.StatusDead, "c-0": core.StatusDead,
		"c-1": core.StatusDead, "d-0": core.StatusDone, "n-0": core.StatusNew, "r-0": core.StatusRetry}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("Statuses = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []int{0, jdbcstore.MaxListLimit + 1} {
		if _, err := st.ListDeadSummaries(ctx, jdbcstore.DeadFilter{}, "", bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("limit %d: err %v", bad, err)
		}
	}
}
