package core_test

import (
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

// countingMetrics overrides one signal and inherits the rest from NopMetrics,
// as the Metrics documentation recommends.
type countingMetrics struct {
	core.NopMetrics
	hot int
}

func (m *countingMetrics) HotEnqueued() { m.hot++ }

func TestNopMetricsAndEmbedding(t *testing.T) {
	var m core.Metrics = core.NopMetrics{}
	m.HotEnqueued()
	m.HotDropped()
	m.ColdEnqueued()
	m.DispatchSuccess()
	m.DispatchFailure()
	m.DispatchDead()
	m.QueueDepths(1, 2)
	m.OldestLag(time.Second)

	c := &countingMetrics{}
	m = c
	m.HotEnqueued()
	m.HotEnqueued()
	m.DispatchDead() // inherited no-op
	if c.hot != 2 {
		t.Errorf("hot = %d, want 2", c.hot)
	}
}
