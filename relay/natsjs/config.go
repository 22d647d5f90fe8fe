package natsjs

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/relay"
)

// Defaults of Config.
const (
	// DefaultSubject is the subject template used when Config.Subject is
	// empty: "outbox." followed by the event type.
	DefaultSubject = "outbox.{type}"
	// DefaultMaxInFlight bounds the publishes awaiting their ack.
	DefaultMaxInFlight = 256
	// MaxInFlightLimit bounds Config.MaxInFlight.
	MaxInFlightLimit = 1_000_000
	// DefaultAckTimeout is how long a publish waits for its ack.
	DefaultAckTimeout = 5 * time.Second
)

// Config configures a [Relay]. The zero value is valid: every field has a
// documented default. Every duration (AckTimeout, Breaker.ProbeInterval,
// Breaker.RetryAfter) is 0 for its default or at least 1 ms: a smaller
// positive one is refused as a forgotten unit (5 means 5 ns).
type Config struct {
	// Subject is the subject template every event is published to, in the
	// syntax of relay.ParseTemplate: literal text with the placeholders
	// {type}, {aggregate_type}, {aggregate_id}, {tenant} and {id}, such as
	// "orders.{aggregate_type}.{type}". Its literal parts must respect the
	// NATS subject rules (see [ValidateSubject]); an event whose expanded
	// subject breaks them (an empty field leaving an empty token, a space
	// in its type) fails with [ErrInvalidSubject]. Defaults to
	// DefaultSubject, "outbox.{type}". A stream must listen on the
	// resulting subjects.
	Subject string
	// SubjectFunc, when set, chooses the subject of each event instead of
	// Subject. An error it returns fails the delivery like any listener
	// error (retried, DEAD after MaxAttempts); its subject is checked like
	// an expanded template.
	SubjectFunc func(core.Envelope) (string, error)
	// MaxInFlight bounds how many publishes of this relay wait for their
	// ack at once; a publish beyond it waits for a slot (within its
	// listener's ctx). A publish that gave up waiting for its ack
	// (AckTimeout, ctx) frees its slot at once and leaves nothing behind:
	// each publish is a request whose reply nats.go forgets when the wait
	// ends, so refusals the server never answers (a denied subject, a
	// stream with NoAck, a plain subscriber) cannot pile up in the
	// JetStream context. Concurrency comes from the outbox's dispatcher
	// workers, each awaiting its own ack, so a bound above
	// Dispatcher.Workers changes nothing. Defaults to DefaultMaxInFlight
	// (256); at most MaxInFlightLimit.
	MaxInFlight int
	// AckTimeout is how long a publish waits for JetStream's ack. A
	// publish that gets none in time counts as an outage (the event is put
	// off, no attempt charged), not as a failure of the event, once the
	// JetStream API, asked then (with the connection up; one publish at a
	// time, within AckTimeout again, and not while an outage is under
	// way), named the stream that listens on the subject: when none does
	// (a plain NATS subscriber received the message) the event fails with
	// ErrNoStream, and when that stream has NoAck with ErrStreamNoAck,
	// normal failures. The listener's ctx deadline (the dispatcher's
	// ListenerTimeout) applies too, whichever ends first; a deadline that
	// ends the wait first is an outage without that question, so keep
	// AckTimeout below ListenerTimeout. nats.go's write of the message to
	// the socket heeds neither (it writes a message over 32 KB holding its
	// connection's lock, bounded by nats.FlusherTimeout, 1 min): on a link
	// too slow for a message within the listener's deadline, OnEvent
	// returns at the deadline all the same (the event put off, an outage)
	// while the publish goes on in the background. Defaults to
	// DefaultAckTimeout (5 s).
	AckTimeout time.Duration
	// ExpectStream, when set, makes JetStream refuse a message that would
	// not land in the stream of this name (the "Nats-Expected-Stream"
	// header): a normal failure of the event, retried and counted. Use it
	// to catch a subject another stream captures. Empty means any stream.
	ExpectStream string
	// Breaker configures the outage breaker: its name in log lines, how
	// often a probe event tries the broker during an outage, and how long
	// the events put off wait. Breaker.Name defaults to "nats jetstream
	// <server URL>", the URL of the server the connection is connected to
	// (else the first it was given) without user name or password, so the
	// relays to one server share it; Breaker.Logger defaults to Logger;
	// see relay.BreakerConfig for the rest.
	Breaker relay.BreakerConfig
	// Logger receives the relay's logs (through the breaker: one ERROR per
	// incident of outages, one INFO once it settled; the same for each incident of a
	// stream full with DiscardNew). Payloads and header values are never
	// logged. Defaults to slog.Default().
	Logger *slog.Logger
	// Propagator, when set, writes the trace context of the listener's
	// ctx into every message after the relay's headers, replacing the
	// event's own (such as its traceparent, whatever the case of its
	// name: Traceparent too): a consumer of the stream
	// then continues the trace of the delivery that relayed the message
	// rather than the publisher's. Pass the outbox's tracing Observer
	// (the OpenTelemetry module's implements core.HeaderInjector).
	// Headers in the "Nats-" namespace or with the name of a relay
	// metadata header (relay.IsMetadataHeader) it writes are dropped, like
	// the event's; one NATS cannot carry verbatim travels inside
	// HeaderEncoded, like the event's, and fails the event (a normal
	// failure) if it is not valid UTF-8 either. Nil, the default, adds
	// nothing.
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
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = DefaultAckTimeout
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
		// puts off itself (a slot wait ended by ctx, after Close).
		cfg.Breaker.RetryAfter = relay.DefaultRetryAfter
	}
	return cfg
}

