package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/tenant"
)

// A database removed from the set while a transaction begun with InTx is
// open stays open until that transaction ends (within DrainTimeout): the
// dispatcher releases the lease of an event committed after the store's
// removal began through the database's pool, which the set closed right
// away, so the event stayed leased to this node ("release leases: sql:
// database is closed") and the database's next owner waited the whole
// Lease (2 min) for it.
func TestRemovalWaitsForAnOpenInTx(t *testing.T) {
	dbs := withOrders(t, serverDatabases(t, 1, "p", "pgx", testdb.PostgresSchemaDSN))
	o, _ := newOutbox(t, tenant.Config{Databases: dbs, DrainTimeout: time.Minute})
	tn, err := o.For("p1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env, err := core.NewEvent("Late").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	err = tn.InTx(ctx, func(ctx context.Context) error {
		if _, err := tn.Publish(ctx, env); err != nil {
			return err
		}
		go func() {
			_, err := o.SetDatabases(context.Background(), nil)
			removed <- err
		}()
		waitFor(t, "the database to leave the routing", func() bool {
			_, err := o.For("p1")
			return errors.Is(err, tenant.ErrUnknownKey)
		})
		// Before, the pool was closed within milliseconds, this
		// transaction still open; now the removal waits for it (and
		// refuses new InTx calls meanwhile).
		waitFor(t, "the removal to wait for the InTx calls under way", func() bool {
			return errors.Is(tn.InTx(context.Background(), func(context.Context) error { return nil }), tenant.ErrUnknownKey)
		})
		if err := tn.DB().PingContext(ctx); err != nil {
			t.Logf("the pool was closed with the transaction open: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	select {
	case err := <-removed:
		if err != nil {
			t.Fatalf("SetDatabases: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the removal did not end after the transaction did")
	}
	st, err := jdbcstore.New(openAgain(t, dbs[0]), jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.LockedBy != "" {
		t.Errorf("event committed during the removal: %v, leased to %q; want it finished before the removal, or released for the next owner", r.Status, r.LockedBy)
	}
}
