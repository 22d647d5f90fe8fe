package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func TestFiguresAreDueAfterMaxAgeAndTheirReadTimesDuty(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		took   time.Duration
		maxAge time.Duration
		since  time.Duration
		want   bool
	}{
		{"fast read, within max age", time.Millisecond, 5 * time.Second, 4 * time.Second, false},
		{"fast read, past max age", time.Millisecond, 5 * time.Second, 5*time.Second + 1, true},
		{"slow read, past max age but not its duty", 200 * time.Millisecond, 5 * time.Second, 9 * time.Second, false},
		{"slow read, past its duty", 200 * time.Millisecond, 5 * time.Second, 10*time.Second + 1, true},
		{"zero max age, fast read", 0, 0, 1, true},
		{"zero max age, slow read", time.Second, 0, 49 * time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := overviewData{ReadAt: at, Took: c.took}
			if got := due(at.Add(c.since), d, c.maxAge); got != c.want {
				t.Errorf("due after %v (read took %v, max age %v) = %v, want %v", c.since, c.took, c.maxAge, got, c.want)
			}
		})
	}
}

// stepStore holds each StatsWith call until the test answers it, through
// the channel the call hands over on entering, with its DEAD count; the
// other calls answer at once with nothing.
type stepStore struct {
	Store   // nil: only the methods below are called
	entered chan chan int
}

func (s *stepStore) StatsWith(ctx context.Context, _ jdbcstore.StatsOptions) (jdbcstore.Stats, error) {
	answer := make(chan int)
	select {
	case s.entered <- answer:
	case <-ctx.Done():
		return jdbcstore.Stats{}, ctx.Err()
	}
	select {
	case n := <-answer:
		return jdbcstore.Stats{Counts: map[core.Status]int{core.StatusDead: int(n)}}, nil
	case <-ctx.Done():
		return jdbcstore.Stats{}, ctx.Err()
	}
}

func (s *stepStore) Activity(context.Context, int, time.Duration) ([]jdbcstore.ActivityBucket, error) {
	return nil, nil
}

func TestAReadStartedBeforeAMutationIsNotCached(t *testing.T) {
	st := &stepStore{entered: make(chan chan int)}
	src := &source{name: "db", store: st, timeout: time.Minute}
	ctx := t.Context()
	wait := func(what string) chan int {
		t.Helper()
		select {
		case answer := <-st.entered:
			return answer
		case <-time.After(time.Minute):
			t.Fatalf("%s never reached the store", what)
			return nil
		}
	}
	type answer struct {
		d   overviewData
		err error
	}
	first := make(chan answer, 1)
	go func() {
		d, err := src.overview(ctx, time.Now, time.Hour)
		first <- answer{d, err}
	}()
	before := wait("the first read")
	// A replay commits while the first read is under way: it started
	// another read at once.
	src.invalidate(ctx, time.Now)
	after := wait("the read after the mutation")
	before <- 1 // the first read saw the table before the replay
	if a := <-first; a.err != nil || a.d.Stats.Counts[core.StatusDead] != 1 {
		t.Fatalf("first load = %v, %v; want the first read's figures", a.d.Stats.Counts, a.err)
	}
	src.mu.Lock()
	cached := src.cachedOK
	src.mu.Unlock()
	if cached {
		t.Fatal("the figures read before the mutation were cached")
	}
	second := make(chan answer, 1)
	go func() {
		d, err := src.overview(ctx, time.Now, time.Hour)
		second <- answer{d, err}
	}()
	after <- 2
	a := <-second
	if a.err != nil || a.d.Stats.Counts[core.StatusDead] != 2 {
		t.Fatalf("load after the mutation = %v, %v; want the figures read after it (DEAD 2)", a.d.Stats.Counts, a.err)
	}
	d, err := src.overview(ctx, time.Now, time.Hour)
	if err != nil || d.Stats.Counts[core.StatusDead] != 2 {
		t.Fatalf("cached figures = %v, %v; want DEAD 2", d.Stats.Counts, err)
	}
}
