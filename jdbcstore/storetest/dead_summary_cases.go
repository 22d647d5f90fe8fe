package storetest

import (
	"errors"
	"fmt"
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
		OrderKey("k").Header("h", "v").PayloadJSONString(`{"big":true}`))
	insert(t, st, env)
	if ok, err := st.MarkDead(ctx, testOwner, "c-0", "poison c-0"); !ok || err != nil {
		t.Fatalf("MarkDead: %v %v", ok, err)
	}
	many := []string{"a-1", "c-0", "n-0"}
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
				m.DecodeErr != nil {
				t.Errorf("%s: summary %+v of %+v", c.name, m, r)
			}
			sameTime(t, c.name+" CreatedAt", m.CreatedAt, r.CreatedAt)
			sameTime(t, c.name+" DiedAt", m.DiedAt, r.DoneAt)
			if m.DiedAt.IsZero() {
				t.Errorf("%s: %s has no DiedAt", c.name, m.ID)
			}
		}
	}
	for _, bad := range []int{0, jdbcstore.MaxListLimit + 1} {
		if _, err := st.ListDeadSummaries(ctx, jdbcstore.DeadFilter{}, "", bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("limit %d: err %v", bad, err)
		}
	}
}
