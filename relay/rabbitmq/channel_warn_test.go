package rabbitmq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// Events to a missing exchange, one after the other, each close their
// channel (404): the WARN that the broker closed a publishing channel is
// rate-limited, with the number of channels closed, instead of one line per
// event (an exchange deleted while events flowed logged 1,015 lines in 2 s).
func TestRelayClosedChannelWarnRateLimited(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{Exchange: "{tenant}", Channels: 1, Logger: logger})
	missing := "rabbitmq-test-missing-" + uniq()
	for i := range 20 {
		if err := r.OnEvent(context.Background(), tenantEvent(t, missing)); !errors.Is(err, rabbitmq.ErrRefused) {
			t.Fatalf("event %d to a missing exchange: %v, want ErrRefused", i, err)
		}
	}
	if n := logs.Count("level=WARN", "closed a publishing channel"); n < 1 || n > 2 {
		t.Errorf("%d WARN lines for 20 channels closed in a row, want 1 or 2 (rate-limited):\n%s", n, logs)
	}
}
