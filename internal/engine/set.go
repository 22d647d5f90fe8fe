package engine

import (
	"slices"
	"sort"
	"sync"
)

// Set holds the stores a loop serves, by id: added and removed while the
// loop runs, iterated in id order. A store being removed leaves the set at
// once (no new work is taken from it) but is remembered until its removal
// ends, so that a second removal call finds it and waits again. The zero
// value is an empty set. It is safe for concurrent use.
type Set[M comparable] struct {
	mu       sync.Mutex
	byID     map[string]M
	ids      []string // sorted; replaced, never changed in place
	removing map[string]M
}

// Add adds m as id and reports true, or false when id is present.
func (s *Set[M]) Add(id string, m M) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; ok {
		return false
	}
	if s.byID == nil {
		s.byID = map[string]M{}
	}
	s.byID[id] = m
	ids := append(slices.Clone(s.ids), id) // a new array: readers keep the old one
	sort.Strings(ids)
	s.ids = ids
	return true
}

// Get returns the store id.
func (s *Set[M]) Get(id string) (M, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byID[id]
	return m, ok
}

// Find returns the first store, in id order, for which match is true.
func (s *Set[M]) Find(match func(M) bool) (string, M, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.ids {
		if m := s.byID[id]; match(m) {
			return id, m, true
		}
	}
	var zero M
	return "", zero, false
}

// IDs returns the ids, sorted. The slice is shared: never modify it.
func (s *Set[M]) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids
}

// Members returns the stores in id order.
func (s *Set[M]) Members() []M {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]M, 0, len(s.ids))
	for _, id := range s.ids {
		out = append(out, s.byID[id])
	}
	return out
}

// Next picks the store of the next cycle with r, among the current ids
// (also returned). m is the zero M when the set is empty. The caller
// serializes its calls (r is not safe for concurrent use).
func (s *Set[M]) Next(r *Rotation) (id string, m M, ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids = s.ids
	id = r.Next(ids)
	return id, s.byID[id], ids
}

// Take starts the removal of id: the store leaves the set and is
// remembered as being removed. A store whose removal began already is
// returned again. ok is false for an unknown id.
func (s *Set[M]) Take(id string) (m M, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok = s.byID[id]; ok {
		delete(s.byID, id)
		i := sort.SearchStrings(s.ids, id)
		s.ids = append(s.ids[:i:i], s.ids[i+1:]...)
		if s.removing == nil {
			s.removing = map[string]M{}
		}
		s.removing[id] = m
		return m, true
	}
	m, ok = s.removing[id]
	return m, ok
}

// Forget ends the removal of m as id.
func (s *Set[M]) Forget(id string, m M) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removing[id] == m {
		delete(s.removing, id)
	}
}
