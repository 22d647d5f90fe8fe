package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/tenant"
)

// One inbox per tenant database, one dispatcher for all of them: webhooks
// are enqueued into their tenant's database through the router, and the
// shared handler learns each message's tenant from inbox.StoreID.
func ExampleInbox() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "tenant-inbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ib, err := tenant.NewInbox(ctx, tenant.InboxConfig{
		Databases: []tenant.Database{
			{ID: "acme", Driver: "sqlite3", DSN: filepath.Join(dir, "acme.db")},
			{ID: "globex", Driver: "sqlite3", DSN: filepath.Join(dir, "globex.db")},
		},
		Dispatcher: inbox.DispatcherConfig{Selector: core.DrainFirst{}},
	})
	if err != nil {
		panic(err)
	}
	handled := make(chan string, 3)
	err = ib.HandleFunc("payment.received", func(ctx context.Context, msg inbox.Record) error {
		handled <- fmt.Sprintf("%s: %s/%s %s", inbox.StoreID(ctx), msg.Source, msg.MessageID, msg.Payload)
		return nil
	})
	if err != nil {
		panic(err)
	}
	if err := ib.Start(ctx); err != nil {
		panic(err)
	}

	webhooks := []struct{ tenant, id, payload string }{
		{"acme", "evt_1", `{"amount":100}`},
		{"globex", "evt_1", `{"amount":250}`}, // same id, other tenant: another message
		{"acme", "evt_2", `{"amount":75}`},
	}
	for _, w := range webhooks {
		in, err := ib.For(w.tenant)
		if err != nil {
			panic(err)
		}
		msg := inbox.Message{Source: "psp", MessageID: w.id, Topic: "payment.received", Payload: []byte(w.payload)}
		if err := in.Enqueue(ctx, msg); err != nil {
			panic(err)
		}
	}
	var lines []string
	for range webhooks {
		lines = append(lines, <-handled)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}

	_, err = ib.For("initech")
	var unknown *tenant.UnknownKeyError
	fmt.Println(errors.Is(err, tenant.ErrUnknownKey), errors.As(err, &unknown), unknown.Key)

	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ib.Close(closeCtx); err != nil {
		panic(err)
	}
	// Output:
	// acme: psp/evt_1 {"amount":100}
	// acme: psp/evt_2 {"amount":75}
	// globex: psp/evt_1 {"amount":250}
	// true true initech
}
