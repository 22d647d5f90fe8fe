package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// Names of the inbox demo's tables.
const (
	demoInboxTable  = "inbox_demo"
	demoEmailsTable = "emails_demo"
)

// inboxStep shows the receiving side: an outbox listener forwards an
// OrderShipped event to an inbox consumer that "sends an email" (increments
// a counter row) inside its own transaction through inbox.Process. The
// first delivery loses its acknowledgement (the listener fails after the
// consumer committed), so the outbox delivers the event again; the inbox
// recognizes the message and the email is sent once.
func (d *demo) inboxStep(ctx context.Context, db *sqlx.DB, logger *slog.Logger) error {
	d.say("6. Inbox: an outbox listener forwards an event to an inbox consumer; delivered twice, applied once")
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+demoEmailsTable+
		" (event_id VARCHAR(64) NOT NULL PRIMARY KEY, sent INTEGER NOT NULL)"); err != nil {
		return err
	}
	in, err := inbox.New(ctx, db, inbox.Config{Table: demoInboxTable, Logger: logger})
	if err != nil {
		return err
	}
	var deliveries atomic.Int32
	d.ob.RegisterFunc("OrderShipped", func(ctx context.Context, e core.Envelope) error {
		n := deliveries.Add(1)
		msg := inbox.Message{Source: "orders-service", MessageID: e.ID(), Topic: e.Type(), Payload: e.Payload()}
		processed, err := in.Process(ctx, msg, func(ctx context.Context, tx *sqlx.Tx) error {
			// The consumer's business effect, in the consumer's transaction.
			_, err := tx.ExecContext(ctx, tx.Rebind("UPDATE "+demoEmailsTable+" SET sent = sent + 1 WHERE event_id = ?"), e.ID())
			return err
		})
		if err != nil {
			return err
		}
		d.say("   delivery %d of %s: inbox processed=%v", n, short(e.ID()), processed)
		if n == 1 {
			return errors.New("acknowledgement lost") // the outbox will deliver it again
		}
		return nil
	})
	env, err := outbox.NewEvent("OrderShipped").AggregateType("Order").AggregateID("order-2").
		PayloadJSONString(`{"carrier":"DHL"}`).Build()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, db.Rebind("INSERT INTO "+demoEmailsTable+" (event_id, sent) VALUES (?, 0)"), env.ID()); err != nil {
		return err
	}
	if err := d.publish(ctx, nil, env); err != nil {
		return err
	}
	if err := d.waitStatus(ctx, env.ID(), core.StatusDone); err != nil {
		return err
	}
	var sent int
	if err := db.GetContext(ctx, &sent, db.Rebind("SELECT sent FROM "+demoEmailsTable+" WHERE event_id = ?"), env.ID()); err != nil {
		return err
	}
	rec, err := in.Get(ctx, "orders-service", env.ID())
	if err != nil {
		return err
	}
	d.say("   the outbox delivered it %d times; the email was sent %d time; inbox row %s\n",
		deliveries.Load(), sent, rec.Status)
	if sent != 1 {
		return fmt.Errorf("the consumer's effect ran %d times, want 1", sent)
	}
	return nil
}
