package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
)

// A tenant publishes a batch into its own database only; every event is
// delivered, a rollback leaves nothing, and a plain transaction's batch
// goes through PublishAllTx.
func TestTenantPublishAll(t *testing.T) {
	dbs := sqliteDatabases(t, 2)
	o, del := newOutbox(t, tenant.Config{Databases: dbs,
		Poller: poller.Config{Interval: 5 * time.Millisecond, SkipRecent: -1}}) // the plain transaction's events
	tn, err := o.For("s1")
	if err != nil {
		t.Fatal(err)
	}
	events := func(n int) []core.Envelope {
		envs := make([]core.Envelope, n)
		for i := range envs {
			env, err := core.NewEvent("OrderPlaced").TenantID("s1").PayloadJSONString(`{}`).Build()
			if err != nil {
				t.Fatal(err)
			}
			envs[i] = env
		}
		return envs
	}
	ctx := context.Background()
	envs := events(3)
	err = tn.InTx(ctx, func(ctx context.Context) error {
		ids, err := tn.PublishAll(ctx, envs...)
		if err == nil && len(ids) != len(envs) {
			t.Errorf("ids = %q", ids)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	plain := events(2)
	tx, err := tn.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tn.PublishAllTx(ctx, tx, plain...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, env := range append(envs, plain...) {
		waitFor(t, "delivery of "+env.ID(), func() bool { return del.count("s1", env.ID()) == 1 })
	}
	boom := errors.New("boom")
	rolled := events(2)
	err = tn.InTx(ctx, func(ctx context.Context) error {
		if _, err := tn.PublishAll(ctx, rolled...); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want the business error", err)
	}
	rows := readRows(t, openAgain(t, dbs[0]))
	if len(rows) != 5 {
		t.Errorf("s1 holds %d rows, want 5", len(rows))
	}
	if rows := readRows(t, openAgain(t, dbs[1])); len(rows) != 0 {
		t.Errorf("s2 holds %d rows, want none", len(rows))
	}
	if _, err := tn.PublishAll(ctx, events(1)...); !errors.Is(err, core.ErrNoTransaction) {
		t.Errorf("PublishAll without a transaction = %v, want ErrNoTransaction", err)
	}
}
