package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/relay"
)

// Defaults of Config.
const (
	// DefaultRoutingKey is the routing key template used when
	// Config.RoutingKey is empty: the event type.
	DefaultRoutingKey = "{type}"
	// DefaultMaxInFlight bounds the publishes awaiting their confirm.
	DefaultMaxInFlight = 256
	// DefaultChannels is the number of publishing channels.
	DefaultChannels = 4
	// MaxChannels bounds Config.Channels. The relay opens one channel
	// more (see ErrRefused): keep Channels below the broker's channel_max
	// (RabbitMQ's default is 2,047), or the channels past it fail to open
	// as an outage would.
	MaxChannels = 1024
	// MaxInFlightLimit bounds Config.MaxInFlight.
	MaxInFlightLimit = 1_000_000
	// DefaultConfirmTimeout is how long a publish waits for its confirm.
	DefaultConfirmTimeout = 5 * time.Second
	// DefaultDialTimeout bounds one dial: TCP connect and AMQP handshake.
	DefaultDialTimeout = 5 * time.Second
	// DefaultReconnectDelay is the first delay between two dials after the
	// connection was lost.
	DefaultReconnectDelay = 100 * time.Millisecond
	// DefaultReconnectMaxDelay caps the delay between two dials.
	DefaultReconnectMaxDelay = 5 * time.Second
	// DefaultConnectionName is the connection name shown by the broker's
	// management UI.
	DefaultConnectionName = "outbox-relay"
)

// maxShortString is the AMQP 0-9-1 limit of a short string in bytes: an
// exchange name, a routing key, a message id or type, a header name.
const maxShortString = 255

