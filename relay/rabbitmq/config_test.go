package rabbitmq_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// Every invalid field is reported at once, each as a *core.ConfigError
// named by its field, and no connection is attempted.
func TestConfigInvalid(t *testing.T) {
	_, err := rabbitmq.New(context.Background(), rabbitmq.Config{
		URL:               "http://127.0.0.1:5672/",
		Exchange:          "{nope}",
		RoutingKey:        strings.Repeat("k", 256),
		MaxInFlight:       -1,
		Channels:          -1,
		ConfirmTimeout:    -1,
		DialTimeout:       -1,
		ReconnectDelay:    time.Second,
		ReconnectMaxDelay: time.Millisecond,
		Breaker:           relay.BreakerConfig{ProbeInterval: -1, RetryAfter: -1},
		Propagator:        (*nilInjector)(nil), // a nil *otel.Observer: InjectHeaders panicked on it at the first event
		Metrics:           (*nilMetrics)(nil),
		Logger:            new(slog.Logger), // no handler: its first line panicked
	})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	if !errors.Is(err, relay.ErrInvalidTemplate) {
		t.Errorf("the bad template is not ErrInvalidTemplate: %v", err)
	}
	if n := strings.Count(err.Error(), "invalid template"); n != 1 {
		t.Errorf("the bad template's error says %d times that it is invalid, want once:\n%v", n, err)
	}
	for _, field := range []string{"URL", "Exchange", "RoutingKey", "MaxInFlight", "Channels", "ConfirmTimeout", "DialTimeout",
		"ReconnectMaxDelay", "Breaker.ProbeInterval", "Breaker.RetryAfter", "Propagator", "Metrics", "Logger"} {
		if !strings.Contains(err.Error(), " "+field+" ") {
			t.Errorf("no error for %s in:\n%v", field, err)
		}
	}
	var ce *core.ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("not a *core.ConfigError: %T", err)
	}
}

// Counts past what the broker or the memory could take, and durations
// written without a unit (5 is 5 ns), are refused before anything is
// dialled: Channels above RabbitMQ's channel_max made every pass of the
// round robin fail as an outage, 1<<40 of them ran out of memory in New;
// a ConfirmTimeout of 5 ns failed New as a network error, 100 µs made a
// false outage of a healthy broker.
func TestConfigOutOfRange(t *testing.T) {
	_, err := rabbitmq.New(context.Background(), rabbitmq.Config{
		URL:               "amqp://127.0.0.1:1/",
		MaxInFlight:       rabbitmq.MaxInFlightLimit + 1,
		Channels:          math.MaxInt,
		ConfirmTimeout:    5,
		DialTimeout:       100 * time.Microsecond,
		ReconnectDelay:    time.Nanosecond,
		ReconnectMaxDelay: time.Nanosecond,
		Breaker:           relay.BreakerConfig{ProbeInterval: 999 * time.Microsecond, RetryAfter: 1},
	})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, field := range []string{"MaxInFlight", "Channels", "ConfirmTimeout", "DialTimeout", "ReconnectDelay",
		"ReconnectMaxDelay", "Breaker.ProbeInterval", "Breaker.RetryAfter"} {
		if !strings.Contains(err.Error(), " "+field+" ") {
			t.Errorf("no error for %s in:\n%v", field, err)
		}
	}
	if !strings.Contains(err.Error(), "without a unit") {
		t.Errorf("the message does not say a number without a unit is nanoseconds:\n%v", err)
	}
}

// A template whose fixed text alone makes every expansion too long for
// AMQP (255 bytes) or not UTF-8 is refused at New, as a static one is:
// it was accepted, and every event then failed and went DEAD. Text that
// fits with the fields at their shortest is accepted, and so is setting
// ReconnectDelay alone above the default ReconnectMaxDelay (the maximum
// follows it; it was refused, naming the field not set).
func TestConfigTemplateFixedText(t *testing.T) {
	unreachable := "amqp://127.0.0.1:1/"
	for _, c := range []struct {
		name  string
		cfg   rabbitmq.Config
		field string
	}{
		{"long exchange", rabbitmq.Config{Exchange: strings.Repeat("a", 300) + "{tenant}"}, "Exchange"},
		{"long routing key", rabbitmq.Config{RoutingKey: strings.Repeat("a", 255) + "{type}"}, "RoutingKey"},
		{"routing key not UTF-8", rabbitmq.Config{RoutingKey: "\xff{type}"}, "RoutingKey"},
		{"exchange not UTF-8", rabbitmq.Config{Exchange: "{tenant}\xc3"}, "Exchange"},
	} {
		c.cfg.URL = unreachable
		_, err := rabbitmq.New(context.Background(), c.cfg)
		if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), " "+c.field+" ") || !strings.Contains(err.Error(), "for every event") {
			t.Errorf("%s: New = %v, want a *core.ConfigError for %s saying it holds for every event", c.name, err, c.field)
		}
	}
	for _, c := range []struct {
		name string
		cfg  rabbitmq.Config
	}{
		{"fits with the shortest fields", rabbitmq.Config{RoutingKey: strings.Repeat("a", 254) + "{type}", Exchange: strings.Repeat("a", 255) + "{tenant}"}},
		{"ReconnectDelay alone above 5s", rabbitmq.Config{ReconnectDelay: 10 * time.Second}},
	} {
		c.cfg.URL, c.cfg.DialTimeout = unreachable, time.Second
		if _, err := rabbitmq.New(context.Background(), c.cfg); err == nil || errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want the configuration accepted (and the dial failed)", c.name, err)
		}
	}
}

