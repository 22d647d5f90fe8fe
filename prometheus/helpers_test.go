package prometheus_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	prom "github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newCollector returns a Collector with cfg or fails t.
func newCollector(t testing.TB, cfg outboxprom.Config) *outboxprom.Collector {
	t.Helper()
	c, err := outboxprom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// labels is a set of label pairs a series must have.
type labels map[string]string

// series finds the series of family name in g whose labels include want.
// It returns nil when there is none and fails t when several match.
func series(t testing.TB, g prom.Gatherer, name string, want labels) (*dto.MetricFamily, *dto.Metric) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		var found *dto.Metric
		for _, m := range f.GetMetric() {
			if hasLabels(m, want) {
				if found != nil {
					t.Fatalf("%s%v: several series match", name, want)
				}
				found = m
			}
		}
		return f, found
	}
	return nil, nil
}

// hasLabels reports whether m has every label of want, with its value; a
// label wanted with value "" also matches its absence.
func hasLabels(m *dto.Metric, want labels) bool {
	got := map[string]string{}
	for _, p := range m.GetLabel() {
		got[p.GetName()] = p.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// value returns a counter's or gauge's value, or a histogram's sample
// count, of the series of name with the labels want; 0 when there is no
// such series.
func value(t testing.TB, g prom.Gatherer, name string, want labels) float64 {
	t.Helper()
	f, m := series(t, g, name, want)
	if m == nil {
		return 0
	}
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Fatalf("%s: unexpected type %v", name, f.GetType())
	return 0
}

// histogramSum returns the sum of the histogram series of name with the
// labels want.
func histogramSum(t testing.TB, g prom.Gatherer, name string, want labels) float64 {
	t.Helper()
	_, m := series(t, g, name, want)
	if m == nil {
		t.Fatalf("%s%v: no series", name, want)
	}
	return m.GetHistogram().GetSampleSum()
}

// wantValue fails t unless the series of name with labels want has value v.
func wantValue(t testing.TB, g prom.Gatherer, name string, want labels, v float64) {
	t.Helper()
	if got := value(t, g, name, want); got != v {
		t.Errorf("%s%v = %v, want %v", name, want, got, v)
	}
}

// family returns the metric family name of g, or nil.
func family(t testing.TB, g prom.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// sqliteDB opens a SQLite database named name in t's temporary directory,
// closed when t ends.
func sqliteDB(t testing.TB, name string) *sqlx.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// start starts ob and closes it (within 30 s) in t's Cleanup.
func start(t testing.TB, ctx context.Context, ob *outbox.Outbox) {
	t.Helper()
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}
