package otel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	obsotel "github.com/outbox-go/outbox/otel"
)

func TestStoreSignals(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	h.obs.DoneWritten("", 12, 4*time.Millisecond, nil)
	h.obs.DoneWritten("eu", 3, time.Millisecond, errors.New("db down"))
	h.obs.Claimed("eu", 7, 2*time.Millisecond, nil)

	var m core.Metrics = h.obs
	m.HotEnqueued()
	m.HotDropped()
	m.QueueDepths(5, 9)
	m.LeaseLost(2)
	eu := h.obs.ForStore("eu")
	if eu != h.obs.ForStore("eu") {
		t.Errorf("ForStore returns a new value for the same store")
	}
	eu.ColdEnqueued()
	eu.OldestLag(90 * time.Second)
	eu.LeasesReaped(4)
	eu.DispatchDead()
	eu.(core.PostponeMetrics).Postponed()
	eu.(core.OrderMetrics).BlockedKeys(3)
	eu.(core.UnhandledMetrics).Unhandled("Orphan")
	eu.(core.OpsMetrics).Replayed(6)
	eu.(core.OpsMetrics).Purged(10, 1)
	m.DispatchSuccess() // counted by the Observer's Deliver instead
	m.DispatchFailure()

	ms := h.collect(t)
	own := map[string]string{"outbox.store": ""}
	euL := map[string]string{"outbox.store": "eu"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		value  float64 // the count for a histogram
		sum    float64
	}{
		{obsotel.MetricDoneBatch, own, 1, 12},
		{obsotel.MetricDoneWrite, own, 1, 0.004},
		{obsotel.MetricDoneBatch, map[string]string{"outbox.store": "eu", "error.type": "*errors.errorString"}, 1, 3},
		{obsotel.MetricClaimRows, euL, 1, 7},
		{obsotel.MetricClaimTime, euL, 1, 0.002},
		{obsotel.MetricEnqueued, map[string]string{"outbox.store": "", "outbox.queue": "hot"}, 1, 1},
		{obsotel.MetricEnqueued, map[string]string{"outbox.store": "eu", "outbox.queue": "cold"}, 1, 1},
		{obsotel.MetricHotDropped, own, 1, 1},
		{obsotel.MetricQueueDepth, map[string]string{"outbox.queue": "hot"}, 5, 5},
		{obsotel.MetricQueueDepth, map[string]string{"outbox.queue": "cold"}, 9, 9},
		{obsotel.MetricLeaseLost, own, 2, 2},
		{obsotel.MetricOldestAge, euL, 90, 90},
		{obsotel.MetricLeaseReaped, euL, 4, 4},
		{obsotel.MetricDeadLetters, euL, 1, 1},
		{obsotel.MetricPutOffs, euL, 1, 1},
		{obsotel.MetricBlockedKeys, euL, 3, 3},
		{obsotel.MetricUnhandled, map[string]string{"outbox.store": "eu", "messaging.destination.name": "Orphan"}, 1, 1},
		{obsotel.MetricReplayed, euL, 6, 6},
		{obsotel.MetricPurged, map[string]string{"outbox.store": "eu", "outbox.status": "done"}, 10, 10},
		{obsotel.MetricPurged, map[string]string{"outbox.store": "eu", "outbox.status": "dead"}, 1, 1},
	} {
		p := metricPoint(t, ms, c.name, c.labels)
		if p.value != c.value || p.sum != c.sum {
			t.Errorf("%s%v = %v (sum %v), want %v (sum %v)", c.name, c.labels, p.value, p.sum, c.value, c.sum)
		}
	}
	if _, ok := ms["outbox.dispatch"]; ok {
		t.Errorf("DispatchSuccess recorded a metric")
	}
}

