package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/retry"
)

// orderedDatabases opens a fresh database of each kind.
var orderedDatabases = map[string]func(t *testing.T) *sqlx.DB{
	"sqlite":   func(t *testing.T) *sqlx.DB { return sqliteDB(t, "ordered.db") },
	"mysql":    func(t *testing.T) *sqlx.DB { return testdb.MySQL(t) },
	"postgres": func(t *testing.T) *sqlx.DB { return testdb.Postgres(t) },
}

// seen records, per aggregate, the sequence numbers a listener saw, and
// per event the deliveries.
type seen struct {
	mu    sync.Mutex
	order map[string][]int
	got   chan struct{}
}

func newSeen() *seen { return &seen{order: map[string][]int{}, got: make(chan struct{}, 1)} }

func (s *seen) listener(fail func(env core.Envelope, seq int) error) core.ListenerFunc {
	return func(_ context.Context, env core.Envelope) error {
		v, _ := env.Header("seq")
		seq, _ := strconv.Atoi(v)
		if fail != nil {
			if err := fail(env, seq); err != nil {
				return err
			}
		}
		s.mu.Lock()
		s.order[env.AggregateID()] = append(s.order[env.AggregateID()], seq)
		s.mu.Unlock()
		select {
		case s.got <- struct{}{}:
		default:
		}
		return nil
	}
}

func (s *seen) count(agg string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order[agg])
}

func (s *seen) of(agg string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order[agg])
}

// publishSeq publishes the event seq of aggregate agg in a transaction of
// its own.
func publishSeq(t *testing.T, ob *outbox.Outbox, agg string, seq int) {
	t.Helper()
	err := ob.InTx(t.Context(), func(ctx context.Context) error {
		env, err := outbox.NewEvent("Changed").AggregateType("Account").AggregateID(agg).
			Header("seq", strconv.Itoa(seq)).PayloadJSONString(`{}`).Build()
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		t.Fatalf("publish %s/%d: %v", agg, seq, err)
	}
}

// logPending logs, when t failed, the rows still pending and the lease on
// each: what a stalled key waits for.
func logPending(t *testing.T, db *sqlx.DB) {
	if !t.Failed() {
		return
	}
	rows, err := db.Queryx("SELECT event_id, order_key, order_seq, status, COALESCE(locked_by, '') FROM outbox_event" +
		" WHERE status IN (0, 2) ORDER BY order_key, order_seq")
	if err != nil {
		t.Logf("pending rows: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id, key, owner string
		var seq int64
		var status int
		if err := rows.Scan(&id, &key, &seq, &status, &owner); err != nil {
			t.Logf("pending rows: %v", err)
			return
		}
		t.Logf("pending: %s key %s position %d status %d owner %q", id, key, seq, status, owner)
	}
}

// Events of one aggregate published in sequential transactions reach the
// listener in commit order, with several workers, a failing event holding
// its key (retried in process) and other keys going on meanwhile.
func TestOrderedDeliveryPerAggregate(t *testing.T) {
	for name, open := range orderedDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			s := newSeen()
			var failOnce sync.Once
			ob, err := outbox.New(t.Context(), db, outbox.Config{
				Logger:     quietLogger(),
				Ordering:   core.Ordering{Types: []string{"Changed"}},
				Dispatcher: dispatcher.Config{Workers: 4, Retry: retry.PolicyFunc(func(int) time.Duration { return 20 * time.Millisecond })},
				Poller:     poller.Config{Interval: time.Hour, BacklogInterval: time.Hour},
			})
			if err != nil {
				t.Fatal(err)
			}
			ob.RegisterFunc("Changed", s.listener(func(env core.Envelope, seq int) error {
				var err error
				if env.AggregateID() == "a" && seq == 10 {
					failOnce.Do(func() { err = fmt.Errorf("first attempt of a/10 fails") })
				}
				return err
			}))
			if err := ob.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ob.Close(context.Background()) })
			t.Cleanup(func() { logPending(t, db) })
			const n = 60
			for i := 1; i <= n; i++ {
				publishSeq(t, ob, "a", i)
				publishSeq(t, ob, "b", i)
			}
			testsupport.WaitFor(t, 30*time.Second, "every event delivered", func() bool { return s.count("a") >= n && s.count("b") >= n }, s.got)
			for _, agg := range []string{"a", "b"} {
				got := s.of(agg)
				want := make([]int, n)
				for i := range want {
					want[i] = i + 1
				}
				if !slices.Equal(got, want) {
					t.Errorf("aggregate %s delivered in order %v, want 1..%d", agg, got, n)
				}
			}
		})
	}
}

