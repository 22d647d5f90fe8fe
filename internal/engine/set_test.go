package engine_test

import (
	"slices"
	"testing"

	"github.com/outbox-go/outbox/internal/engine"
)

func TestSet(t *testing.T) {
	var s engine.Set[*int]
	a, b, c := new(int), new(int), new(int)
	for id, m := range map[string]*int{"b": b, "a": a, "c": c} {
		if !s.Add(id, m) {
			t.Fatalf("Add(%s) = false", id)
		}
	}
	if s.Add("a", c) {
		t.Fatal("Add of a present id = true")
	}
	ids := s.IDs()
	if !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("IDs = %v", ids)
	}
	if ms := s.Members(); len(ms) != 3 || ms[0] != a || ms[2] != c {
		t.Fatal("Members not in id order")
	}
	if id, _, ok := s.Find(func(m *int) bool { return m == b }); !ok || id != "b" {
		t.Fatalf("Find = %q, %v", id, ok)
	}
	if m, ok := s.Take("b"); !ok || m != b {
		t.Fatal("Take(b) did not return b")
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatal("Take changed a slice IDs returned earlier")
	}
	if _, ok := s.Get("b"); ok {
		t.Fatal("b still in the set after Take")
	}
	if m, ok := s.Take("b"); !ok || m != b {
		t.Fatal("a second Take does not find the store being removed")
	}
	s.Forget("b", b)
	if _, ok := s.Take("b"); ok {
		t.Fatal("Take after Forget found b")
	}
	r := engine.NewRotation(nil)
	seen := map[string]bool{}
	for range 2 {
		id, m, _ := s.Next(r)
		r.Done(id, 0, false, s.IDs())
		if m == nil {
			t.Fatalf("Next returned no member for %q", id)
		}
		seen[id] = true
	}
	if !seen["a"] || !seen["c"] {
		t.Fatalf("rotation visited %v, want a and c", seen)
	}
	var empty engine.Set[*int]
	if id, m, ids := empty.Next(r); id != "" || m != nil || len(ids) != 0 {
		t.Fatal("Next on an empty set returned something")
	}
}