func TestMetricsAreSafeForConcurrentUse(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env := event(t, "T", nil)
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 200 {
				_, end := h.obs.Deliver(t.Context(), core.Delivery{Event: env, Store: []string{"a", "b"}[i%2], Path: core.Path(j % 3), Attempt: 1, Committed: time.Now()})
				end(core.DeliveryResult{Outcome: core.Outcome(j % 6)})
				h.obs.ForStore([]string{"a", "b"}[j%2]).HotDropped()
			}
		}()
	}
	for range 8 {
		<-done
	}
	ms := h.collect(t)
	total := 0.0
	for _, p := range points(t, ms[obsotel.MetricDeliveries]) {
		total += p.value
	}
	if total != 8*200 {
		t.Errorf("%s total = %v, want %d", obsotel.MetricDeliveries, total, 8*200)
	}
}

// The attribute sets built once per event type keep each combination
// apart: a type's successful and failed publishes, its own store's and
// another store's deliveries by path and outcome; and a path or outcome
// this package does not know yet is labelled with its String, not mixed
// with another.
func TestCachedSetsKeepCombinationsApart(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	publish(t, h, "T", nil)
	publish(t, h, "T", nil)
	publish(t, h, "T", core.ErrNoTransaction)
	env := event(t, "T", nil)
	for _, d := range []struct {
		store string
		path  core.Path
		out   core.Outcome
	}{
		{"", core.PathHot, core.OutcomeDone},
		{"", core.PathHot, core.OutcomeDone},
		{"", core.PathRetry, core.OutcomeRetry},
		{"eu", core.PathHot, core.OutcomeDone},
		{"", core.Path(9), core.Outcome(42)},
	} {
		_, end := h.obs.Deliver(t.Context(), core.Delivery{Event: env, Store: d.store, Path: d.path, Attempt: 1, Committed: time.Now()})
		end(core.DeliveryResult{Outcome: d.out, Listeners: time.Millisecond})
	}

	ms := h.collect(t)
	sent := points(t, ms[obsotel.MetricSent])
	if len(sent) != 2 {
		t.Fatalf("%s: %d data points, want 2 (ok, failed)", obsotel.MetricSent, len(sent))
	}
	for _, p := range sent {
		_, failed := p.attrs.Value("error.type")
		if want := map[bool]float64{false: 2, true: 1}[failed]; p.value != want {
			t.Errorf("%s with error.type=%v: %v, want %v", obsotel.MetricSent, failed, p.value, want)
		}
	}
	for _, tc := range []struct {
		want  map[string]string
		count float64
	}{
		{map[string]string{"outbox.store": "", "outbox.path": "hot", "outbox.outcome": "done"}, 2},
		{map[string]string{"outbox.store": "", "outbox.path": "retry", "outbox.outcome": "retry"}, 1},
		{map[string]string{"outbox.store": "eu", "outbox.path": "hot", "outbox.outcome": "done"}, 1},
		{map[string]string{"outbox.store": "", "outbox.path": "Path(9)", "outbox.outcome": "Outcome(42)"}, 1},
	} {
		if p := metricPoint(t, ms, obsotel.MetricDeliveries, tc.want); p.value != tc.count {
			t.Errorf("%s %v = %v, want %v", obsotel.MetricDeliveries, tc.want, p.value, tc.count)
		}
	}
	if n := len(points(t, ms[obsotel.MetricDeliveries])); n != 4 {
		t.Errorf("%s: %d data points, want 4", obsotel.MetricDeliveries, n)
	}
	if n := len(points(t, ms[obsotel.MetricLag])); n != 4 {
		t.Errorf("%s: %d data points, want 4 (by store and path)", obsotel.MetricLag, n)
	}
	var unknown int
	for _, s := range h.spans.Ended() {
		if v, ok := attr(s.Attributes(), "outbox.outcome"); ok && v.AsString() == "Outcome(42)" {
			unknown++
		}
	}
	if unknown != 1 {
		t.Errorf("%d process spans with outbox.outcome=Outcome(42), want 1", unknown)
	}
}

