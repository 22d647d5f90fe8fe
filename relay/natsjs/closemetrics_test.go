package natsjs_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// A relay closed during an outage reports its broker up (it waits on no
// broker any more) and nothing after: an alert on the broker's state
// ends with the relay. It left the broker down in the metrics until the
// process ended.
func TestRelayClosedDuringAnOutageReportsItsBrokerUp(t *testing.T) {
	_, admin := connect(t)
	_, prefix := newStream(t, admin, nil)
	nc, js := connect(t) // the relay's, closed below
	logger, _ := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	r, err := natsjs.New(js, natsjs.Config{Subject: prefix + ".{type}", Logger: logger, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	err = r.OnEvent(context.Background(), aggregateEvent(t, "a"))
	var unavailable *core.UnavailableError
	if !errors.As(err, &unavailable) {
		t.Fatalf("OnEvent with the connection closed: %v, want it put off", err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = r.OnEvent(context.Background(), aggregateEvent(t, "b"))
	if got, want := m.All(), []string{"up=true", "full=0", "up=false", "up=true", "full=0"}; !slices.Equal(got, want) {
		t.Fatalf("metrics %q, want %q", got, want)
	}
}
