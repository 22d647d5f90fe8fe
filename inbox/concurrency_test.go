package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/outbox-go/outbox/inbox"
)

// testConcurrentRedelivery: concurrent deliveries of one message,
// each in its own business transaction that increments a counter through
// ProcessTx, have the effect exactly once.
//
//   - same message: 8 goroutines deliver one message 100 times each, all
//     starting together: the counter ends at 1;
//   - fresh messages: 100 rounds, each a new message delivered by 8
//     goroutines released at once (the race on the first insert): exactly
//     one delivery per round processes it, the counter ends at 100.
//
// A delivery that meets lock contention (ErrContention) rolls back and is
// delivered again, as a consumer would.
func testConcurrentRedelivery(t *testing.T, open opener) {
	const goroutines, deliveries = 8, 100
	e := newEnv(t, open, inbox.Config{})
	if _, err := e.db.ExecContext(e.ctx, `CREATE TABLE counters (id INTEGER NOT NULL PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(e.ctx, `INSERT INTO counters (id, n) VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	var contention atomic.Int64
	// deliver runs one delivery of message id, counting into counter row c.
	deliver := func(id string, c int) (bool, error) {
		for {
			tx, err := e.db.BeginTxx(e.ctx, nil)
			if err != nil {
				return false, err
			}
			processed, err := e.in.ProcessTx(e.ctx, tx, inbox.Message{Source: "orders", MessageID: id, Topic: "order.paid"},
				func(ctx context.Context) error {
					_, err := tx.ExecContext(ctx, e.db.Rebind(`UPDATE counters SET n = n + 1 WHERE id = ?`), c)
					return err
				})
			if err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
			if e.in.IsContention(err) {
				contention.Add(1)
				continue
			}
			return processed, err
		}
	}
	counter := func(c int) int {
		var n int
		if err := e.db.QueryRowContext(e.ctx, e.db.Rebind(`SELECT n FROM counters WHERE id = ?`), c).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// race releases goroutines at once, each calling fn times times, and
	// returns how many calls processed the message.
	race := func(times int, fn func() (bool, error)) int {
		var (
			wg        sync.WaitGroup
			processed atomic.Int64
			start     = make(chan struct{})
		)
		for range goroutines {
			wg.Go(func() {
				<-start
				for range times {
					p, err := fn()
					if err != nil {
						t.Error(err)
						return
					}
					if p {
						processed.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		return int(processed.Load())
	}

	if n := race(deliveries, func() (bool, error) { return deliver("same", 1) }); n != 1 {
		t.Fatalf("same message: %d deliveries processed it, want 1", n)
	}
	mustEqual(t, "same message: counter", counter(1), 1)
	mustEqual(t, "same message: status", e.get("orders", "same").Status, inbox.StatusDone)

	for round := range deliveries {
		id := fmt.Sprintf("fresh-%03d", round)
		if n := race(1, func() (bool, error) { return deliver(id, 2) }); n != 1 {
			t.Fatalf("round %d: %d deliveries processed the message, want 1", round, n)
		}
	}
	mustEqual(t, "fresh messages: counter", counter(2), deliveries)
	if n := contention.Load(); n > 0 {
		t.Logf("%d deliveries met lock contention and were repeated", n)
	}
}