// timeoutError is a listener's or handler's own error type.
type timeoutError struct{}

func (*timeoutError) Error() string { return "downstream timed out" }

// A failed delivery attempt (retry, dead) or inbox processing (failed,
// retry, dead) records its duration and count with error.type, as the
// conventions require of a failed operation: the error's Go type past
// fmt.Errorf's wrapping. Other outcomes carry none, even with an error
// (put off, interrupted: not failures).
func TestFailedOperationsCarryErrorType(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env := event(t, "T", nil)
	wrapped := fmt.Errorf("listener 1 of 1: %w", &timeoutError{})
	for _, r := range []core.DeliveryResult{
		{Outcome: core.OutcomeDone, Listeners: time.Millisecond},
		{Outcome: core.OutcomeRetry, Err: wrapped, Listeners: time.Millisecond},
		{Outcome: core.OutcomeDead, Err: errors.New("boom"), Listeners: time.Millisecond},
		{Outcome: core.OutcomePutOff, Err: core.Unavailable(errors.New("broker down"), time.Second), Listeners: time.Millisecond},
		{Outcome: core.OutcomeInterrupted, Err: context.Canceled, Listeners: time.Millisecond},
	} {
		_, end := h.obs.Deliver(t.Context(), core.Delivery{Event: env, Path: core.PathHot, Attempt: 1})
		end(r)
	}
	for _, r := range []core.InboxResult{
		{Outcome: core.InboxProcessed, Took: time.Millisecond},
		{Outcome: core.InboxRetry, Err: wrapped, Took: time.Millisecond},
		{Outcome: core.InboxDead, Err: errors.New("boom"), Took: time.Millisecond},
	} {
		_, end := h.obs.ProcessInbox(t.Context(), core.InboxMessage{Topic: "T", Mode: core.InboxQueued, Attempt: 1})
		end(r)
	}
	_, end := h.obs.ProcessInbox(t.Context(), core.InboxMessage{Topic: "T", Mode: core.InboxTransactional})
	end(core.InboxResult{Outcome: core.InboxFailed, Err: wrapped, Took: time.Millisecond})

	ms := h.collect(t)
	want := map[string]map[string]string{ // metric → outcome → error.type ("" none)
		obsotel.MetricProcess:        {"done": "", "retry": "*otel_test.timeoutError", "dead": "*errors.errorString", "put_off": "", "interrupted": ""},
		obsotel.MetricDeliveries:     {"done": "", "retry": "*otel_test.timeoutError", "dead": "*errors.errorString", "put_off": "", "interrupted": ""},
		obsotel.MetricInboxProcess:   {"processed": "", "retry": "*otel_test.timeoutError", "dead": "*errors.errorString", "failed": "*otel_test.timeoutError"},
		obsotel.MetricInboxProcessed: {"processed": "", "retry": "*otel_test.timeoutError", "dead": "*errors.errorString", "failed": "*otel_test.timeoutError"},
	}
	for name, outcomes := range want {
		pts := points(t, ms[name])
		if len(pts) != len(outcomes) {
			t.Errorf("%s: %d data points, want %d", name, len(pts), len(outcomes))
		}
		for _, p := range pts {
			out, _ := p.attrs.Value("outbox.outcome")
			et, ok := p.attrs.Value("error.type")
			if wantET := outcomes[out.AsString()]; et.AsString() != wantET || ok != (wantET != "") {
				t.Errorf("%s outcome %s: error.type %q (present %v), want %q", name, out.AsString(), et.AsString(), ok, wantET)
			}
		}
	}
}

