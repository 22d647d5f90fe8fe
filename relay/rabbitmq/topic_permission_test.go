package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// topicUser adds to the local test broker (rabbitmqctl) a user that may
// write to every exchange but, on exchange ex, only with routing keys
// that start with "ok." (topic authorisation), removed in Cleanup, and
// returns the broker's URL with that user. Without rabbitmqctl, or with a
// broker that is not local, the test skips (fails when CI=true).
func topicUser(t *testing.T, ex string) string {
	t.Helper()
	u, err := url.Parse(amqpURL())
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := exec.LookPath("rabbitmqctl")
	if h := u.Hostname(); err != nil || (h != "127.0.0.1" && h != "localhost") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("topic permissions need rabbitmqctl and a local broker (%s): %v", amqpURL(), err)
		}
		t.Skipf("topic permissions need rabbitmqctl and a local broker (%s): %v", amqpURL(), err)
	}
	name, pw := "outbox-test-"+uniq(), uniq()
	run := func(args ...string) {
		if out, err := exec.Command(ctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %v: %v: %s", args, err, out)
		}
	}
	vhost, _ := url.PathUnescape(u.Path[min(1, len(u.Path)):])
	if vhost == "" {
		vhost = "/"
	}
	run("add_user", name, pw)
	t.Cleanup(func() { _ = exec.Command(ctl, "delete_user", name).Run() })
	run("set_permissions", "-p", vhost, name, ".*", ".*", ".*")
	run("set_topic_permissions", "-p", vhost, name, ex, `^ok\.`, `^ok\.`)
	u.User = url.UserPassword(name, pw)
	return u.String()
}

// The broker's topic authorisation refuses a routing key with a 403 that
// names the exchange too ("access to topic 'bad.x' in exchange …"):
// only the event of that key is refused (ErrRefused, a normal failure);
// its neighbours to the same exchange, awaiting their confirms on the
// same channel, are delivered, not charged an attempt for it.
func TestRelayTopicPermissionRefusesOnlyItsKey(t *testing.T) {
	ex, _ := routedExchange(t)
	r := newRelay(t, rabbitmq.Config{URL: topicUser(t, ex), Exchange: ex, RoutingKey: "{type}", Channels: 1})
	event := func(typ string) core.Envelope {
		env, err := core.NewEvent(typ).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	refusedAmongGoodEvents(t, r, 6, func(i int) core.Envelope { return event(fmt.Sprintf("ok.%d", i)) }, func() error {
		err := r.OnEvent(context.Background(), event("bad.x"))
		var ae *amqp.Error
		if !errors.Is(err, rabbitmq.ErrRefused) || !errors.As(err, &ae) || ae.Code != amqp.AccessRefused || errors.Is(err, core.ErrUnavailable) {
			return fmt.Errorf("%v, want ErrRefused with 403, not an outage", err)
		}
		return nil
	})
}
