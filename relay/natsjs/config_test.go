package natsjs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

func TestNewValidatesConfig(t *testing.T) {
	_, js := connect(t)
	if _, err := natsjs.New(nil, natsjs.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("nil js: %v", err)
	}
	// Every problem at once: the config is checked with a nil js too.
	if _, err := natsjs.New(nil, natsjs.Config{Subject: "a..{type}"}); !errors.Is(err, natsjs.ErrInvalidSubject) {
		t.Errorf("nil js and a bad Subject: %v, want both reported", err)
	}
	// The sentinel's text is said once.
	if _, err := natsjs.New(js, natsjs.Config{Subject: "a..{type}"}); err == nil || strings.Count(err.Error(), "invalid subject") != 1 {
		t.Errorf("bad Subject: %v, want \"invalid subject\" once", err)
	}
	if _, err := natsjs.New(js, natsjs.Config{}); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	for _, tc := range []struct {
		name  string
		cfg   natsjs.Config
		field string
		is    error
	}{
		{"unknown placeholder", natsjs.Config{Subject: "orders.{nope}"}, "Subject", relay.ErrInvalidTemplate},
		{"unclosed brace", natsjs.Config{Subject: "orders.{type"}, "Subject", relay.ErrInvalidTemplate},
		{"space in literal", natsjs.Config{Subject: "my orders.{type}"}, "Subject", natsjs.ErrInvalidSubject},
		{"wildcard", natsjs.Config{Subject: "orders.*"}, "Subject", natsjs.ErrInvalidSubject},
		{"empty token", natsjs.Config{Subject: "orders..{type}"}, "Subject", natsjs.ErrInvalidSubject},
		{"negative MaxInFlight", natsjs.Config{MaxInFlight: -1}, "MaxInFlight", nil},
		{"negative AckTimeout", natsjs.Config{AckTimeout: -1}, "AckTimeout", nil},
		// Out of range: a forgotten unit (5 ns made a false outage of a
		// healthy server), a count sizing a channel up front.
		{"MaxInFlight past its limit", natsjs.Config{MaxInFlight: natsjs.MaxInFlightLimit + 1}, "MaxInFlight", nil},
		{"AckTimeout without a unit", natsjs.Config{AckTimeout: 5}, "AckTimeout", nil},
		{"ProbeInterval below 1ms", natsjs.Config{Breaker: relay.BreakerConfig{ProbeInterval: time.Microsecond}}, "Breaker.ProbeInterval", nil},
		{"RetryAfter without a unit", natsjs.Config{Breaker: relay.BreakerConfig{RetryAfter: 30}}, "Breaker.RetryAfter", nil},
		{"bad ExpectStream", natsjs.Config{ExpectStream: "a.b"}, "ExpectStream", nil},
		{"negative ProbeInterval", natsjs.Config{Breaker: relay.BreakerConfig{ProbeInterval: -1}}, "Breaker.ProbeInterval", nil},
		{"negative RetryAfter", natsjs.Config{Breaker: relay.BreakerConfig{RetryAfter: -1}}, "Breaker.RetryAfter", nil},
		// A nil *otel.Observer: InjectHeaders panicked on it at the first event.
		{"nil value Propagator", natsjs.Config{Propagator: (*nilInjector)(nil)}, "Propagator", nil},
		{"nil value Metrics", natsjs.Config{Metrics: (*nilMetrics)(nil)}, "Metrics", nil},
		{"nil value Breaker.Metrics", natsjs.Config{Breaker: relay.BreakerConfig{Metrics: (*nilMetrics)(nil)}}, "Breaker.Metrics", nil},
		// A logger without a handler panicked at its first line.
		{"zero Logger", natsjs.Config{Logger: new(slog.Logger)}, "Logger", nil},
		{"zero Breaker.Logger", natsjs.Config{Breaker: relay.BreakerConfig{Logger: new(slog.Logger)}}, "Breaker.Logger", nil},
	} {
		_, err := natsjs.New(js, tc.cfg)
		var ce *core.ConfigError
		if !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v; want a ConfigError for %s", tc.name, err, tc.field)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v does not match %v", tc.name, err, tc.is)
		}
		if tc.is == relay.ErrInvalidTemplate && strings.Count(err.Error(), "invalid template") != 1 {
			t.Errorf("%s: %v; want it to say once that the template is invalid", tc.name, err)
		}
	}
	// Every bad field is reported at once.
	_, err := natsjs.New(js, natsjs.Config{Subject: "{x}", MaxInFlight: -1, AckTimeout: -1})
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("three bad fields: %v", err)
	}
	// A SubjectFunc makes the template irrelevant, but not an unparsable one.
	if _, err := natsjs.New(js, natsjs.Config{Subject: "a b", SubjectFunc: func(core.Envelope) (string, error) { return "x", nil }}); err != nil {
		t.Errorf("SubjectFunc with an unused template: %v", err)
	}
}

func TestValidateSubject(t *testing.T) {
	for _, ok := range []string{"a", "orders.created", "a.b-c_d.E9", "tenant.acme.Order.42", "ünïcode.ok", "orders.$JS.API.x", "a$", "INBOX.x", "orders._INBOX",
		strings.Repeat("a", 4000)} {
		if err := natsjs.ValidateSubject(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "a b", "a\tb", "a\nb", "a.*", "a.>", "a*b", "a\x00b", "a.\xff",
		"$JS.API.STREAM.PURGE.ORDERS", "$SYS.REQ.SERVER.PING", "$KV.bucket.key", "$G", "_INBOX.abc",
		strings.Repeat("a", 4001)} {
		if err := natsjs.ValidateSubject(bad); !errors.Is(err, natsjs.ErrInvalidSubject) {
			t.Errorf("%q: %v, want ErrInvalidSubject", bad, err)
		}
	}
}

// nilInjector is a HeaderInjector of a pointer type, as otel's Observer.
type nilInjector struct{ header string }

func (n *nilInjector) InjectHeaders(_ context.Context, set func(key, value string)) {
	set("x", n.header)
}
