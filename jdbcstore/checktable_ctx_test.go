package jdbcstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
	pgdialect "github.com/outbox-go/outbox/jdbcstore/postgres"
)

// A CheckTable whose read ends with its ctx (here: waiting for a table
// another session locked) says so: on MySQL/MariaDB the driver closes the
// connection at the deadline, and the second probe CheckTable ran then
// returned "driver: bad connection" instead, so errors.Is(err,
// context.DeadlineExceeded) failed and outboxctl gave no "--timeout ran
// out" hint (an audit).
func TestCheckTableEndsWithItsContext(t *testing.T) {
	for name, tc := range map[string]struct {
		open func(t *testing.T) *jdbcstore.Store
		lock string // %s: the quoted table
	}{
		"mysql": {func(t *testing.T) *jdbcstore.Store {
			st, _ := storeWithSchema(t, testdb.MySQL(t), mysqldialect.Dialect)
			return st
		}, "LOCK TABLES %s WRITE"},
		"postgres": {func(t *testing.T) *jdbcstore.Store {
			st, _ := storeWithSchema(t, testdb.Postgres(t), pgdialect.Dialect)
			return st
		}, "LOCK TABLE %s IN ACCESS EXCLUSIVE MODE"},
	} {
		t.Run(name, func(t *testing.T) {
			st := tc.open(t)
			ctx := t.Context()
			holder, err := st.DB().BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Rollback() })
			if _, err := holder.ExecContext(ctx, fmt.Sprintf(tc.lock, st.Dialect().QuoteIdent(st.Table()))); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if err := st.CheckTable(cctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("CheckTable on a locked table past its deadline = %v, want an error matching context.DeadlineExceeded", err)
			}
		})
	}
}