// validate reports every invalid field of cfg (defaults applied) at once,
// and returns the parsed subject template.
func (cfg Config) validate() (relay.Template, error) {
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
	tpl, err := relay.ParseTemplate(cfg.Subject)
	if err != nil {
		errs = append(errs, cfgpath.Cause("Subject", err, relay.ErrInvalidTemplate))
	} else if cfg.SubjectFunc == nil {
		// Expanded with every field set, the template shows whether its
		// literal parts break the subject rules for every event.
		if err := ValidateSubject(tpl.Expand(probeEvent)); err != nil {
			ce := cfgpath.Cause("Subject", err, ErrInvalidSubject) // the sentinel's text once
			ce.Msg = fmt.Sprintf("template %q: %s", cfg.Subject, ce.Msg)
			errs = append(errs, ce)
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
	if cfg.MaxInFlight < 0 || cfg.MaxInFlight > MaxInFlightLimit {
		bad("MaxInFlight", "must be 0 (the default) or 1..%d (got %d)", MaxInFlightLimit, cfg.MaxInFlight)
	}
	if msg := cfgpath.DurationProblem(cfg.AckTimeout); msg != "" {
		bad("AckTimeout", "%s", msg)
	}
	if cfg.ExpectStream != "" {
		if err := validateStreamName(cfg.ExpectStream); err != nil {
			bad("ExpectStream", "%v", err)
		}
	}
	if msg := cfgpath.DurationProblem(cfg.Breaker.ProbeInterval); msg != "" {
		bad("Breaker.ProbeInterval", "%s", msg)
	}
	if msg := cfgpath.DurationProblem(cfg.Breaker.RetryAfter); msg != "" {
		bad("Breaker.RetryAfter", "%s", msg)
	}
	return tpl, errors.Join(errs...)
}

// probeEvent has every field a template can use set to a valid token.
var probeEvent = func() core.Envelope {
	env, err := core.NewEvent("x").ID("x").AggregateType("x").AggregateID("x").TenantID("x").PayloadBytes([]byte{0}).Build()
	if err != nil {
		panic("natsjs: building the template probe event: " + err.Error())
	}
	return env
}()
