package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jmoiron/sqlx"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// defaultAMQPURL is the RabbitMQ of -relay rabbitmq without -relay-url or
// $OUTBOX_TEST_AMQP_URL.
const defaultAMQPURL = "amqp://guest:guest@127.0.0.1:5672/"

// amqpTimeout bounds the parent's dial and each wait for a message while
// it reads the queue back.
const amqpTimeout = 10 * time.Second

// rabbitQueue is the run's RabbitMQ destination: a durable topic exchange
// outbox-torture-<random> and the durable (classic) queue of the same name
// bound to it with "#". Nothing consumes the queue until the parent reads
// it back after the drain, so it holds every message the children's relays
// had confirmed, in the order the broker enqueued them.
type rabbitQueue struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	name string
}

// openRabbitQueue connects to url and declares the run's exchange and
// queue.
func openRabbitQueue(ctx context.Context, url string) (*runStream, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: amqpTimeout}
			return d.DialContext(ctx, network, addr)
		},
		Properties: amqp.Table{"connection_name": "outbox-torture"},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to RabbitMQ at %s: %w", rabbitmq.RedactURL(url), err)
	}
	tok := make([]byte, 5)
	if _, err := rand.Read(tok); err != nil {
		_ = conn.Close()
		return nil, err
	}
	q := &rabbitQueue{conn: conn, name: "outbox-torture-" + hex.EncodeToString(tok)}
	q.ch, err = conn.Channel()
	if err == nil {
		err = q.ch.ExchangeDeclare(q.name, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err == nil {
		_, err = q.ch.QueueDeclare(q.name, true, false, false, false, nil)
	}
	if err == nil {
		err = q.ch.QueueBind(q.name, "#", q.name, false, nil)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("declare exchange and queue %s: %w", q.name, err), q.close(false))
	}
	return &runStream{name: q.name, addr: rabbitmq.RedactURL(url), subject: q.name, copyTo: q.copyTo, close: q.close}, nil
}

// copyTo reads every message of the queue, in queue order, into the
// stream table: its position (1, 2, …) and its message_id (the event id).
// The children are gone, so the queue's message count is final; the
// messages are consumed (acknowledged) as they are copied.
func (q *rabbitQueue) copyTo(ctx context.Context, db *sqlx.DB) (int, error) {
	info, err := q.ch.QueueDeclarePassive(q.name, true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("queue %s: %w", q.name, err)
	}
	if info.Messages == 0 {
		return 0, nil
	}
	if err := q.ch.Qos(1000, 0, false); err != nil {
		return 0, fmt.Errorf("queue %s: %w", q.name, err)
	}
	deliveries, err := q.ch.Consume(q.name, "outbox-torture-check", false, true, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("queue %s: consume: %w", q.name, err)
	}
	defer func() { _ = q.ch.Cancel("outbox-torture-check", false) }()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	insert := tx.Rebind(insertStream)
	t := time.NewTimer(amqpTimeout)
	defer t.Stop()
	for seq := 1; seq <= info.Messages; seq++ {
		t.Reset(amqpTimeout)
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-deliveries:
		case <-t.C:
			return 0, fmt.Errorf("queue %s: no message %d of %d within %v", q.name, seq, info.Messages, amqpTimeout)
		}
		if !ok {
			return 0, fmt.Errorf("queue %s: the consumer ended at message %d of %d", q.name, seq, info.Messages)
		}
		if _, err := tx.ExecContext(ctx, insert, seq, d.MessageId); err != nil {
			return 0, fmt.Errorf("record queue message %d: %w", seq, err)
		}
		if err := d.Ack(false); err != nil {
			return 0, fmt.Errorf("queue %s: ack message %d: %w", q.name, seq, err)
		}
	}
	return info.Messages, tx.Commit()
}

// close deletes the queue and the exchange unless keep, and closes the
// connection.
func (q *rabbitQueue) close(keep bool) error {
	defer q.conn.Close()
	if keep {
		return nil
	}
	// A fresh channel: the one of the declarations may have been closed by
	// a failed declaration.
	ch, err := q.conn.Channel()
	if err != nil {
		return fmt.Errorf("delete queue and exchange %s: %w", q.name, err)
	}
	if _, err := ch.QueueDelete(q.name, false, false, false); err != nil {
		return fmt.Errorf("delete queue %s: %w", q.name, err)
	}
	if err := ch.ExchangeDelete(q.name, false, false); err != nil {
		return fmt.Errorf("delete exchange %s: %w", q.name, err)
	}
	return nil
}

// openChildRabbitMQ builds the child's rabbitmq relay publishing every
// event, persistent and mandatory, to the exchange spec.RelaySubject with
// the event type as routing key, and awaiting the broker's confirm.
func openChildRabbitMQ(spec childSpec, logger *slog.Logger) (*childRelay, error) {
	ctx, cancel := context.WithTimeout(context.Background(), amqpTimeout)
	defer cancel()
	r, err := rabbitmq.New(ctx, rabbitmq.Config{URL: spec.RelayURL, Exchange: spec.RelaySubject,
		ConnectionName: fmt.Sprintf("outbox-torture child %d", spec.ID), Logger: logger})
	if err != nil {
		return nil, err
	}
	return &childRelay{relay: r, close: r.Close}, nil
}
