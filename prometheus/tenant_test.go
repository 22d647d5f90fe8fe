package prometheus_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	_ "github.com/outbox-go/outbox/jdbcstore/sqlite" // the "sqlite3" dialect
	"github.com/outbox-go/outbox/poller"
	outboxprom "github.com/outbox-go/outbox/prometheus"
	"github.com/outbox-go/outbox/tenant"
)

// A tenant set reports each database's signals under its store label,
// through core.StoreMetrics and the Observer's store.
func TestTenantStores(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t, outboxprom.Config{})
	dir := t.TempDir()
	var dbs []tenant.Database
	for _, id := range []string{"acme", "globex"} {
		dbs = append(dbs, tenant.Database{ID: id, Driver: "sqlite3", DSN: filepath.Join(dir, id+".db")})
	}
	o, err := tenant.New(ctx, tenant.Config{
		Databases: dbs,
		Metrics:   col,
		Observer:  col,
		Poller:    poller.Config{Interval: 50 * time.Millisecond},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	o.RegisterFunc("InvoiceIssued", func(context.Context, core.Envelope) error { return nil })
	if err := o.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := o.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	for _, id := range []string{"acme", "globex"} {
		tn, err := o.For(id)
		if err != nil {
			t.Fatal(err)
		}
		if err := tn.InTx(ctx, func(ctx context.Context) error {
			env, err := core.NewEvent("InvoiceIssued").TenantID(id).PayloadJSONString(`{}`).Build()
			if err != nil {
				return err
			}
			_, err = tn.Publish(ctx, env)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	g := col.Gatherer()
	for _, id := range []string{"acme", "globex"} {
		testsupport.WaitFor(t, 30*time.Second, id+"'s delivery, DONE write and a claim counted", func() bool {
			return value(t, g, "outbox_deliveries_total", labels{"store": id, "event_type": "InvoiceIssued", "outcome": "done"}) == 1 &&
				value(t, g, "outbox_done_write_seconds", labels{"store": id}) >= 1 &&
				value(t, g, "outbox_claim_seconds", labels{"store": id}) >= 1
		})
		wantValue(t, g, "outbox_enqueued_total", labels{"store": id, "queue": "hot"}, 1)
	}
	// Nothing of theirs went to the collector's own store.
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "", "queue": "hot"}, 0)
	wantValue(t, g, "outbox_published_total", labels{"event_type": "InvoiceIssued"}, 2)
}
