package core_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
)

func TestRoundRobinCyclesInIDOrder(t *testing.T) {
	ids := []string{"a", "b", "c"}
	var got []string
	last := ""
	for range 7 {
		last = core.RoundRobin{}.Next(ids, last, 5) // yields do not matter
		got = append(got, last)
	}
	if want := []string{"a", "b", "c", "a", "b", "c", "a"}; !slices.Equal(got, want) {
		t.Fatalf("round robin order %v, want %v", got, want)
	}
	// A removed store: continue with the next one after it.
	if got := (core.RoundRobin{}).Next([]string{"a", "c"}, "b", 1); got != "c" {
		t.Errorf("after removed b: %q, want c", got)
	}
	if got := (core.RoundRobin{}).Next([]string{"a", "c"}, "z", 1); got != "a" {
		t.Errorf("after removed z: %q, want a (wrap)", got)
	}
}

func TestDrainFirstStaysUntilEmpty(t *testing.T) {
	ids := []string{"a", "b", "c"}
	cases := []struct {
		last  string
		count int
		want  string
	}{
		{"", 0, "a"},
		{"a", 3, "a"},
		{"a", 0, "b"},
		{"c", 1, "c"},
		{"c", 0, "a"},
		{"bb", 2, "c"}, // last store removed while it still yielded: move on
	}
	for _, c := range cases {
		if got := (core.DrainFirst{}).Next(ids, c.last, c.count); got != c.want {
			t.Errorf("Next(%q, %d) = %q, want %q", c.last, c.count, got, c.want)
		}
	}
}

// stuckSelector always names a store that does not exist.
type stuckSelector struct{}

func (stuckSelector) Next([]string, string, int) string { return "nope" }

func TestRotationOverrulesAFaultySelector(t *testing.T) {
	r := core.NewRotation(stuckSelector{})
	ids := []string{"a", "b"}
	first := r.Next(ids)
	r.Done(first, 0, false, ids)
	second := r.Next(ids)
	if first != "a" || second != "b" {
		t.Fatalf("faulty selector: got %q then %q, want a then b", first, second)
	}
	if got := r.Next(nil); got != "" {
		t.Errorf("Next(no stores) = %q, want empty", got)
	}
}

func TestRotationRestsOnceEveryStoreIsDrained(t *testing.T) {
	ids := []string{"a", "b", "c"}
	r := core.NewRotation(core.DrainFirst{})
	type step struct {
		n          int
		full       bool
		wantID     string
		rest, soon bool
	}
	steps := []step{
		{2, true, "a", false, false},  // full batch of new events: keep going
		{1, false, "a", false, false}, // a drained, others not yet
		{0, false, "a", false, false}, // drain-first asks a until it yields nothing
		{0, false, "b", false, false},
		{0, false, "c", true, false}, // every store had an unfilled poll: rest
		{0, true, "a", false, false}, // full of rows held already
		{0, false, "b", false, false},
		{0, false, "c", true, true}, // rest, but briefly: a was full
	}
	for i, s := range steps {
		id := r.Next(ids)
		if id != s.wantID {
			t.Fatalf("step %d: Next = %q, want %q", i, id, s.wantID)
		}
		rest, soon := r.Done(id, s.n, s.full, ids)
		if rest != s.rest || soon != s.soon {
			t.Fatalf("step %d (%s n=%d full=%v): rest=%v soon=%v, want %v %v", i, id, s.n, s.full, rest, soon, s.rest, s.soon)
		}
	}
	// One store: an unfilled poll rests at once (the single-store poller).
	one := core.NewRotation(nil)
	if rest, _ := one.Done(one.Next([]string{"x"}), 5, false, []string{"x"}); !rest {
		t.Error("single store, partial batch: want rest")
	}
}

type labelled struct {
	core.NopMetrics
	label string
}

func (l labelled) ForStore(id string) core.Metrics { return labelled{label: id} }

func TestMetricsForStore(t *testing.T) {
	if got := core.MetricsForStore(labelled{}, "t1"); got.(labelled).label != "t1" {
		t.Errorf("StoreMetrics not scoped: %#v", got)
	}
	if got := core.MetricsForStore(labelled{label: "root"}, ""); got.(labelled).label != "root" {
		t.Errorf("empty id must keep the sink: %#v", got)
	}
	var nop core.Metrics = core.NopMetrics{}
	if got := core.MetricsForStore(nop, "t1"); got != nop {
		t.Errorf("plain Metrics must be returned as is: %#v", got)
	}
}

func TestInherit(t *testing.T) {
	root, mine := slog.Default(), slog.New(slog.DiscardHandler)
	var l *slog.Logger
	var m core.Metrics
	core.Inherit(&l, &m, root, labelled{label: "root"})
	if l != root || m.(labelled).label != "root" {
		t.Errorf("unset fields must take the defaults: %v %v", l, m)
	}
	l, m = mine, labelled{label: "mine"}
	core.Inherit(&l, &m, root, labelled{label: "root"})
	if l != mine || m.(labelled).label != "mine" {
		t.Errorf("set fields must be kept: %v %v", l, m)
	}
}
