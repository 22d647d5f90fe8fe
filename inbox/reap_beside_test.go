package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
)

// A handler writing through Process, as documented, keeps its
// transaction open (its message's row locked) while the dispatcher reaps
// every few milliseconds: another message is handled meanwhile. On
// MySQL/MariaDB the reap waited for that row lock (at REPEATABLE READ it
// locks every row it scans) and, run in the dispatcher's loop, held up
// every claim for as long as the transaction ran. (SQLite has one writer:
// there a claim waits for such a transaction anyway.)
func testSlowProcessDoesNotHoldUpClaims(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	// HandlerTimeout past waitTimeout: the slow transaction stays open
	// for the whole wait.
	d := e.dispatcher(inbox.DispatcherConfig{Owner: "w", Workers: 2, ReapInterval: 5 * time.Millisecond,
		PollInterval: 10 * time.Millisecond, HandlerTimeout: 2 * waitTimeout, Lease: 3 * waitTimeout})
	inTx, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	mustHandle(t, d, "slow", func(ctx context.Context, m inbox.Record) error {
		_, err := inbox.FromContext(ctx).Process(ctx, inbox.Message{Source: m.Source, MessageID: m.MessageID},
			func(context.Context, *sqlx.Tx) error {
				close(inTx)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			})
		return err
	})
	mustHandle(t, d, "fast", func(context.Context, inbox.Record) error { return nil })
	// The fast message's key sorts after the slow one's: on MySQL/MariaDB
	// the slow transaction's locks also hold up the acknowledgement of a
	// message whose key sorts before it (see README, "Receiving: the
	// inbox").
	e.enqueue(inbox.Message{Source: "s", MessageID: "a-slow", Topic: "slow"})
	e.start(d)
	select {
	case <-inTx:
	case <-time.After(waitTimeout):
		t.Fatal("the slow handler's transaction never began")
	}
	e.enqueue(inbox.Message{Source: "s", MessageID: "z-fast", Topic: "fast"})
	waitFor(t, "the fast message Done while the slow transaction is open", func() bool {
		return e.status("s", "z-fast") == inbox.StatusDone
	})
}

func TestSlowProcessDoesNotHoldUpClaimsMySQL(t *testing.T) {
	testdb.MySQLDSN(t)
	testSlowProcessDoesNotHoldUpClaims(t, openMySQL)
}

func TestSlowProcessDoesNotHoldUpClaimsPostgres(t *testing.T) {
	testdb.PostgresDSN(t)
	testSlowProcessDoesNotHoldUpClaims(t, openPostgres)
}
