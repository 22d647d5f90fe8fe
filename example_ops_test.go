package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Events of one aggregate delivered in commit order: Config.Ordering
// orders every event of the type by its aggregate (here Account/42), a
// failed attempt included: the first delivery of "debit 2" fails, and
// "credit 3" waits until its retry succeeded. (Other aggregates' events
// would flow beside these, each aggregate in its own order.)
func Example_orderedDelivery() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ob, err := outbox.New(ctx, db, outbox.Config{
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ordering: core.Ordering{Types: []string{"BalanceChanged"}},
	})
	if err != nil {
		panic(err)
	}
	seen := make(chan string, 4)
	var failed atomic.Bool
	ob.RegisterFunc("BalanceChanged", func(ctx context.Context, e outbox.Envelope) error {
		if e.PayloadString() == `"debit 2"` && failed.CompareAndSwap(false, true) {
			return errors.New("downstream hiccup")
		}
		seen <- e.PayloadString()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(context.Background())

	for _, change := range []string{`"credit 1"`, `"debit 2"`, `"credit 3"`} {
		err := ob.InTx(ctx, func(ctx context.Context) error {
			env, err := outbox.NewEvent("BalanceChanged").AggregateType("Account").AggregateID("42").
				PayloadJSONString(change).Build()
			if err != nil {
				return err
			}
			_, err = ob.Publish(ctx, env)
			return err
		})
		if err != nil {
			panic(err)
		}
	}
	for range 3 {
		fmt.Println(<-seen)
	}
	// Output:
	// "credit 1"
	// "debit 2"
	// "credit 3"
}

// An event whose listener failed MaxAttempts times is DEAD; once the cause
// is fixed, ReplayDead moves it back to NEW and wakes the poller, which
// delivers it again (outboxctl dead replay does the same from a shell).
func ExampleOutbox_ReplayDead() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ob, err := outbox.New(ctx, db, outbox.Config{
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dispatcher: dispatcher.Config{MaxAttempts: 1},
	})
	if err != nil {
		panic(err)
	}
	fixed := make(chan struct{})
	attempts := make(chan error, 2)
	ob.RegisterFunc("InvoiceIssued", func(ctx context.Context, e outbox.Envelope) error {
		var err error
		select {
		case <-fixed:
		default:
			err = errors.New("mail server refused the invoice")
		}
		attempts <- err
		return err
	})
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(context.Background())

	var id string
	err = ob.InTx(ctx, func(ctx context.Context) error {
		env, err := outbox.JSONEvent("InvoiceIssued", `{"invoice":"F-1"}`)
		if err != nil {
			return err
		}
		id, err = ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("first attempt:", <-attempts)
	// The DEAD write follows the attempt: wait for it (an operator would
	// find the event with outboxctl dead list, or on the dashboard).
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := ob.Get(ctx, id)
		if err == nil && rec.Status == core.StatusDead {
			fmt.Println("status:", rec.Status, "-", rec.LastError)
			break
		}
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("the event is not DEAD: %v, %v", rec.Status, err))
		}
		time.Sleep(time.Millisecond)
	}

	close(fixed) // the cause is fixed
	res, err := ob.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{id}}, jdbcstore.ReplayOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("replayed:", res.Replayed)
	fmt.Println("second attempt:", <-attempts)
	// Output:
	// first attempt: mail server refused the invoice
	// status: DEAD - listener 1 of 1: mail server refused the invoice
	// replayed: 1
	// second attempt: <nil>
}