// Config configures a [Relay]. Only URL (or Dial) is required: every other
// field has a documented default. Every duration (ConfirmTimeout,
// DialTimeout, ReconnectDelay, ReconnectMaxDelay, Breaker.ProbeInterval,
// Breaker.RetryAfter) is 0 for its default or at least 1 ms: a smaller
// positive one is refused as a forgotten unit (5 means 5 ns).
type Config struct {
	// URL is the broker's AMQP URI, such as
	// "amqp://user:password@host:5672/vhost" (see amqp091.ParseURI; amqps
	// for TLS). Required unless Dial is set. It is parsed by New; its
	// password never appears in log lines or errors.
	URL string
	// Dial, when set, opens every connection of the relay (the first one
	// and each reconnection) instead of dialing URL, for TLS settings,
	// SASL mechanisms or a custom net.Conn. It must return a new
	// connection each time, and honour ctx. URL may then be empty: it only
	// names the broker in log lines.
	Dial func(ctx context.Context) (*amqp.Connection, error)
	// ConnectionName is the client-provided connection name the broker
	// shows (the "connection_name" client property). Ignored when Dial is
	// set. Defaults to DefaultConnectionName, "outbox-relay".
	ConnectionName string
	// Exchange is the exchange every event is published to, a template in
	// the syntax of relay.ParseTemplate ("events", "{tenant}.events"). It
	// must exist: publishing to a missing exchange fails the event (the
	// broker closes the channel with 404 NOT_FOUND; the relay opens a new
	// one). Defaults to "", the broker's default exchange, which routes a
	// message to the queue named by its routing key. A template that
	// expands to "" for an event (Exchange "{tenant}" and an event without
	// a tenant) fails that event with ErrInvalidMessage rather than send
	// it to the default exchange.
	Exchange string
	// RoutingKey is the routing key template ("orders.{type}",
	// "{aggregate_type}.{aggregate_id}"). An expanded key longer than 255
	// bytes fails the event with ErrInvalidMessage. Defaults to
	// DefaultRoutingKey, "{type}".
	RoutingKey string
	// AllowUnroutable publishes without the mandatory flag. By default
	// (false) every message is mandatory: a message no queue is bound to
	// receive is returned by the broker, and the event fails with
	// ErrUnroutable (retried, DEAD after MaxAttempts) instead of being
	// dropped silently. Set it for exchanges where an unrouted event is
	// fine; the broker then drops such a message and the event counts as
	// delivered.
	AllowUnroutable bool
	// MaxInFlight bounds how many publishes of this relay await their
	// confirm at once; a publish beyond it waits for a slot (within its
	// listener's ctx). Concurrency comes from the outbox's dispatcher
	// workers, each awaiting its own confirm, so a bound above
	// Dispatcher.Workers changes nothing. Defaults to DefaultMaxInFlight
	// (256); at most MaxInFlightLimit.
	MaxInFlight int
	// Channels is the number of AMQP channels, all in confirm mode, the
	// publishes are spread over (round robin) on one connection. A channel
	// closed by the broker (a missing exchange) is reopened on its next
	// use, and the publishes that were waiting on it are sent again, one
	// at a time, alone on one more channel (see ErrRefused). Throughput barely depends on it (the broker's confirms and
	// the workers awaiting them set the pace); several channels limit how
	// many publishes one closed channel interrupts. Defaults to
	// DefaultChannels (4); at most MaxChannels.
	Channels int
	// ConfirmTimeout is how long a publish waits for the broker's confirm.
	// A publish that gets none in time counts as an outage (the event is
	// put off, no attempt charged), not as a failure of the event. The
	// listener's ctx deadline (the dispatcher's ListenerTimeout) applies
	// too, whichever ends first: a deadline that ends the wait is the same
	// outage. It also bounds a write to the socket that makes no
	// progress: a broker that takes no bytes at all for that long (a
	// network that drops everything), without having blocked the
	// connection on purpose (a resource alarm), fails the connection,
	// which is dialled again, so a publish stuck behind a full socket
	// returns then rather than at the client's heartbeat timeout. A link
	// so slow that the kernel's send buffer makes no room for that long
	// (large messages at tens of KB/s: the kernel lets a write go on only
	// once a share of its buffer is free) is failed the same way, its
	// events sent again after the reconnection: raise ConfirmTimeout for
	// such a link. A connection from Config.Dial has no such bound.
	// Defaults to DefaultConfirmTimeout (5 s).
	ConfirmTimeout time.Duration
	// DialTimeout bounds one dial, TCP connect and AMQP handshake
	// together. Defaults to DefaultDialTimeout (5 s).
	DialTimeout time.Duration
	// ReconnectDelay is the delay before the first dial after the
	// connection was lost; it doubles after each failed dial up to
	// ReconnectMaxDelay. Each wait is jittered, the first included: 0.5
	// to 1.5 times the delay, at most ReconnectMaxDelay. Defaults to
	// DefaultReconnectDelay (100 ms).
	ReconnectDelay time.Duration
	// ReconnectMaxDelay caps the delay between two dials. Defaults to
	// DefaultReconnectMaxDelay (5 s), or to ReconnectDelay when that is
	// longer. Set, it must not be below ReconnectDelay.
	ReconnectMaxDelay time.Duration
	// Breaker configures the outage breaker: its name in log lines, how
	// often a probe event tries the broker during an outage, and how long
	// the events put off wait. Breaker.Name defaults to "rabbitmq
	// <URL without credentials>", Breaker.Logger to Logger,
	// Breaker.RetryAfter to relay.DefaultRetryAfter; see
	// relay.BreakerConfig for the rest.
	Breaker relay.BreakerConfig
	// Logger receives the relay's logs: through the breaker one ERROR per
	// incident of outages and one INFO once it settled, plus WARN lines for a connection
	// lost (with an INFO "reconnected"; at most one pair a minute, counting
	// the losses since, the others at DEBUG unless dialling again fails)
	// or a channel closed by the broker. Payloads and header values
	// are never logged. Defaults to slog.Default().
	Logger *slog.Logger
	// Propagator, when set, writes the trace context of the listener's
	// ctx into every message's headers after the relay's, replacing the
	// event's own (such as its traceparent, whatever the case of its
	// name: Traceparent too): a consumer of the queue then
	// continues the trace of the delivery that relayed the message rather
	// than the publisher's. A header it writes with the name of a relay
	// metadata header (relay.IsMetadataHeader) is dropped. Pass the outbox's tracing Observer (the
	// OpenTelemetry module's implements core.HeaderInjector). Nil, the
	// default, adds nothing.
	Propagator core.HeaderInjector
	// Metrics, when set, receives the relay's own state: whether the
	// broker can be reached and how many destinations are full (see
	// relay.Metrics), with the breaker's name (Breaker.Name) as the
	// broker. The OpenTelemetry Observer and the Prometheus Collector of
	// this repository implement it. It is also the default of
	// Breaker.Metrics. Close reports the broker up and no destination
	// full, and nothing after: a closed relay waits on no broker, so an
	// alert on a relay closed during an outage ends. Nil, the default,
	// records nothing.
	Metrics relay.Metrics
}

