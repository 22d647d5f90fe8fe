package jdbcstore_test

import (
	"context"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

const testOwner = "jdbcstore-test-owner"

var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

func markDone(ctx context.Context, st *jdbcstore.Store, id string) (bool, error) {
	n, err := st.MarkDone(ctx, testOwner, []string{id})
	return n == 1, err
}
