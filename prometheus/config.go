package prometheus

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"unicode/utf8"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-go/outbox/core"
)

// Defaults of Config.
const (
	// DefaultNamespace prefixes every metric name: "outbox_deliveries_total".
	DefaultNamespace = "outbox"
	// DefaultMaxEventTypes bounds the distinct values of the event_type
	// label.
	DefaultMaxEventTypes = 500
	// DefaultMaxBrokers bounds the distinct values of the broker label.
	DefaultMaxBrokers = 100
	// OtherEventType is the event_type label of the events whose type came
	// after Config.MaxEventTypes others, the topic label of the inbox
	// messages whose topic came after Config.MaxEventTypes other topics,
	// and the broker label of the relays whose broker came after
	// Config.MaxBrokers others. An event type, topic or broker named
	// "(other)" itself is counted there too.
	OtherEventType = "(other)"
)

// Config configures a [Collector]. The zero value is valid: every field has
// a documented default.
type Config struct {
	// Registerer, when set, gets the collector's metrics registered in it
	// besides the collector's own registry (which [Collector.Handler] and
	// [Collector.Gatherer] serve). Set it to prometheus.DefaultRegisterer
	// to expose the outbox's metrics with the rest of the process's on the
	// promhttp.Handler you already serve. Two collectors in one Registerer
	// need another Namespace, or the same ConstLabels names with other
	// values: Prometheus refuses the same metric name with other label
	// names or twice the same series, and New returns its error.
	// Defaults to nil: the metrics are in the collector's own registry
	// only, and New never touches a global. A nil value of a pointer type
	// (a nil *prometheus.Registry) is an error, not the default.
	Registerer prom.Registerer
	// Namespace is the prefix of every metric name, joined with "_". It
	// must match [a-zA-Z_][a-zA-Z0-9_]*. Defaults to DefaultNamespace,
	// "outbox"; the dashboard and the alert rules of this module expect
	// it.
	Namespace string
	// ConstLabels are added to every metric, such as {"service": "orders"}
	// when several services report to one Prometheus. Names must match
	// [a-zA-Z_][a-zA-Z0-9_]*, must not start with "__", must not be "le"
	// (histogram buckets) and must not be one of the collector's own
	// labels (store, event_type, path, outcome, queue, status, topic,
	// mode, broker). Defaults to none.
	ConstLabels map[string]string
	// MaxEventTypes bounds the distinct values of the event_type label:
	// the events of the types seen after this many others are counted
	// under OtherEventType, "(other)". Event types are chosen by the
	// publishing code and so are a finite set; the bound only keeps a
	// mistake (a type built from an id) from flooding Prometheus with
	// series. It bounds the topic label of the inbox metrics the same way,
	// counting topics apart from event types: the messages of the topics
	// seen after this many others are counted under "(other)". Defaults
	// to DefaultMaxEventTypes (500); it must not be negative.
	MaxEventTypes int
	// MaxBrokers bounds the distinct values of the broker label of the
	// relays' metrics (relay.Metrics): the brokers seen after this many
	// others share the label OtherEventType, "(other)", whose
	// outbox_relay_broker_up is 0 while any of them is down, whose
	// outbox_relay_full_destinations and outbox_relay_outages_total add
	// theirs up. A broker is a relay's breaker name (its kind and server
	// address), so a program has a few; the bound only keeps relays
	// created with names built from data from flooding Prometheus.
	// Defaults to DefaultMaxBrokers (100); it must not be negative.
	MaxBrokers int
	// Buckets are the bucket upper bounds of the histograms; a nil or
	// empty field takes its default from [DefaultBuckets].
	Buckets Buckets
}

// Buckets are the bucket upper bounds of the collector's histograms, in
// seconds for durations. Each must be strictly increasing and free of NaN.
type Buckets struct {
	// CommitToListener: outbox_commit_to_listener_seconds, from commit to
	// the listeners' start, and outbox_inbox_enqueue_to_handler_seconds,
	// from an inbox message's Enqueue to its handler's start. Defaults to
	// 0.5 ms to 5 min: the hot path takes well under a millisecond, the
	// poller seconds.
	CommitToListener []float64
	// ListenerDuration: outbox_listener_duration_seconds and
	// outbox_inbox_process_duration_seconds (an inbox's business function
	// or handler). Defaults to 0.5 ms to 30 s (the dispatcher's default
	// ListenerTimeout).
	ListenerDuration []float64
	// DoneBatchSize: outbox_done_batch_size, events per DONE write.
	// Defaults to powers of two from 1 to 256 (the dispatcher's default
	// DoneBatchSize).
	DoneBatchSize []float64
	// DoneWrite: outbox_done_write_seconds. Defaults to 0.25 ms to 5 s.
	DoneWrite []float64
	// Claim: outbox_claim_seconds. Defaults to 0.25 ms to 5 s.
	Claim []float64
}

