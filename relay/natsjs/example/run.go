package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// Options configures Run.
type Options struct {
	URL    string       // NATS server with JetStream
	Events int          // how many events to publish
	Logger *slog.Logger // the library's logs; by default WARN and above to stderr
}

// received is what the billing consumer did with one message.
type received struct {
	msg       jetstream.Msg
	order     string // the aggregate id
	processed bool
}

// Run publishes opts.Events events through an outbox and the natsjs relay,
// consumes them into an inbox and writes what happened to w.
func Run(ctx context.Context, opts Options, w io.Writer) error {
	if opts.Events <= 0 {
		return errors.New("the number of events must be positive")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	dir, err := os.MkdirTemp("", "natsjs-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	nc, err := nats.Connect(opts.URL, nats.MaxReconnects(-1), nats.Timeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", opts.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	// The stream: file storage, a duplicate window longer than any
	// redelivery delay, every subject under a prefix of this run.
	suffix := randomSuffix()
	prefix := "example-" + suffix
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "OUTBOX_EXAMPLE_" + strings.ToUpper(suffix), Subjects: []string{prefix + ".>"},
		Storage: jetstream.FileStorage, Duplicates: 5 * time.Minute, // above Dispatcher.Lease (2 min): a crashed node's events come back after it
	})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, stream.CachedInfo().Config.Name)
	}()

	// Billing: consume the stream into the inbox.
	billingDB, err := sqlite.Open(filepath.Join(dir, "billing.db"))
	if err != nil {
		return err
	}
	defer billingDB.Close()
	if _, err := billingDB.ExecContext(ctx, `CREATE TABLE invoices (order_id TEXT PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		return err
	}
	in, err := inbox.New(ctx, billingDB, inbox.Config{Logger: logger})
	if err != nil {
		return err
	}
	got := make(chan received, opts.Events)
	handle := func(ctx context.Context, m jetstream.Msg) (received, error) {
		// DecodeHeaders gives back, exactly, the headers NATS could not
		// carry as they were (an aggregate id with a line break, say).
		h, err := natsjs.DecodeHeaders(m.Headers())
		if err != nil {
			return received{}, err
		}
		id, order := h.Get("Outbox-Event-Id"), h.Get("Outbox-Aggregate-Id")
		processed, err := in.Process(ctx, inbox.Message{Source: "orders", MessageID: id, Topic: m.Subject(), Payload: m.Data()},
			func(ctx context.Context, tx *sqlx.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO invoices (order_id, body) VALUES (?, ?)`, order, string(m.Data()))
				return err
			})
		return received{msg: m, order: order, processed: processed}, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		r, err := handle(ctx, m)
		if err != nil {
			_ = m.Nak() // redelivered later; the inbox keeps it idempotent
			return
		}
		_ = m.Ack()
		got <- r
	})
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer func() { cc.Stop(); <-cc.Closed() }()

	// Orders: the outbox and the relay.
	ordersDB, err := sqlite.Open(filepath.Join(dir, "orders.db"))
	if err != nil {
		return err
	}
	defer ordersDB.Close()
	ob, err := outbox.New(ctx, ordersDB, outbox.Config{Logger: logger})
	if err != nil {
		return err
	}
	relay, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{aggregate_type}.{type}", Logger: logger})
	if err != nil {
		return err
	}
	ob.Register("OrderPlaced", relay)
	if err := ob.Start(ctx); err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ob.Close(ctx)
		_ = relay.Close(ctx)
	}()

	var first core.Envelope
	for i := range opts.Events {
		env, err := outbox.NewEvent("OrderPlaced").AggregateType("Order").AggregateID(fmt.Sprintf("order-%d", i+1)).
			PayloadJSONString(fmt.Sprintf(`{"order":"order-%d","amount":%d}`, i+1, 10*(i+1))).Build()
		if err != nil {
			return err
		}
		if i == 0 {
			first = env
		}
		if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	fmt.Fprintf(w, "orders: committed %d OrderPlaced events to the outbox\n", opts.Events)

	var last received
	for range opts.Events {
		select {
		case last = <-got:
			fmt.Fprintf(w, "billing: invoice for %s (subject %s) processed=%v\n", last.order, last.msg.Subject(), last.processed)
		case <-time.After(30 * time.Second):
			return errors.New("timed out waiting for the consumer")
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	// A redelivery by the outbox (after a crash before its DONE write, say)
	// reaches JetStream with the same Nats-Msg-Id: the duplicate window
	// drops it, the relay counts it as delivered.
	if err := relay.OnEvent(ctx, first); err != nil {
		return fmt.Errorf("redeliver: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "orders: event of order-1 relayed again; the stream still holds %d messages\n", info.State.Msgs)

	// A redelivery by JetStream (an ack lost) reaches the inbox again: skipped.
	r, err := handle(ctx, last.msg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "billing: message of %s delivered again, processed=%v (the inbox skipped it)\n", r.order, r.processed)

	var invoices int
	if err := billingDB.GetContext(ctx, &invoices, `SELECT COUNT(*) FROM invoices`); err != nil {
		return err
	}
	// The outbox writes DONE just after the ack (coalesced with others).
	done := 0
	for deadline := time.Now().Add(10 * time.Second); done < opts.Events && time.Now().Before(deadline); {
		counts, err := ob.CountByStatus(ctx)
		if err != nil {
			return err
		}
		if done = counts[core.StatusDone]; done < opts.Events {
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Fprintf(w, "done: %d invoices, %d of %d outbox rows DONE\n", invoices, done, opts.Events)
	return nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
