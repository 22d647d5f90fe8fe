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

// InTx on a database leaving the set (its removal under way, waiting for
// the InTx calls begun before) runs nothing and returns an error wrapping
// ErrUnknownKey; after Close, also core.ErrClosed. (Before, it ran: its
// events were committed leased to this node, which no longer delivered
// them, and once the pool was closed their leases could not be released:
// the database's next owner waited the whole Lease.) The call begun
// before the removal finishes, and its event is delivered.
func TestInTxRefusedOnADatabaseLeavingTheSet(t *testing.T) {
	dbs := withOrders(t, sqliteDatabases(t, 2))
	o, del := newOutbox(t, tenant.Config{Databases: dbs, DrainTimeout: time.Minute})
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("OrderPlaced").TenantID("s1").PayloadJSONString(`{"n":1}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	inTx, release, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		first <- tn.InTx(context.Background(), func(ctx context.Context) error {
			if _, err := tn.Publish(ctx, env); err != nil {
				return err
			}
			close(inTx)
			<-release
			return nil
		})
	}()
	<-inTx
	removed := make(chan error, 1)
	go func() {
		_, err := o.SetDatabases(context.Background(), dbs[1:])
		removed <- err
	}()
	noop := func(context.Context) error { return nil }
	waitFor(t, "InTx refused once the removal began", func() bool {
		return errors.Is(tn.InTx(context.Background(), noop), tenant.ErrUnknownKey)
	})
	ran := false
	err = tn.InTx(context.Background(), func(context.Context) error { ran = true; return nil })
	if ran || !errors.Is(err, tenant.ErrUnknownKey) || errors.Is(err, core.ErrClosed) {
		t.Fatalf("InTx during the removal: ran %v, %v; want not run, ErrUnknownKey (not ErrClosed)", ran, err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the InTx begun before the removal: %v", err)
	}
	if err := <-removed; err != nil {
		t.Fatalf("SetDatabases: %v", err)
	}
	if n := del.count("s1", env.ID()); n != 1 {
		t.Errorf("the event of the InTx begun before the removal was delivered %d times, want 1", n)
	}

	tn2, err := o.For("s2")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = tn2.InTx(context.Background(), func(context.Context) error { ran = true; return nil })
	if ran || !errors.Is(err, tenant.ErrUnknownKey) || !errors.Is(err, core.ErrClosed) {
		t.Fatalf("InTx after Close: ran %v, %v; want not run, ErrUnknownKey and core.ErrClosed", ran, err)
	}
}

// Close waits (within its ctx) for the InTx calls under way, so that their
// events are delivered or released before the databases close. (Before,
// on PostgreSQL, an event committed by an InTx open across Close stayed
// leased to the closed node for the whole Lease: its release ran through
// a pool already closed.)
func TestCloseWaitsForTheOpenInTx(t *testing.T) {
	dbs := withOrders(t, serverDatabases(t, 1, "p", "pgx", testdb.PostgresSchemaDSN))
	o, _ := newOutbox(t, tenant.Config{Databases: dbs})
	tn, err := o.For("p1")
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("OrderPlaced").TenantID("p1").PayloadJSONString(`{"n":1}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	err = tn.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := tn.Publish(ctx, env); err != nil {
			return err
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			closed <- o.Close(ctx)
		}()
		waitFor(t, "Close to refuse new InTx calls", func() bool {
			return errors.Is(tn.InTx(context.Background(), func(context.Context) error { return nil }), tenant.ErrUnknownKey)
		})
		return nil
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	st, err := jdbcstore.New(openAgain(t, dbs[0]), jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(context.Background(), env.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.LockedBy != "" {
		t.Errorf("event committed while Close waited: %v, leased to %q until %v; want delivered, or released for the next owner", r.Status, r.LockedBy, r.LockedUntil)
	}
}
