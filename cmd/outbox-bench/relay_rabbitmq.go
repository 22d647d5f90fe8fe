package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/relay/rabbitmq"
)

func init() {
	relayKinds["rabbitmq"] = relayKind{defaultURL: "amqp://guest:guest@127.0.0.1:5672/", check: checkAMQPURL, forLog: rabbitmq.RedactURL, open: openRabbitMQ}
}

// checkAMQPURL is the rabbitmq relayKind.check.
func checkAMQPURL(url string) error {
	u, err := amqp.ParseURI(url)
	if err != nil {
		return urlParseError(err)
	}
	return checkPort(strconv.Itoa(u.Port))
}

// openRabbitMQ declares the durable topic exchange outbox-bench-<run> and
// the durable queue of the same name bound to it with "#", starts a
// consumer draining the queue (auto-ack: the broker forgets a message once
// sent, so the queue does not grow), and builds a rabbitmq relay publishing
// every event to the exchange with the routing key bench.<type>. The
// relay's messages are persistent and mandatory, and it awaits the
// broker's confirm of each.
func openRabbitMQ(ctx context.Context, url, run string, log *slog.Logger) (*relayTarget, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "outbox-bench admin"}})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	name := "outbox-bench-" + run
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err == nil {
		_, err = ch.QueueDeclare(name, true, false, false, false, nil)
	}
	if err == nil {
		err = ch.QueueBind(name, "#", name, false, nil)
	}
	var deliveries <-chan amqp.Delivery
	if err == nil {
		deliveries, err = ch.Consume(name, name, true, false, false, false, nil)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("declare exchange and queue %s: %w", name, err), deleteRabbitMQ(conn, name))
	}
	var consumed atomic.Int64
	var drained sync.WaitGroup
	drained.Go(func() {
		for range deliveries { // until the channel or the connection closes
			consumed.Add(1)
		}
	})
	r, err := rabbitmq.New(ctx, rabbitmq.Config{URL: url, Exchange: name, RoutingKey: "bench.{type}",
		ConnectionName: "outbox-bench relay", Logger: log})
	if err != nil {
		err = errors.Join(err, deleteRabbitMQ(conn, name))
		drained.Wait()
		return nil, err
	}
	return &relayTarget{
		listener: r,
		notes:    []string{"exchange=" + name, "queue=" + name, "durable", "drained_by=auto-ack consumer"},
		stored: func(context.Context) (int64, error) {
			q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			if err != nil {
				return 0, err
			}
			return consumed.Load() + int64(q.Messages), nil
		},
		close: func(ctx context.Context) error {
			err := errors.Join(r.Close(ctx), deleteRabbitMQ(conn, name))
			drained.Wait()
			return err
		},
		floor: func(ctx context.Context, n, workers int) (float64, []string, error) {
			return rabbitFloorRun(ctx, r, url, name, "bench."+eventType, n, workers)
		},
	}, nil
}

// deleteRabbitMQ deletes the scenario's queue and exchange on a channel of
// its own and closes the admin connection (which ends the consumer).
func deleteRabbitMQ(conn *amqp.Connection, name string) error {
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("delete queue and exchange %s: %w", name, err)
	}
	if _, err := ch.QueueDelete(name, false, false, false); err != nil {
		return fmt.Errorf("delete queue %s: %w", name, err)
	}
	if err := ch.ExchangeDelete(name, false, false); err != nil {
		return fmt.Errorf("delete exchange %s: %w", name, err)
	}
	return nil
}
