package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// The transactional mode: the business write and the inbox's Done mark
// commit together, so a message delivered three times pays once.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "inbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.MustExecContext(ctx, `CREATE TABLE invoices (id TEXT PRIMARY KEY, paid INTEGER NOT NULL)`)
	db.MustExecContext(ctx, `INSERT INTO invoices (id, paid) VALUES ('inv-7', 0)`)

	in, err := inbox.New(ctx, db, inbox.Config{}) // creates the inbox_message table
	if err != nil {
		panic(err)
	}
	msg := inbox.Message{Source: "stripe", MessageID: "evt_1", Topic: "invoice.paid", Payload: []byte(`{"amount":4200}`)}
	for delivery := 1; delivery <= 3; delivery++ {
		processed, err := in.Process(ctx, msg, func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE invoices SET paid = paid + 4200 WHERE id = 'inv-7'`)
			return err
		})
		fmt.Printf("delivery %d: processed=%v err=%v\n", delivery, processed, err)
	}
	var paid int
	if err := db.GetContext(ctx, &paid, `SELECT paid FROM invoices WHERE id = 'inv-7'`); err != nil {
		panic(err)
	}
	fmt.Println("paid:", paid)
	// Output:
	// delivery 1: processed=true err=<nil>
	// delivery 2: processed=false err=<nil>
	// delivery 3: processed=false err=<nil>
	// paid: 4200
}

// The work-queue mode: Enqueue stores the message, a dispatcher runs the
// topic's handler and marks it Done; a redelivery of a Done message
// changes nothing.
func ExampleInbox_NewDispatcher() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "inbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	in, err := inbox.New(ctx, db, inbox.Config{})
	if err != nil {
		panic(err)
	}
	d, err := in.NewDispatcher(inbox.DispatcherConfig{Workers: 2})
	if err != nil {
		panic(err)
	}
	handled := make(chan string, 1)
	err = d.HandleFunc("order.created", func(ctx context.Context, msg inbox.Record) error {
		handled <- fmt.Sprintf("handled %s/%s (attempt %d): %s", msg.Source, msg.MessageID, msg.Attempt, msg.Payload)
		return nil
	})
	if err != nil {
		panic(err)
	}
	if err := d.Start(ctx); err != nil {
		panic(err)
	}
	msg := inbox.Message{Source: "shop", MessageID: "order-42", Topic: "order.created", Payload: []byte(`{"total":99}`)}
	if err := in.Enqueue(ctx, msg); err != nil {
		panic(err)
	}
	fmt.Println(<-handled)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Close(stopCtx); err != nil { // waits for the acknowledgement
		panic(err)
	}
	if err := in.Enqueue(ctx, msg); err != nil { // a redelivery
		panic(err)
	}
	rec, err := in.Get(ctx, "shop", "order-42")
	if err != nil {
		panic(err)
	}
	fmt.Println("status:", rec.Status)
	// Output:
	// handled shop/order-42 (attempt 1): {"total":99}
	// status: Done
}

// A handler whose effect must happen once writes it through Process with
// its own ctx and message: the dispatcher's lease is the handler's, so the
// effect and the Done mark commit together, and a handler run again after
// a crash (before the acknowledgement) finds the message Done.
func ExampleDispatcher_HandleFunc_processOnce() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "inbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.MustExecContext(ctx, `CREATE TABLE stock (sku TEXT PRIMARY KEY, reserved INTEGER NOT NULL)`)
	db.MustExecContext(ctx, `INSERT INTO stock (sku, reserved) VALUES ('book', 0)`)
	in, err := inbox.New(ctx, db, inbox.Config{})
	if err != nil {
		panic(err)
	}
	d, err := in.NewDispatcher(inbox.DispatcherConfig{})
	if err != nil {
		panic(err)
	}
	err = d.HandleFunc("order.created", func(ctx context.Context, m inbox.Record) error {
		processed, err := inbox.FromContext(ctx).Process(ctx, inbox.Message{Source: m.Source, MessageID: m.MessageID},
			func(ctx context.Context, tx *sqlx.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE stock SET reserved = reserved + 1 WHERE sku = 'book'`)
				return err
			})
		fmt.Printf("handler: processed=%v err=%v\n", processed, err)
		return err
	})
	if err != nil {
		panic(err)
	}
	msg := inbox.Message{Source: "shop", MessageID: "order-43", Topic: "order.created", Payload: []byte(`{}`)}
	if err := in.Enqueue(ctx, msg); err != nil {
		panic(err)
	}
	if _, err := d.RunOnce(ctx); err != nil { // Start runs it in the background instead
		panic(err)
	}
	var reserved int
	if err := db.GetContext(ctx, &reserved, `SELECT reserved FROM stock WHERE sku = 'book'`); err != nil {
		panic(err)
	}
	rec, err := in.Get(ctx, "shop", "order-43")
	if err != nil {
		panic(err)
	}
	fmt.Println("status:", rec.Status, "reserved:", reserved)
	// Output:
	// handler: processed=true err=<nil>
	// status: Done reserved: 1
}

// printObserver is a core.InboxObserver that prints each processing's
// outcome; in production pass *otel.Observer or *prometheus.Collector of
// this repository's modules instead.
type printObserver struct{}

func (printObserver) ProcessInbox(ctx context.Context, m core.InboxMessage) (context.Context, func(core.InboxResult)) {
	return ctx, func(r core.InboxResult) {
		fmt.Printf("%s %s/%s: %s\n", m.Mode, m.Source, m.MessageID, r.Outcome)
	}
}

// Observation: Config.Observer sees every processing, with its outcome.
func ExampleConfig_observer() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "inbox-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	in, err := inbox.New(ctx, db, inbox.Config{Observer: printObserver{}})
	if err != nil {
		panic(err)
	}
	msg := inbox.Message{Source: "stripe", MessageID: "evt_1", Topic: "invoice.paid"}
	work := func(context.Context, *sqlx.Tx) error { return nil }
	for range 2 {
		if _, err := in.Process(ctx, msg, work); err != nil {
			panic(err)
		}
	}
	_, err = in.Process(ctx, inbox.Message{Source: "stripe", MessageID: "evt_2"}, func(context.Context, *sqlx.Tx) error {
		return errors.New("card declined")
	})
	fmt.Println("error:", err)
	// Output:
	// transactional stripe/evt_1: processed
	// transactional stripe/evt_1: duplicate
	// transactional stripe/evt_2: failed
	// error: card declined
}