// An ordered backlog (here published on plain transactions, unowned, as a
// node that is gone leaves it) drains in order: the poll at Start claims
// the head of each key, and each event finished has the next of its key
// claimed by its position, with the polls an hour apart.
func TestOrderedBacklogDrainsInOrder(t *testing.T) {
	for name, open := range orderedDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			s := newSeen()
			ob, err := outbox.New(t.Context(), db, outbox.Config{
				Logger:     quietLogger(),
				Ordering:   core.Ordering{Types: []string{"Changed"}},
				Dispatcher: dispatcher.Config{Workers: 4},
				Poller:     poller.Config{Interval: time.Hour, BacklogInterval: time.Hour, SkipRecent: time.Nanosecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			ob.RegisterFunc("Changed", s.listener(nil))
			t.Cleanup(func() { _ = ob.Close(context.Background()) })
			t.Cleanup(func() { logPending(t, db) })
			const n = 40
			keys := []string{"a", "b", "c"}
			for i := 1; i <= n; i++ {
				for _, agg := range keys {
					tx, err := db.BeginTxx(t.Context(), nil)
					if err != nil {
						t.Fatal(err)
					}
					env, err := outbox.NewEvent("Changed").AggregateType("Account").AggregateID(agg).
						Header("seq", strconv.Itoa(i)).PayloadJSONString(`{}`).Build()
					if err != nil {
						t.Fatal(err)
					}
					if _, err := ob.PublishTx(t.Context(), tx, env); err != nil {
						t.Fatalf("PublishTx %s/%d: %v", agg, i, err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := ob.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 30*time.Second, "the backlog delivered", func() bool {
				for _, agg := range keys {
					if s.count(agg) < n {
						return false
					}
				}
				return true
			}, s.got)
			want := make([]int, n)
			for i := range want {
				want[i] = i + 1
			}
			for _, agg := range keys {
				if got := s.of(agg); !slices.Equal(got, want) {
					t.Errorf("aggregate %s delivered in order %v, want 1..%d", agg, got, n)
				}
			}
		})
	}
}

// A delayed event of a key behind a pending one arrives once it is due,
// not at the next poll: when the event before it finished, the claim of
// the next event by position found it not due yet and the poller asked
// for it again only with its next full claim (up to Poller.Interval
// late, an hour here).
func TestDelayedEventBehindAPendingOneArrivesWhenDue(t *testing.T) {
	for name, open := range orderedDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			s := newSeen()
			ob, err := outbox.New(t.Context(), db, outbox.Config{
				Logger:   quietLogger(),
				Ordering: core.Ordering{Types: []string{"Changed"}},
				Poller:   poller.Config{Interval: time.Hour, BacklogInterval: time.Hour},
			})
			if err != nil {
				t.Fatal(err)
			}
			ob.RegisterFunc("Changed", s.listener(nil))
			startUntilCleanup(t, ob)
			t.Cleanup(func() { logPending(t, db) })
			const delay = 300 * time.Millisecond
			var due time.Time
			err = ob.InTx(t.Context(), func(ctx context.Context) error {
				for seq, d := range []time.Duration{0, delay} {
					env, err := outbox.NewEvent("Changed").AggregateType("Account").AggregateID("a").
						Header("seq", strconv.Itoa(seq+1)).Delay(d).PayloadJSONString(`{}`).Build()
					if err != nil {
						return err
					}
					if _, err := ob.Publish(ctx, env); err != nil {
						return err
					}
					due = env.NotBefore()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			testsupport.WaitFor(t, 20*time.Second, "both events delivered", func() bool { return s.count("a") >= 2 }, s.got)
			if now := time.Now(); now.Before(due) {
				t.Errorf("the delayed event arrived %v before it was due", due.Sub(now))
			}
			if got := s.of("a"); !slices.Equal(got, []int{1, 2}) {
				t.Errorf("delivered in order %v, want [1 2]", got)
			}
		})
	}
}
