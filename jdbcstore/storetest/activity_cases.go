package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// testActivity: events finished at known times land in the right
// buckets; pending rows and rows finished before the window are not
// counted; bad arguments are refused.
func (s *suite) testActivity(t *testing.T) {
	t.Parallel()
	clk := newClock(t0)
	st := s.newStore(t, clk, jdbcstore.Config{})
	ctx := t.Context()
	for _, id := range []string{"old", "d1", "b1", "d2", "d3", "x1", "p1"} {
		insert(t, st, jsonEvent(t, id))
	}
	// "old" DONE at t0 (before the window), d1 at t0+61s (bucket 0),
	// d2 and x1 (DEAD) at t0+150s (bucket 1), d3 at t0+179s (bucket 1);
	// p1 stays NEW. Now is t0+180s; 2 buckets of a minute start at t0+60s.
	if ok, err := markDone(ctx, st, "old"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	clk.Set(t0.Add(61 * time.Second))
	if ok, err := markDone(ctx, st, "d1"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// b1 finishes exactly on bucket 1's start: bucket 1 counts it.
	clk.Set(t0.Add(120 * time.Second))
	if ok, err := markDone(ctx, st, "b1"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	clk.Set(t0.Add(150 * time.Second))
	if ok, err := markDone(ctx, st, "d2"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := st.MarkDead(ctx, testOwner, "x1", "poison"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	clk.Set(t0.Add(179 * time.Second))
	if ok, err := markDone(ctx, st, "d3"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	clk.Set(t0.Add(180 * time.Second))
	got, err := st.Activity(ctx, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Activity returned %d buckets, want 2", len(got))
	}
	sameTime(t, "bucket 0 start", got[0].Start, t0.Add(60*time.Second))
	sameTime(t, "bucket 1 start", got[1].Start, t0.Add(120*time.Second))
	if got[0].Done != 1 || got[0].Dead != 0 || got[1].Done != 3 || got[1].Dead != 1 {
		t.Errorf("Activity = %+v, want [{Done:1 Dead:0} {Done:3 Dead:1}]", got)
	}

	one, err := st.Activity(ctx, 1, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != 1 || one[0].Done != 5 || one[0].Dead != 1 {
		t.Errorf("Activity(1, 10m) = %+v, want one bucket {Done:5 Dead:1}", one)
	}

	empty := s.newStore(t, nil, jdbcstore.Config{})
	zero, err := empty.Activity(ctx, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range zero {
		if b.Done != 0 || b.Dead != 0 {
			t.Errorf("empty table bucket %d = %+v", i, b)
		}
	}

	for _, bad := range []struct {
		buckets int
		width   time.Duration
	}{{0, time.Minute}, {jdbcstore.MaxActivityBuckets + 1, time.Minute}, {1, 0}, {1, -time.Second}} {
		if _, err := st.Activity(ctx, bad.buckets, bad.width); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("Activity(%d, %s) = %v, want ErrInvalidConfig", bad.buckets, bad.width, err)
		}
	}
}
