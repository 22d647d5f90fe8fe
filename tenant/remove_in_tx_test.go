package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/tenant"
)

// Removing a database from inside one of its own transactions (the
// context of its InTx, or of a transaction adopted with Adopt) returns
// an error wrapping tenant.ErrRemoveInTx at once and leaves the database
// in the set, open and served: the transaction commits and its event is
// delivered. (Before, the removal waited for the InTx calls under way,
// that is for its caller, until DrainTimeout or ctx ended, then took the
// database out under the open transaction.)
func TestRemoveOwnDatabaseFromItsTransaction(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	o, del := newOutbox(t, tenant.Config{Databases: dbs, DrainTimeout: time.Hour})
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		how string
		run func(ctx context.Context, fn func(ctx context.Context) error) error
	}
	adopted := func(ctx context.Context, fn func(ctx context.Context) error) error {
		sqlTx, err := tn.DB().BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		ctx, tx := tn.AdoptX(ctx, sqlTx)
		if err := fn(ctx); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
	for _, a := range []attempt{{"InTx", tn.InTx}, {"Adopt", adopted}} {
		env, err := core.NewEvent("OrderPlaced").TenantID("s1").PayloadJSONString(`{"n":1}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		var (
			res    tenant.RefreshResult
			remErr error
		)
		err = a.run(context.Background(), func(ctx context.Context) error {
			if _, err := tn.Publish(ctx, env); err != nil {
				return err
			}
			// Bounded, so that the old behaviour fails the test instead
			// of waiting for DrainTimeout.
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			res, remErr = o.SetDatabases(rctx, dbs[1:])
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", a.how, err)
		}
		if !errors.Is(remErr, tenant.ErrRemoveInTx) || len(res.Removed) != 0 {
			t.Fatalf("%s: SetDatabases from inside the database's own transaction = %+v, %v; want nothing removed and tenant.ErrRemoveInTx", a.how, res, remErr)
		}
		if _, err := o.For("s1"); err != nil {
			t.Fatalf("%s: the database left the set: %v", a.how, err)
		}
		waitFor(t, a.how+": the event delivered", func() bool { return del.count("s1", env.ID()) == 1 })
	}
	// From another goroutine's context the removal goes through.
	res, err := o.SetDatabases(context.Background(), dbs[1:])
	if err != nil || len(res.Removed) != 1 {
		t.Fatalf("SetDatabases outside the transaction = %+v, %v; want s1 removed", res, err)
	}
}
