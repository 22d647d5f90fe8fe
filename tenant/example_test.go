package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/outbox-go/outbox/core"
	// Registers the SQLite dialect for the driver "sqlite3".
	_ "github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/tenant"
	"github.com/outbox-go/outbox/txctx"
)

// One outbox over a database per tenant: publish through the router into
// the tenant's own database; one dispatcher delivers every tenant's
// events.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-tenants-")
	defer os.RemoveAll(dir)

	var dbs []tenant.Database
	for _, id := range []string{"acme", "globex"} {
		dbs = append(dbs, tenant.Database{ID: id, Driver: "sqlite3", DSN: filepath.Join(dir, id+".db")})
	}
	o, err := tenant.New(ctx, tenant.Config{
		Databases: dbs, // or Discover: func(ctx) ([]tenant.Database, error) {…}, refreshed every 5 min
		Poller:    poller.Config{Selector: core.RoundRobin{}},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	delivered := make(chan string, 2)
	o.RegisterFunc("InvoiceIssued", func(ctx context.Context, e core.Envelope) error {
		delivered <- e.TenantID() + ": " + e.PayloadString()
		return nil
	})
	if err := o.Start(ctx); err != nil {
		panic(err)
	}
	defer o.Close(ctx)

	for _, id := range []string{"acme", "globex"} {
		t, err := o.For(id) // the router: the tenant's database, store and publisher
		if err != nil {
			panic(err)
		}
		err = t.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx) // the business writes go here, in the tenant's database
			_ = tx
			env, err := core.NewEvent("InvoiceIssued").TenantID(id).PayloadJSONString(`{"total":42}`).Build()
			if err != nil {
				return err
			}
			_, err = t.Publish(ctx, env)
			return err
		})
		if err != nil {
			panic(err)
		}
	}
	got := []string{<-delivered, <-delivered}
	sort.Strings(got)
	fmt.Println(got[0])
	fmt.Println(got[1])

	_, err = o.For("initech")
	fmt.Println(errors.Is(err, tenant.ErrUnknownKey), err)
	// Output:
	// acme: {"total":42}
	// globex: {"total":42}
	// true outbox: no database for routing key "initech"
}
