package publish_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/publish"
)

// silentInserter is a store whose database may roll back silently.
type silentInserter struct{ fakeInserter }

func (*silentInserter) SilentRollback() bool { return true }

// checkingTx is a fakeTx that can run checks before commit and queries.
type checkingTx struct {
	*fakeTx
	checks int
}

func (tx *checkingTx) BeforeCommit(any, func(context.Context) error) { tx.checks++ }
func (tx *checkingTx) QueryRowContext(context.Context, string, ...any) *sql.Row {
	return nil
}

// On a database that may roll back silently, a transaction that cannot
// check before commit must not hand its events to the hot path: they are
// inserted unowned and the poller delivers them once committed.
func TestPublishSilentRollbackNeedsACommitChecker(t *testing.T) {
	env := mustBuild(t, core.NewEvent("E").PayloadJSONString(`{}`))
	for name, tc := range map[string]struct {
		tx      core.Tx
		wantHot bool
	}{
		"plain tx":    {newFakeTx(), false},
		"checking tx": {&checkingTx{fakeTx: newFakeTx()}, true},
	} {
		t.Run(name, func(t *testing.T) {
			hot := &fakeHotQueue{}
			ins := &silentInserter{}
			c, err := publish.New(ins, hot)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.PublishTx(context.Background(), tc.tx, env); err != nil {
				t.Fatal(err)
			}
			var fake *fakeTx
			switch tx := tc.tx.(type) {
			case *fakeTx:
				fake = tx
			case *checkingTx:
				fake = tx.fakeTx
			}
			if got := fake.CommitHooks() == 1; got != tc.wantHot {
				t.Fatalf("after-commit hook registered = %v, want %v", got, tc.wantHot)
			}
			if got := !ins.leases[0].IsZero(); got != tc.wantHot {
				t.Fatalf("inserted with a hot lease = %v, want %v", got, tc.wantHot)
			}
		})
	}
}
