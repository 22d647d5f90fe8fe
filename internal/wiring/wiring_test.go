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
