package core_test

import (
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
