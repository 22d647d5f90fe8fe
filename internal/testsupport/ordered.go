package testsupport

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// OrderedStore is a store that inserts ordered events on a transaction of
// its database (jdbcstore.Store).
type OrderedStore interface {
	DB() *sqlx.DB
	InsertOrdered(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease) (bool, error)
}

// InsertOrdered inserts the ordered event env with lease in a transaction
// of its own and commits it, failing t on any error.
func InsertOrdered(t testing.TB, st OrderedStore, env core.Envelope, lease core.Lease) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertOrdered(ctx, tx, env, lease); err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert ordered %s: %v", env.ID(), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