// Outcomes where nothing ran (a delivery without a listener, an inbox
// message processed before or without a handler) are counted but not
// timed: their zero would drag the duration histograms down.
func TestDurationsOnlyOfWhatRan(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env := event(t, "T", nil)
	for _, out := range []core.Outcome{core.OutcomeDone, core.OutcomeUnhandled, core.OutcomeUnhandled} {
		_, end := h.obs.Deliver(t.Context(), core.Delivery{Event: env, Path: core.PathCold, Attempt: 1})
		end(core.DeliveryResult{Outcome: out, Listeners: map[bool]time.Duration{true: time.Millisecond}[out == core.OutcomeDone]})
	}
	for _, p := range []struct {
		mode   core.InboxMode
		out    core.InboxOutcome
		notRun bool
	}{
		{core.InboxTransactional, core.InboxProcessed, false},
		{core.InboxTransactional, core.InboxDuplicate, false},
		{core.InboxQueued, core.InboxUnhandled, false},
		{core.InboxTransactional, core.InboxFailed, true}, // in progress under another lease
		{core.InboxQueued, core.InboxDead, true},          // the attempts used up
	} {
		_, end := h.obs.ProcessInbox(t.Context(), core.InboxMessage{Topic: "T", Mode: p.mode, Attempt: int(p.mode)})
		r := core.InboxResult{Outcome: p.out, NotRun: p.notRun}
		if p.notRun {
			r.Err = errors.New("nothing ran")
		}
		if p.out == core.InboxProcessed {
			r.Took = time.Millisecond
		}
		end(r)
	}
	ms := h.collect(t)
	for _, c := range []struct {
		name   string
		counts map[string]float64 // outcome → count
	}{
		{obsotel.MetricDeliveries, map[string]float64{"done": 1, "unhandled": 2}},
		{obsotel.MetricProcess, map[string]float64{"done": 1}},
		{obsotel.MetricInboxProcessed, map[string]float64{"processed": 1, "duplicate": 1, "unhandled": 1, "failed": 1, "dead": 1}},
		{obsotel.MetricInboxProcess, map[string]float64{"processed": 1}},
	} {
		got := map[string]float64{}
		for _, p := range points(t, ms[c.name]) {
			out, _ := p.attrs.Value("outbox.outcome")
			got[out.AsString()] += p.value
		}
		if fmt.Sprint(got) != fmt.Sprint(c.counts) {
			t.Errorf("%s by outcome = %v, want %v", c.name, got, c.counts)
		}
	}
}

// outbox.delivery.lag and outbox.inbox.lag measure the first delivery of
// an event, the first handling of a queued message: a retry (after its
// backoff) or a redelivery (after an outage that put the event off, or a
// wait for a listener) would add that wait to the latency.
func TestLagOfFirstDeliveriesOnly(t *testing.T) {
	h := newHarness(t, obsotel.Config{})
	env := event(t, "T", nil)
	committed := time.Now().Add(-time.Minute)
	for _, d := range []core.Delivery{
		{Event: env, Path: core.PathHot, Attempt: 1, Committed: committed},
		{Event: env, Path: core.PathRetry, Attempt: 2, Committed: committed},
		{Event: env, Path: core.PathCold, Attempt: 3, Committed: committed},
		{Event: env, Path: core.PathCold, Attempt: 1, Committed: committed, Redelivered: true}, // put off before
	} {
		_, end := h.obs.Deliver(t.Context(), d)
		end(core.DeliveryResult{Outcome: core.OutcomeDone})
	}
	enqueued := time.Now().Add(-time.Minute)
	for _, attempt := range []int{1, 2} {
		_, end := h.obs.ProcessInbox(t.Context(), core.InboxMessage{Topic: "T", Mode: core.InboxQueued, Attempt: attempt, Enqueued: enqueued})
		end(core.InboxResult{Outcome: core.InboxProcessed})
	}
	ms := h.collect(t)
	for _, name := range []string{obsotel.MetricLag, obsotel.MetricInboxLag} {
		var n float64
		for _, p := range points(t, ms[name]) {
			n += p.value
		}
		if n != 1 {
			t.Errorf("%s: %v measurements, want 1 (the first delivery)", name, n)
		}
	}
}
