package cfgpath_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
)

func TestPrefix(t *testing.T) {
	other := errors.New("other")
	var inner cfgpath.Collector
	inner.Field("Workers", "must be at least 1")
	inner.Add("", &core.ConfigError{Field: "Table", Msg: "bad", Err: core.ErrInvalidIdentifier})
	inner.Add("", other)
	inner.Add("", nil)
	var outer cfgpath.Collector
	outer.Add("Dispatcher", inner.Err())
	outer.Add("Store", &core.ConfigError{Msg: "whole part"})
	outer.Add("Poller", nil)
	err := outer.Err()
	if got, want := cfgpath.Fields(err), []string{"Dispatcher.Table", "Dispatcher.Workers", "Store"}; !slices.Equal(got, want) {
		t.Fatalf("fields %q, want %q", got, want)
	}
	if !errors.Is(err, core.ErrInvalidConfig) || !errors.Is(err, core.ErrInvalidIdentifier) || !errors.Is(err, other) {
		t.Fatalf("%v loses a sentinel", err)
	}
	if s := err.Error(); !strings.Contains(s, "Dispatcher.Workers must be at least 1") ||
		!strings.Contains(s, core.ErrInvalidIdentifier.Error()+": Dispatcher.Table bad") {
		t.Fatalf("Error() = %q", s)
	}
	if cfgpath.Prefix("X", nil) != nil || (&cfgpath.Collector{}).Err() != nil {
		t.Fatal("nil is not kept")
	}
	// The original is not modified.
	ce := &core.ConfigError{Field: "A"}
	_ = cfgpath.Prefix("P", ce)
	if ce.Field != "A" {
		t.Fatal("Prefix modified its argument")
	}
}

func TestSumSaturates(t *testing.T) {
	for _, tc := range []struct {
		ds   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{time.Second, 2 * time.Second}, 3 * time.Second},
		{[]time.Duration{math.MaxInt64, 1}, math.MaxInt64},
		{[]time.Duration{1 << 62, 1 << 62}, math.MaxInt64},
		{[]time.Duration{math.MaxInt64 - 1, 1}, math.MaxInt64},
		{[]time.Duration{-5, time.Second}, time.Second},
	} {
		if got := cfgpath.Sum(tc.ds...); got != tc.want {
			t.Errorf("Sum(%v) = %v, want %v", tc.ds, got, tc.want)
		}
	}
}