// DefaultBuckets returns the default buckets of every histogram, a fresh
// copy each call.
func DefaultBuckets() Buckets {
	statement := []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	return Buckets{
		CommitToListener: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		ListenerDuration: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		DoneBatchSize:    []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		DoneWrite:        statement,
		Claim:            slices.Clone(statement),
	}
}

// labelNames are the variable labels of the collector's metrics.
var labelNames = []string{labelStore, labelEventType, labelPath, labelOutcome, labelQueue, labelStatus, labelTopic, labelMode, labelBroker}

// The variable labels.
const (
	labelStore     = "store"
	labelEventType = "event_type"
	labelPath      = "path"
	labelOutcome   = "outcome"
	labelQueue     = "queue"
	labelStatus    = "status"
	labelTopic     = "topic"
	labelMode      = "mode"
	labelBroker    = "broker"
)

// nameRE matches a metric name prefix or a label name.
var nameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// withDefaults returns cfg with every unset field at its default.
func (cfg Config) withDefaults() Config {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.MaxEventTypes == 0 {
		cfg.MaxEventTypes = DefaultMaxEventTypes
	}
	if cfg.MaxBrokers == 0 {
		cfg.MaxBrokers = DefaultMaxBrokers
	}
	def := DefaultBuckets()
	for _, b := range []struct{ v, d *[]float64 }{
		{&cfg.Buckets.CommitToListener, &def.CommitToListener},
		{&cfg.Buckets.ListenerDuration, &def.ListenerDuration},
		{&cfg.Buckets.DoneBatchSize, &def.DoneBatchSize},
		{&cfg.Buckets.DoneWrite, &def.DoneWrite},
		{&cfg.Buckets.Claim, &def.Claim},
	} {
		if len(*b.v) == 0 {
			*b.v = *b.d
		} else {
			*b.v = slices.Clone(*b.v) // later changes by the caller change nothing
		}
	}
	return cfg
}

// validate reports every invalid field of a defaulted cfg at once.
func (cfg Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &core.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if cfg.Registerer != nil {
		if rv := reflect.ValueOf(cfg.Registerer); rv.Kind() == reflect.Pointer && rv.IsNil() {
			bad("Registerer", "must not be nil (a nil %T): leave it unset for the collector's own registry only", cfg.Registerer)
		}
	}
	if !nameRE.MatchString(cfg.Namespace) {
		bad("Namespace", "%q must match [a-zA-Z_][a-zA-Z0-9_]*", cfg.Namespace)
	}
	if cfg.MaxEventTypes < 0 {
		bad("MaxEventTypes", "must not be negative, got %d", cfg.MaxEventTypes)
	}
	if cfg.MaxBrokers < 0 {
		bad("MaxBrokers", "must not be negative, got %d", cfg.MaxBrokers)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.ConstLabels)) {
		field := fmt.Sprintf("ConstLabels[%q]", name)
		switch {
		case !nameRE.MatchString(name):
			bad(field, "is not a label name: it must match [a-zA-Z_][a-zA-Z0-9_]*")
		case len(name) >= 2 && name[:2] == "__":
			bad(field, "starts with \"__\", which Prometheus reserves")
		case name == "le":
			bad(field, "is the label Prometheus reserves for histogram buckets")
		case slices.Contains(labelNames, name):
			bad(field, "is one of the collector's own labels (%v)", labelNames)
		case !utf8.ValidString(cfg.ConstLabels[name]):
			bad(field, "has a value that is not valid UTF-8")
		}
	}
	for _, b := range []struct {
		field string
		v     []float64
	}{
		{"Buckets.CommitToListener", cfg.Buckets.CommitToListener},
		{"Buckets.ListenerDuration", cfg.Buckets.ListenerDuration},
		{"Buckets.DoneBatchSize", cfg.Buckets.DoneBatchSize},
		{"Buckets.DoneWrite", cfg.Buckets.DoneWrite},
		{"Buckets.Claim", cfg.Buckets.Claim},
	} {
		for i, x := range b.v {
			if math.IsNaN(x) {
				bad(b.field, "bound %d is NaN", i)
				break
			}
			if i > 0 && x <= b.v[i-1] {
				bad(b.field, "must be strictly increasing: bound %d (%g) is not above bound %d (%g)", i, x, i-1, b.v[i-1])
				break
			}
		}
	}
	return errors.Join(errs...)
}
