package wiring_test

import (
	"log/slog"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/wiring"
)

type labelled struct {
	core.NopMetrics
	label string
}

func (l labelled) ForStore(id string) core.Metrics { return labelled{label: id} }

func TestInherit(t *testing.T) {
	root, mine := slog.Default(), slog.New(slog.DiscardHandler)
	var l *slog.Logger
	var m core.Metrics
	wiring.Inherit(&l, &m, root, labelled{label: "root"})
	if l != root || m.(labelled).label != "root" {
		t.Errorf("unset fields must take the defaults: %v %v", l, m)
	}
	l, m = mine, labelled{label: "mine"}
	wiring.Inherit(&l, &m, root, labelled{label: "root"})
	if l != mine || m.(labelled).label != "mine" {
		t.Errorf("set fields must be kept: %v %v", l, m)
	}
}

func TestMetricsForStore(t *testing.T) {
	if got := wiring.MetricsForStore(labelled{}, "t1"); got.(labelled).label != "t1" {
		t.Errorf("StoreMetrics not scoped: %#v", got)
	}
	if got := wiring.MetricsForStore(labelled{label: "root"}, ""); got.(labelled).label != "root" {
		t.Errorf("empty id must keep the sink: %#v", got)
	}
	var nop core.Metrics = core.NopMetrics{}
	if got := wiring.MetricsForStore(nop, "t1"); got != nop {
		t.Errorf("plain Metrics must be returned as is: %#v", got)
	}
}