func TestConfigURLRequired(t *testing.T) {
	_, err := rabbitmq.New(context.Background(), rabbitmq.Config{})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "URL is required") {
		t.Errorf("New without URL = %v", err)
	}
}

// A broker that does not answer fails New with the dial error; the
// password never appears in it.
func TestNewUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	_, err = rabbitmq.New(context.Background(), rabbitmq.Config{URL: "amqp://user:s3cret@" + addr + "/", DialTimeout: 2 * time.Second})
	if err == nil || errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("New on a closed port = %v, want connection refused", err)
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "amqp://"+addr+"/") {
		t.Errorf("error should name the broker without credentials: %v", err)
	}
}

// Config.Dial replaces the URL: it opens every connection.
func TestConfigDial(t *testing.T) {
	admin(t)
	calls := 0
	r := newRelay(t, rabbitmq.Config{Dial: func(ctx context.Context) (*amqp.Connection, error) {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("Dial's ctx has no deadline")
		}
		return amqp.Dial(amqpURL())
	}, AllowUnroutable: true})
	env, err := core.JSONEvent("T", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.OnEvent(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("Dial called %d times, want 1", calls)
	}
}

// A Config.Dial that returns neither a connection nor an error fails New
// with an error saying so (it used to crash the process in the relay's
// background goroutine).
func TestConfigDialNilConnection(t *testing.T) {
	r, err := rabbitmq.New(context.Background(), rabbitmq.Config{Dial: func(context.Context) (*amqp.Connection, error) {
		return nil, nil
	}})
	if err == nil || !strings.Contains(err.Error(), "Config.Dial returned a nil connection") {
		t.Fatalf("New with a Dial returning (nil, nil) = %v, %v; want an error naming Config.Dial", r, err)
	}
}

// A URL New cannot parse is reported without any part of its password,
// raw or escaped: the parser's own errors quote the URL, or the part of
// it they refused.
func TestConfigBadURLHidesPassword(t *testing.T) {
	for _, u := range []string{
		"amqp://guest:s3cr%zzet@127.0.0.1:5672/",     // bad escape in the password
		"amqp://guest:s3cret@[::1/",                  // bad host
		"amqp://guest:s3cret@ho{st/",                 // bad character in the host
		"amqp://guest:s3cret@127.0.0.1:5672/\x7f",    // control character
		"amqp://guest:s3cret\x01@127.0.0.1:5672/",    // control character in the password
		"amqp://guest:s3c/ret@127.0.0.1:5672/",       // an unescaped / cuts the password into a port
		"amqp://guest:s3c#ret@127.0.0.1:5672/",       // so does #
		"amqp://guest:12345678901/s3cret@127.0.0.1/", // a digit password read as a port out of range
		"amqp://guest:1?heartbeat=s3cret@127.0.0.1/", // the rest read as a query value
		"amqp://guest:s3cret@127.0.0.1:5672/ vhost",  // whitespace
		"amqps//guest:s3cret@127.0.0.1:5672/",        // no scheme
		"http://guest:s3cret@127.0.0.1:5672/",        // wrong scheme
	} {
		_, err := rabbitmq.New(context.Background(), rabbitmq.Config{URL: u})
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "URL" {
			t.Errorf("New(%q) = %v, want a ConfigError for URL", u, err)
			continue
		}
		for _, part := range []string{"s3c", "ret", "zz", "123456"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("New(%q): error shows %q of the password: %v", u, part, err)
			}
		}
	}
}

// nilInjector is a HeaderInjector of a pointer type, as otel's Observer.
type nilInjector struct{ header string }

func (n *nilInjector) InjectHeaders(_ context.Context, set func(key, value string)) {
	set("x", n.header)
}

// RedactURL keeps the scheme, host, port and virtual host and leaves out
// the user and password.
func TestRedactURL(t *testing.T) {
	for u, want := range map[string]string{
		"amqp://guest:secret@127.0.0.1:5672/": "amqp://127.0.0.1:5672/",
		"amqps://u:secret@h/vh":               "amqps://h:5671/vh",
		"amqp://h/a%2Fb":                      "amqp://h:5672/a%2Fb",
		"http://u:secret@h/":                  "<invalid URL>",
	} {
		if got := rabbitmq.RedactURL(u); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", u, got, want)
		}
	}
}

// New's ctx ending during the AMQP handshake (a server that accepts and
// never answers) returns an error matching ctx's: it was an i/o timeout
// that did not say whose deadline ended.
func TestNewCtxEndsDuringTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	defer func() {
		select {
		case c := <-accepted:
			_ = c.Close()
		default:
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = rabbitmq.New(ctx, rabbitmq.Config{URL: "amqp://guest:guest@" + ln.Addr().String() + "/", DialTimeout: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("New = %v, want an error matching context.DeadlineExceeded", err)
	}
}
