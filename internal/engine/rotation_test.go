package engine_test

import (
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// stuckSelector always names a store that does not exist.
type stuckSelector struct{}

func (stuckSelector) Next([]string, string, int) string { return "nope" }

func TestRotationOverrulesAFaultySelector(t *testing.T) {
	r := engine.NewRotation(stuckSelector{})
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
	r := engine.NewRotation(core.DrainFirst{})
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
	one := engine.NewRotation(nil)
	if rest, _ := one.Done(one.Next([]string{"x"}), 5, false, []string{"x"}); !rest {
		t.Error("single store, partial batch: want rest")
	}
}

// panickySelector panics on every call, as a user's policy with a bug
// (or a nil pointer whose Next reads a field) does.
type panickySelector struct{ calls *int }

func (s panickySelector) Next([]string, string, int) string {
	*s.calls++
	panic("a bug in the selector")
}

// A Selector that panics does not kill the poller's or the dispatcher's
// loop (nothing above Next recovers it): each call falls back to
// round-robin order, and the panic is logged once at WARN.
func TestRotationSurvivesAPanickingSelector(t *testing.T) {
	calls := 0
	log, logs := testsupport.NewLogger()
	r := engine.NewRotation(panickySelector{&calls}).WithLogger(log)
	ids := []string{"a", "b", "c"}
	var got []string
	for range 4 {
		id := r.Next(ids)
		got = append(got, id)
		r.Done(id, 0, false, ids)
	}
	if want := []string{"a", "b", "c", "a"}; !slices.Equal(got, want) {
		t.Fatalf("order with a panicking selector = %v, want %v", got, want)
	}
	if calls != 4 {
		t.Errorf("selector called %d times, want 4 (once per Next)", calls)
	}
	if n := logs.Count("level=WARN", "selector", "a bug in the selector"); n != 1 {
		t.Errorf("%d WARN lines about the panic, want 1:\n%s", n, logs.String())
	}
	// Without a logger it survives as well.
	quiet := engine.NewRotation(panickySelector{&calls})
	if id := quiet.Next(ids); id != "a" {
		t.Errorf("first pick without a logger = %q, want a", id)
	}
}