// withDefaults returns cfg with every unset field at its default; name is
// the breaker's default name.
func (cfg Config) withDefaults(name string) Config {
	if cfg.ConnectionName == "" {
		cfg.ConnectionName = DefaultConnectionName
	}
	if cfg.RoutingKey == "" {
		cfg.RoutingKey = DefaultRoutingKey
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Channels == 0 {
		cfg.Channels = DefaultChannels
	}
	if cfg.ConfirmTimeout == 0 {
		cfg.ConfirmTimeout = DefaultConfirmTimeout
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.ReconnectDelay == 0 {
		cfg.ReconnectDelay = DefaultReconnectDelay
	}
	if cfg.ReconnectMaxDelay == 0 {
		cfg.ReconnectMaxDelay = max(DefaultReconnectMaxDelay, cfg.ReconnectDelay)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Breaker.Logger == nil {
		cfg.Breaker.Logger = cfg.Logger
	}
	if cfg.Breaker.Metrics == nil {
		cfg.Breaker.Metrics = cfg.Metrics
	}
	if cfg.Breaker.Name == "" {
		cfg.Breaker.Name = name
	}
	if cfg.Breaker.RetryAfter == 0 {
		// The breaker's default, spelled out for the events the relay
		// puts off itself (a slot wait ended by ctx).
		cfg.Breaker.RetryAfter = relay.DefaultRetryAfter
	}
	return cfg
}

// templates are the parsed Exchange and RoutingKey of a Config.
type templates struct {
	exchange, routingKey relay.Template
}

// validate reports every invalid field of cfg (defaults applied) at once,
// and returns the parsed templates.
func (cfg Config) validate() (templates, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &core.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if cfgpath.NoHandler(cfg.Logger) {
		bad("Logger", "%s", cfgpath.NoHandlerMsg)
	}
	if cfgpath.NoHandler(cfg.Breaker.Logger) {
		bad("Breaker.Logger", "%s", cfgpath.NoHandlerMsg)
	}
	if cfg.Dial == nil {
		if cfg.URL == "" {
			bad("URL", "is required (or set Dial), e.g. amqp://guest:guest@127.0.0.1:5672/")
		} else if _, err := amqp.ParseURI(cfg.URL); err != nil {
			bad("URL", "is not an AMQP URI: %s", uriProblem(cfg.URL, err))
		}
	}
	if cfg.Propagator != nil && nilval.Is(cfg.Propagator) {
		bad("Propagator", "is a nil %T (leave it nil for none)", cfg.Propagator)
	}
	if cfg.Metrics != nil && nilval.Is(cfg.Metrics) {
		bad("Metrics", "is a nil %T (leave it nil for none)", cfg.Metrics)
	}
	if cfg.Metrics == nil && cfg.Breaker.Metrics != nil && nilval.Is(cfg.Breaker.Metrics) { // else it is Metrics
		bad("Breaker.Metrics", "is a nil %T (leave it nil for none)", cfg.Breaker.Metrics)
	}
	var t templates
	var err error
	if t.exchange, err = relay.ParseTemplate(cfg.Exchange); err != nil {
		errs = append(errs, cfgpath.Cause("Exchange", err, relay.ErrInvalidTemplate))
	} else if err := checkLiteral("exchange", t.exchange); err != nil {
		bad("Exchange", "%v", err)
	}
	if t.routingKey, err = relay.ParseTemplate(cfg.RoutingKey); err != nil {
		errs = append(errs, cfgpath.Cause("RoutingKey", err, relay.ErrInvalidTemplate))
	} else if err := checkLiteral("routing key", t.routingKey); err != nil {
		bad("RoutingKey", "%v", err)
	}
	for _, f := range []struct {
		name  string
		v     int
		limit int
	}{{"MaxInFlight", cfg.MaxInFlight, MaxInFlightLimit}, {"Channels", cfg.Channels, MaxChannels}} {
		if f.v < 0 || f.v > f.limit {
			bad(f.name, "must be 0 (the default) or 1..%d (got %d)", f.limit, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"ConfirmTimeout", cfg.ConfirmTimeout}, {"DialTimeout", cfg.DialTimeout},
		{"ReconnectDelay", cfg.ReconnectDelay}, {"ReconnectMaxDelay", cfg.ReconnectMaxDelay},
		{"Breaker.ProbeInterval", cfg.Breaker.ProbeInterval}, {"Breaker.RetryAfter", cfg.Breaker.RetryAfter},
	} {
		if msg := cfgpath.DurationProblem(f.v); msg != "" {
			bad(f.name, "%s", msg)
		}
	}
	if cfg.ReconnectDelay > 0 && cfg.ReconnectMaxDelay > 0 && cfg.ReconnectMaxDelay < cfg.ReconnectDelay {
		bad("ReconnectMaxDelay", "must not be below ReconnectDelay (%v < %v)", cfg.ReconnectMaxDelay, cfg.ReconnectDelay)
	}
	return t, errors.Join(errs...)
}

// checkShortString reports a value AMQP cannot carry in a short string.
func checkShortString(what, s string) error {
	if len(s) > maxShortString {
		return fmt.Errorf("%s is %d bytes, AMQP allows %d", what, len(s), maxShortString)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	return nil
}

// checkLiteral reports a template whose fixed text alone makes every
// expansion one AMQP cannot carry: too long, or not valid UTF-8 (an
// event's fields, valid UTF-8, cannot mend it).
func checkLiteral(what string, t relay.Template) error {
	err := checkShortString(what, t.Expand(probeEvent))
	if err == nil || t.Static() {
		return err
	}
	return fmt.Errorf("template %q: %w for every event (with its fields at their shortest)", t, err)
}

// probeEvent has the fields a template can use at their shortest: the
// expansion of a template for it is the shortest of all (the template
// itself when it is static).
var probeEvent = func() core.Envelope {
	env, err := core.NewEvent("x").ID("x").PayloadBytes([]byte{0}).Build()
	if err != nil {
		panic("rabbitmq: building the template probe event: " + err.Error())
	}
	return env
}()

// uriProblem says why amqp.ParseURI refused u in words that quote no part
// of u. The parser's errors quote the whole URL (net/url's) or the part of
// it they refused (an escape, a port, a query value); with a reserved
// character left unescaped in the password, that part is the password.
func uriProblem(u string, err error) string {
	const hint = "; percent-encode a reserved character such as ?, #, @, :, / or % in the user or password"
	var (
		escape url.EscapeError
		host   url.InvalidHostError
		parse  *url.Error
	)
	switch {
	case strings.ContainsAny(u, " \t\r\n"):
		return "it contains whitespace"
	case errors.As(err, &escape):
		return "it has an invalid percent-escape" + hint
	case errors.As(err, &host):
		return "its host has an invalid character" + hint
	case errors.As(err, &parse):
		return "it is not a valid URL" + hint
	}
	if parsed, perr := url.Parse(u); perr == nil && parsed.Scheme != "amqp" && parsed.Scheme != "amqps" {
		return "its scheme must be amqp or amqps"
	}
	return "its port or a query parameter is invalid" + hint
}

// RedactURL returns the AMQP URI u without its user and password, for
// log lines and errors: scheme, host, port (the default one when u has
// none) and virtual host, as in "amqp://127.0.0.1:5672/". A u that is
// not an AMQP URI gives "<invalid URL>". The relay names its broker this
// way.
func RedactURL(u string) string {
	uri, err := amqp.ParseURI(u)
	if err != nil {
		return "<invalid URL>"
	}
	vhost := uri.Vhost
	if vhost == "/" {
		vhost = ""
	}
	return uri.Scheme + "://" + net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)) + "/" + url.PathEscape(vhost)
}
