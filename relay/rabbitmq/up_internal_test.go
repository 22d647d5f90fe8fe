package rabbitmq

import (
	"errors"
	"testing"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
)

// An answer to a publish that was under way when an outage began does not
// end it (it was received before the failure was seen); an answer to a
// publish started during the outage, such as its probe, does.
func TestUpIgnoresAnswersFromBeforeTheOutage(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	b, err := relay.NewBreaker(relay.BreakerConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{breaker: b}

	before := r.upFunc() // a publish under way, no outage yet
	_ = b.Down(errors.New("connection lost"))
	before()
	if down, _ := b.State(); !down {
		t.Fatal("an ack of a publish started before the outage ended it")
	}
	_ = b.Down(errors.New("still down"))
	probe := r.upFunc() // a publish started during the outage
	probe()
	if down, _ := b.State(); down {
		t.Fatal("an ack of a publish started during the outage did not end it")
	}
	if n := logs.Count("level=INFO", "broker recovered"); n != 1 {
		t.Errorf("%d recovered lines, want 1", n)
	}

	// A second outage that began while a publish of the first one was
	// under way: that publish's ack does not end the second one.
	_ = b.Down(errors.New("first"))
	during := r.upFunc()
	r.upFunc()() // ends the first outage
	_ = b.Down(errors.New("second"))
	during()
	if down, _ := b.State(); !down {
		t.Error("an ack of a publish started in an earlier outage ended a later one")
	}
}
