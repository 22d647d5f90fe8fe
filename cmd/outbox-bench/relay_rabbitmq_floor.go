package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// rabbitFloorSettings are the channels x outstanding confirms the broker
// floor tries besides the relay's own concurrency: the best a durable
// classic queue showed on a 2-core box (a deep window on one channel, and
// the same spread over the relay's default channels).
var rabbitFloorSettings = [][2]int{{1, 256}, {rabbitmq.DefaultChannels, 64}}

// rabbitFloorRun measures the broker floor on the scenario's exchange, on
// a connection of its own: n messages with each of rabbitFloorSettings and
// n more with as many outstanding confirms as the relay can have (workers,
// one per dispatcher worker, over the relay's default channels). Then it
// measures the relay alone, without the outbox: l.OnEvent for n events
// from workers goroutines (relay_direct). It returns the best floor rate,
// and notes with every rate.
func rabbitFloorRun(ctx context.Context, l outbox.Listener, url, exchange, key string, n, workers int) (float64, []string, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "outbox-bench floor"}})
	if err != nil {
		return 0, nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	channels := min(rabbitmq.DefaultChannels, workers)
	settings := append(slices.Clone(rabbitFloorSettings), [2]int{channels, (workers + channels - 1) / channels})
	var best float64
	var notes []string
	for _, s := range settings {
		d, err := rabbitFloor(ctx, conn, exchange, key, n, s[0], s[1])
		if err != nil {
			return 0, nil, fmt.Errorf("%d channels x %d confirms: %w", s[0], s[1], err)
		}
		r := rate(n, d)
		best = max(best, r)
		notes = append(notes, fmt.Sprintf("broker_floor_%dx%d/s=%.0f", s[0], s[1], r))
	}
	d, err := relayDirect(ctx, l, n, workers)
	if err != nil {
		return 0, nil, fmt.Errorf("relay_direct: %w", err)
	}
	notes = append(notes, fmt.Sprintf("relay_direct/s=%.0f", rate(n, d)))
	return best, notes, nil
}

// relayDirect calls l.OnEvent for n events like the bench's from workers
// goroutines, each awaiting its own call: the relay alone, no database.
func relayDirect(ctx context.Context, l outbox.Listener, n, workers int) (time.Duration, error) {
	envs := make([]outbox.Envelope, n)
	for i := range envs {
		ref := orderRef("rdirect", i)
		env, err := outbox.NewEvent(eventType).AggregateType(aggregateType).AggregateID(ref).
			PayloadJSON(orderPayload(ref, orderAmount(i))).Build()
		if err != nil {
			return 0, err
		}
		envs[i] = env
	}
	return runPool(ctx, workers, n, func(ctx context.Context, i int) error { return l.OnEvent(ctx, envs[i]) })
}

// rabbitFloorMessage returns message i of the broker floor: the message
// the relay sends for the bench's event i (same body, properties and
// headers, so the same size on the wire and on disk), built once up front.
func rabbitFloorMessage(i int) (amqp.Publishing, error) {
	ref := orderRef("rfloor", i)
	env, err := outbox.NewEvent(eventType).AggregateType(aggregateType).AggregateID(ref).
		PayloadJSON(orderPayload(ref, orderAmount(i))).Build()
	if err != nil {
		return amqp.Publishing{}, err
	}
	headers := amqp.Table{}
	relay.Headers(env, func(k, v string) { headers[k] = v })
	return amqp.Publishing{
		Headers:      headers,
		DeliveryMode: amqp.Persistent,
		MessageId:    env.ID(),
		Timestamp:    env.OccurredAt(),
		Type:         env.Type(),
		ContentType:  "application/json",
		Body:         env.RawPayload(),
	}, nil
}

// rabbitFloor publishes n messages to exchange with routing key key, the
// way a minimal publisher gets the most out of the broker: persistent and
// mandatory like the relay's, on channels channels in confirm mode, each
// keeping up to window publishes awaiting their confirm (tracked with
// NotifyPublish, which the broker may acknowledge several at a time). It
// returns how long it took from the first publish to the last confirm. A
// nack, a return or a closed channel fails it.
func rabbitFloor(ctx context.Context, conn *amqp.Connection, exchange, key string, n, channels, window int) (time.Duration, error) {
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		m, err := rabbitFloorMessage(i)
		if err != nil {
			return 0, err
		}
		msgs[i] = m
	}
	type floorChan struct {
		ch       *amqp.Channel
		confirms chan amqp.Confirmation
		returns  chan amqp.Return
	}
	chans := make([]floorChan, channels)
	defer func() {
		for _, c := range chans {
			if c.ch != nil {
				_ = c.ch.Close()
			}
		}
	}()
	for i := range chans {
		ch, err := conn.Channel()
		if err != nil {
			return 0, fmt.Errorf("floor: open channel: %w", err)
		}
		chans[i].ch = ch
		if err := ch.Confirm(false); err != nil {
			return 0, fmt.Errorf("floor: confirm mode: %w", err)
		}
		chans[i].confirms = ch.NotifyPublish(make(chan amqp.Confirmation, window))
		chans[i].returns = ch.NotifyReturn(make(chan amqp.Return, window))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	start := time.Now()
	for _, c := range chans {
		slots := make(chan struct{}, window)
		var sent atomic.Int64
		publisherDone := make(chan struct{})
		wg.Go(func() { // publisher
			defer close(publisherDone)
			for {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := c.ch.PublishWithContext(ctx, exchange, key, true, false, msgs[i]); err != nil {
					fail(fmt.Errorf("floor: publish: %w", err))
					return
				}
				sent.Add(1)
			}
		})
		wg.Go(func() { // confirms of this channel
			var got int64
			publisherDone := publisherDone
			for {
				select {
				case cf, ok := <-c.confirms:
					if !ok {
						fail(errors.New("floor: channel closed awaiting confirms"))
						return
					}
					if !cf.Ack {
						fail(fmt.Errorf("floor: message %d nacked", cf.DeliveryTag))
						return
					}
					got++
					<-slots
				case r := <-c.returns:
					fail(fmt.Errorf("floor: message returned: %d %s", r.ReplyCode, r.ReplyText))
					return
				case <-publisherDone:
					if got == sent.Load() {
						return
					}
					publisherDone = nil // wait for the rest of the confirms
				case <-ctx.Done():
					return
				}
				if publisherDone == nil && got == sent.Load() {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return elapsed, firstErr
}
