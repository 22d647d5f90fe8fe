package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// refusedMessage is a message the broker closes the channel of with 406
// PRECONDITION_FAILED, for a reason that names no exchange: a "CC"
// header that is a string, not an array (which the relay never builds
// from an event; rabbitmq.Deliver sends it as it is).
func refusedMessage() amqp.Publishing {
	return amqp.Publishing{MessageId: "refused-" + uniq(), Headers: amqp.Table{"CC": "boss@example.com"}, Body: []byte("{}")}
}

// wantRefused fails t unless err is ErrRefused with the reply code,
// a normal failure.
func wantRefused(t *testing.T, what string, err error, code int) {
	t.Helper()
	if err := refusedWith(err, code); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// refusedWith returns nil when err is ErrRefused with the broker's code,
// not an outage, and else an error saying what err is.
func refusedWith(err error, code int) error {
	var ae *amqp.Error
	if !errors.Is(err, rabbitmq.ErrRefused) || !errors.As(err, &ae) || ae.Code != code || errors.Is(err, core.ErrUnavailable) {
		return fmt.Errorf("%v, want ErrRefused with %d, not an outage", err, code)
	}
	return nil
}

// A channel the broker closes for a reason that does not name the
// message's exchange (406 for a header of the wrong type), while that
// message is the only one awaiting its confirm on it, was closed because
// of that message: ErrRefused, a normal failure (retried, DEAD after
// MaxAttempts), not an event put off for ever after five new channels.
func TestRelayRefusedMessageAlone(t *testing.T) {
	ex, got := consumedExchange(t)
	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Exchange: ex, Logger: logger})

	err := rabbitmq.Deliver(context.Background(), r, ex, "T", refusedMessage())
	wantRefused(t, "a message the broker refuses alone on its channel", err, amqp.PreconditionFailed)
	if n := logs.Count("level=WARN", "closed a publishing channel"); n > 1 {
		t.Errorf("%d channels closed for one refused message, want 1:\n%s", n, logs)
	}
	env, err := core.JSONEvent("T", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), env); err != nil {
		t.Fatalf("the next event: %v", err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the next event in the queue", func() bool { return got.count() >= 1 }, got.wake)
}

// refusedAmongGood runs 3 rounds of 60 concurrent events through r, every
// every-th a bad one (bad returns an error unless it ended as it must)
// and the others good ones, to exchange ex, each of which must be
// delivered: a message whose channel was closed while others awaited
// their confirms on it is published again alone, where a refusal can
// only be its own. Nobody is put off.
func refusedAmongGood(t *testing.T, r *rabbitmq.Relay, ex string, every int, bad func() error) {
	t.Helper()
	refusedAmongGoodEvents(t, r, every, func(int) core.Envelope { return tenantEvent(t, ex) }, bad)
}

// refusedAmongGoodEvents is refusedAmongGood with the good events made by
// good (given the event's index in its round).
func refusedAmongGoodEvents(t *testing.T, r *rabbitmq.Relay, every int, good func(i int) core.Envelope, bad func() error) {
	t.Helper()
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, 60)
		for i := range 60 {
			wg.Go(func() {
				if i%every == 0 {
					if err := bad(); err != nil {
						errs <- fmt.Errorf("round %d: bad event: %w", round, err)
					}
					return
				}
				if err := r.OnEvent(context.Background(), good(i)); err != nil {
					errs <- fmt.Errorf("round %d: good event not delivered: %w", round, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// Under load (one channel, many publishes awaiting their confirms on
// it), a message the broker refuses for a reason that names no exchange
// still ends refused, and its neighbours delivered.
func TestRelayRefusedMessageAmongOthers(t *testing.T) {
	ex, _ := routedExchange(t)
	logger, _ := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Exchange: "{tenant}", Channels: 1, Logger: logger})
	refusedAmongGood(t, r, ex, 6, func() error {
		return refusedWith(rabbitmq.Deliver(context.Background(), r, ex, "T", refusedMessage()), amqp.PreconditionFailed)
	})
}

// The broker cuts a reply text at 255 bytes ("..." at its end): the 404
// of a missing exchange whose name is long enough no longer quotes the
// whole name. Such an event is refused all the same (ErrRefused, a
// normal failure), alone and among others.
func TestRelayMissingExchangeLongName(t *testing.T) {
	ex, _ := routedExchange(t)
	logger, _ := testsupport.NewLogger()
	// A good event names ex by its tenant alone; a bad one, a missing
	// exchange of n bytes by the three fields (the outbox's limits: 64,
	// 64 and 128 characters).
	r := newRelay(t, rabbitmq.Config{Exchange: "{tenant}{aggregate_type}{aggregate_id}", Channels: 1, Logger: logger})
	missing := func(n int) core.Envelope {
		tenant := "rabbitmq-test-missing-" + uniq() + "-"
		tenant += strings.Repeat("t", 64-len(tenant))
		env, err := core.NewEvent("T").TenantID(tenant).AggregateType(strings.Repeat("a", 64)).
			AggregateID(strings.Repeat("i", n-128)).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, n := range []int{216, 217, 230, 255} {
		err := r.OnEvent(context.Background(), missing(n))
		wantRefused(t, fmt.Sprintf("an event to a missing exchange of %d bytes", n), err, amqp.NotFound)
	}
	refusedAmongGood(t, r, ex, 6, func() error {
		return refusedWith(r.OnEvent(context.Background(), missing(240)), amqp.NotFound)
	})
}
