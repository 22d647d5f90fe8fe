package prometheus_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-go/outbox/core"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

func TestNewZeroConfig(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	fams, err := c.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) == 0 {
		t.Fatal("no metric families")
	}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "outbox_") {
			t.Errorf("metric %s lacks the default namespace", f.GetName())
		}
	}
}

func TestNewInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   outboxprom.Config
		field string
	}{
		{"namespace with a dash", outboxprom.Config{Namespace: "my-app"}, "Namespace"},
		{"namespace starting with a digit", outboxprom.Config{Namespace: "1x"}, "Namespace"},
		{"negative MaxEventTypes", outboxprom.Config{MaxEventTypes: -1}, "MaxEventTypes"},
		{"negative MaxBrokers", outboxprom.Config{MaxBrokers: -1}, "MaxBrokers"},
		{"bad label name", outboxprom.Config{ConstLabels: map[string]string{"a-b": "x"}}, `ConstLabels["a-b"]`},
		{"reserved label name", outboxprom.Config{ConstLabels: map[string]string{"__x": "x"}}, `ConstLabels["__x"]`},
		{"histogram bucket label", outboxprom.Config{ConstLabels: map[string]string{"le": "x"}}, `ConstLabels["le"]`},
		{"own label", outboxprom.Config{ConstLabels: map[string]string{"store": "x"}}, `ConstLabels["store"]`},
		{"own inbox label", outboxprom.Config{ConstLabels: map[string]string{"topic": "x"}}, `ConstLabels["topic"]`},
		{"own mode label", outboxprom.Config{ConstLabels: map[string]string{"mode": "x"}}, `ConstLabels["mode"]`},
		{"own relay label", outboxprom.Config{ConstLabels: map[string]string{"broker": "x"}}, `ConstLabels["broker"]`},
		{"label value not UTF-8", outboxprom.Config{ConstLabels: map[string]string{"svc": "\xff"}}, `ConstLabels["svc"]`},
		{"decreasing buckets", outboxprom.Config{Buckets: outboxprom.Buckets{Claim: []float64{1, 0.5}}}, "Buckets.Claim"},
		{"repeated bucket", outboxprom.Config{Buckets: outboxprom.Buckets{DoneBatchSize: []float64{1, 1}}}, "Buckets.DoneBatchSize"},
		{"NaN bucket", outboxprom.Config{Buckets: outboxprom.Buckets{ListenerDuration: []float64{math.NaN()}}}, "Buckets.ListenerDuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := outboxprom.New(tc.cfg)
			if c != nil || !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("New = %v, %v; want core.ErrInvalidConfig", c, err)
			}
			var ce *core.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("error %v: want a ConfigError for %s", err, tc.field)
			}
		})
	}
}

func TestNewReportsEveryProblem(t *testing.T) {
	_, err := outboxprom.New(outboxprom.Config{
		Namespace:     "a b",
		MaxEventTypes: -5,
		Buckets:       outboxprom.Buckets{DoneWrite: []float64{2, 1}, CommitToListener: []float64{3, 3}},
	})
	for _, field := range []string{"Namespace", "MaxEventTypes", "Buckets.DoneWrite", "Buckets.CommitToListener"} {
		if err == nil || !strings.Contains(err.Error(), field+" ") {
			t.Errorf("error %v does not name %s", err, field)
		}
	}
}

func TestConfigBucketsAndConstLabels(t *testing.T) {
	buckets := []float64{0.1, 1, 10}
	c := newCollector(t, outboxprom.Config{Namespace: "shop", ConstLabels: map[string]string{"service": "orders"},
		Buckets: outboxprom.Buckets{Claim: buckets}})
	buckets[0] = 99 // the collector keeps its own copy
	c.Claimed("", 3, 0, nil)
	f, m := series(t, c.Gatherer(), "shop_claim_seconds", labels{"service": "orders", "store": ""})
	if m == nil {
		t.Fatalf("no shop_claim_seconds{service=orders}: %v", f)
	}
	var bounds []float64
	for _, b := range m.GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if len(bounds) != 3 || bounds[0] != 0.1 || bounds[2] != 10 {
		t.Errorf("buckets %v, want [0.1 1 10]", bounds)
	}
	if got := len(outboxprom.DefaultBuckets().CommitToListener); got == 0 {
		t.Error("no default buckets")
	}
}

func TestRegisterer(t *testing.T) {
	reg := prom.NewRegistry()
	c := newCollector(t, outboxprom.Config{Registerer: reg, ConstLabels: map[string]string{"service": "orders"}})
	c.HotDropped()
	wantValue(t, reg, "outbox_hot_dropped_total", labels{"service": "orders", "store": ""}, 1)
	wantValue(t, c.Gatherer(), "outbox_hot_dropped_total", labels{"service": "orders", "store": ""}, 1)

	// Another value of the same const labels can share the registry.
	newCollector(t, outboxprom.Config{Registerer: reg, ConstLabels: map[string]string{"service": "billing"}})

	// The same names again, or with other label names, are refused by the
	// registry, and the error says where.
	for _, cfg := range []outboxprom.Config{
		{Registerer: reg, ConstLabels: map[string]string{"service": "orders"}},
		{Registerer: reg},
	} {
		if _, err := outboxprom.New(cfg); err == nil || !strings.Contains(err.Error(), "Config.Registerer") {
			t.Errorf("New(%v) = %v, want a refusal naming Config.Registerer", cfg.ConstLabels, err)
		}
	}
	// Another namespace can.
	newCollector(t, outboxprom.Config{Registerer: reg, Namespace: "billing_outbox"})
}

// A nil *prometheus.Registry is refused up front: New registered in it and
// panicked.
func TestNewRefusesATypedNilRegisterer(t *testing.T) {
	c, err := outboxprom.New(outboxprom.Config{Registerer: (*prom.Registry)(nil)})
	var ce *core.ConfigError
	if c != nil || !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Registerer" {
		t.Fatalf("New = %v, %v; want a ConfigError naming Registerer", c, err)
	}
}

// A second collector identical to one registered is refused with the
// registry's prometheus.AlreadyRegisteredError, as New's doc says.
func TestRegistererAlreadyRegistered(t *testing.T) {
	reg := prom.NewRegistry()
	newCollector(t, outboxprom.Config{Registerer: reg})
	_, err := outboxprom.New(outboxprom.Config{Registerer: reg})
	if are := (prom.AlreadyRegisteredError{}); !errors.As(err, &are) {
		t.Errorf("second New = %v, want a prometheus.AlreadyRegisteredError", err)
	}
}
