package poller_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/poller"
)

// dueStore is a memstore that answers FirstDue with what the test sets.
type dueStore struct {
	*memstore.Store
	mu    sync.Mutex
	due   time.Time
	err   error
	reads int
}

func (s *dueStore) FirstDue(context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.due, s.err
}

func (s *dueStore) set(due time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due, s.err = due, err
}

// Once the claims leave out the rows this node holds and find none due,
// the lag is the store's first due time's age: read at most every 10
// Intervals, ageing from the last read between two reads, and a failed
// read leaves the gauge as it was.
func TestLagProbeOfHeldRows(t *testing.T) {
	e := newPollEnv(100)
	q := newRoomQueue(100)
	st := &dueStore{Store: e.st}
	t0 := e.clock.Now()
	insert(t, e.st, "a")
	e.clock.Advance(time.Second)
	p, err := poller.NewWithQueue(st, q, poller.Config{Now: e.clock.Now, Logger: e.logs.Logger(), Metrics: e.metrics, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lag := func() time.Duration { return time.Duration(e.metrics.LastLag.Load()) }
	if res := pollOnce(t, p); res.Enqueued != 1 || lag() != time.Second {
		t.Fatalf("first poll = %+v, lag %v; want a enqueued, lag 1s", res, lag())
	}
	// a is held now (its lease of a minute running): the next claims
	// leave it out.
	st.set(time.Time{}, errors.New("statement timeout"))
	e.clock.Advance(30 * time.Second)
	if res := pollOnce(t, p); res.Read != 0 {
		t.Fatalf("poll = %+v, want nothing read (a is held here)", res)
	}
	if lag() != time.Second {
		t.Errorf("lag after a failed read = %v, want 1s, the gauge as it was", lag())
	}
	st.set(t0, nil)
	pollOnce(t, p)
	if want := 31 * time.Second; lag() != want {
		t.Errorf("lag = %v, want %v (a, due at t0, waits in this node's queue)", lag(), want)
	}
	// Within 10 Intervals no new read: the age grows from the last one.
	st.set(t0.Add(30*time.Second), nil)
	e.clock.Advance(time.Second)
	pollOnce(t, p)
	if want := 32 * time.Second; lag() != want {
		t.Errorf("lag a second later = %v, want %v, the last read aged", lag(), want)
	}
	e.clock.Advance(10 * time.Second)
	pollOnce(t, p)
	if want := 12 * time.Second; lag() != want {
		t.Errorf("lag after 10 Intervals = %v, want %v, from a new read", lag(), want)
	}
	if st.reads != 3 {
		t.Errorf("%d reads of the first due time, want 3 (failed, read, read after 10 Intervals)", st.reads)
	}
	// Nothing held: the claim's lag, not the store's.
	q.letGo("a")
	pollOnce(t, p)
	if st.reads != 3 {
		t.Errorf("the first due time was read with nothing held (%d reads)", st.reads)
	}
}
