package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

func TestWithHeaders(t *testing.T) {
	env, err := core.NewEvent("T").Header("keep", "mine").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.WithHeaders(map[string]string{"keep": "theirs", "traceparent": "00-a-b-01"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.Header("keep"); v != "mine" {
		t.Errorf("an existing header was overwritten: %q", v)
	}
	if v, _ := got.Header("traceparent"); v != "00-a-b-01" {
		t.Errorf("the added header is missing: %v", got.Headers())
	}
	if _, ok := env.Header("traceparent"); ok {
		t.Error("WithHeaders changed the original envelope")
	}
	if same, err := env.WithHeaders(nil); err != nil || len(same.Headers()) != 1 {
		t.Errorf("WithHeaders(nil) = %v, %v", same.Headers(), err)
	}
	// An empty value counts as none: the added one replaces it (and an
	// empty added value does not replace a set one).
	blank, err := core.NewEvent("T").Header("traceparent", "").Header("keep", "mine").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	filled, err := blank.WithHeaders(map[string]string{"traceparent": "00-a-b-01", "keep": ""})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := filled.Header("traceparent"); v != "00-a-b-01" {
		t.Errorf("an empty header was not replaced: %q", v)
	}
	if v, _ := filled.Header("keep"); v != "mine" {
		t.Errorf("a set header was replaced by an empty one: %q", v)
	}
	for _, bad := range []map[string]string{{"": "v"}, {"k": "a\x00b"}, {"k\xff": "v"}} {
		if _, err := env.WithHeaders(bad); !errors.Is(err, core.ErrInvalidHeader) {
			t.Errorf("WithHeaders(%q) = %v, want ErrInvalidHeader", bad, err)
		}
	}
}

func TestObserverNamesAndNop(t *testing.T) {
	for p, want := range map[core.Path]string{core.PathHot: "hot", core.PathCold: "cold", core.PathRetry: "retry", 9: "Path(9)"} {
		if p.String() != want {
			t.Errorf("Path %d = %q, want %q", p, p.String(), want)
		}
	}
	for o, want := range map[core.Outcome]string{core.OutcomeDone: "done", core.OutcomeRetry: "retry", core.OutcomeDead: "dead",
		core.OutcomePutOff: "put_off", core.OutcomeUnhandled: "unhandled", core.OutcomeInterrupted: "interrupted", 9: "Outcome(9)"} {
		if o.String() != want {
			t.Errorf("Outcome %d = %q, want %q", o, o.String(), want)
		}
	}
	var nop core.NopObserver
	ctx := context.Background()
	h, done := nop.Publish(ctx, core.Envelope{})
	done(nil)
	if h != nil {
		t.Errorf("NopObserver.Publish headers = %v", h)
	}
	if got, end := nop.Deliver(ctx, core.Delivery{}); got != ctx {
		t.Error("NopObserver.Deliver changed the context")
	} else {
		end(core.DeliveryResult{})
	}
}

// Due is the commit time, or the event's NotBefore when later; zero when
// the commit time is unknown.
func TestDeliveryDue(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	plain, err := core.NewEvent("E").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	delayed, err := core.NewEvent("E").NotBefore(now.Add(time.Minute)).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		d    core.Delivery
		want time.Time
	}{
		"unknown commit":    {core.Delivery{Event: delayed}, time.Time{}},
		"no delay":          {core.Delivery{Event: plain, Committed: now}, now},
		"delayed":           {core.Delivery{Event: delayed, Committed: now}, now.Add(time.Minute)},
		"due before commit": {core.Delivery{Event: delayed, Committed: now.Add(time.Hour)}, now.Add(time.Hour)},
	} {
		if got := tc.d.Due(); !got.Equal(tc.want) {
			t.Errorf("%s: Due = %v, want %v", name, got, tc.want)
		}
	}
}
