package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

// topicLabels returns the sorted distinct values of the topic label of the
// family name.
func topicLabels(t *testing.T, c *outboxprom.Collector, name string) []string {
	t.Helper()
	topics := map[string]bool{}
	for _, m := range family(t, c.Gatherer(), name).GetMetric() {
		for _, p := range m.GetLabel() {
			if p.GetName() == "topic" {
				topics[p.GetValue()] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(topics))
}

// The names of the inbox metrics.
const (
	inboxProcessed = "outbox_inbox_processed_total"
	inboxDuration  = "outbox_inbox_process_duration_seconds"
	inboxWait      = "outbox_inbox_enqueue_to_handler_seconds"
)

// processInbox runs one processing of m through c with the outcome r, and
// fails t unless the context comes back unchanged.
func processInbox(t testing.TB, c *outboxprom.Collector, m core.InboxMessage, r core.InboxResult) {
	t.Helper()
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	got, end := c.ProcessInbox(ctx, m)
	if got != ctx {
		t.Error("ProcessInbox changed the context")
	}
	end(r)
}

func TestInboxObserverTransactional(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	msg := core.InboxMessage{Source: "billing", MessageID: "m1", Topic: "invoice.paid", Mode: core.InboxTransactional}
	want := func(outcome string) labels {
		return labels{"store": "", "topic": "invoice.paid", "mode": "transactional", "outcome": outcome}
	}

	processInbox(t, c, msg, core.InboxResult{Outcome: core.InboxProcessed, Took: 250 * time.Millisecond})
	wantValue(t, g, inboxProcessed, want("processed"), 1)
	// The mode's other outcomes exist at 0 from the first processing on,
	// so that increase() sees their first increment.
	for _, o := range []string{"duplicate", "failed"} {
		if _, m := series(t, g, inboxProcessed, want(o)); m == nil {
			t.Errorf("no %s%v series at 0", inboxProcessed, want(o))
		}
	}
	// ...and the queued mode's do not.
	if _, m := series(t, g, inboxProcessed, want("retry")); m != nil {
		t.Errorf("a transactional retry series: %v", m)
	}

	processInbox(t, c, msg, core.InboxResult{Outcome: core.InboxDuplicate})
	processInbox(t, c, msg, core.InboxResult{Outcome: core.InboxDuplicate})
	processInbox(t, c, msg, core.InboxResult{Outcome: core.InboxFailed, Err: errors.New("business rule"), Took: 500 * time.Millisecond})
	processInbox(t, c, msg, core.InboxResult{Outcome: core.InboxFailed, Err: errors.New("in progress"), NotRun: true})
	wantValue(t, g, inboxProcessed, want("processed"), 1)
	wantValue(t, g, inboxProcessed, want("duplicate"), 2)
	wantValue(t, g, inboxProcessed, want("failed"), 2)

	// Duplicates, and the failure before the function ran, ran nothing:
	// only the processed and the first failed one are timed.
	dur := labels{"store": "", "topic": "invoice.paid", "mode": "transactional"}
	wantValue(t, g, inboxDuration, dur, 2)
	if s := histogramSum(t, g, inboxDuration, dur); s != 0.75 {
		t.Errorf("process duration sum %v, want 0.75", s)
	}
	// The transactional mode has no wait in the inbox.
	if f := family(t, g, inboxWait); f != nil {
		t.Errorf("a transactional processing observed a wait: %v", f)
	}

	// A transactional caller may give no topic.
	processInbox(t, c, core.InboxMessage{Source: "billing", MessageID: "m2"}, core.InboxResult{Outcome: core.InboxProcessed})
	wantValue(t, g, inboxProcessed, labels{"store": "", "topic": "", "mode": "transactional", "outcome": "processed"}, 1)
}

func TestInboxObserverQueued(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	enqueued := time.Now().Add(-time.Hour)
	msg := func(attempt int, enqueued time.Time) core.InboxMessage {
		return core.InboxMessage{Source: "shop", MessageID: "m1", Topic: "order.created", Store: "eu",
			Mode: core.InboxQueued, Attempt: attempt, Enqueued: enqueued}
	}
	want := func(outcome string) labels {
		return labels{"store": "eu", "topic": "order.created", "mode": "queued", "outcome": outcome}
	}
	dur := labels{"store": "eu", "topic": "order.created", "mode": "queued"}
	wait := labels{"store": "eu", "topic": "order.created"}

	// The first handling fails (retry), the second for the last time
	// (dead).
	processInbox(t, c, msg(1, enqueued), core.InboxResult{Outcome: core.InboxRetry, Err: errors.New("down"), Took: 250 * time.Millisecond})
	processInbox(t, c, msg(2, enqueued), core.InboxResult{Outcome: core.InboxDead, Err: errors.New("down"), Took: 250 * time.Millisecond})
	wantValue(t, g, inboxProcessed, want("retry"), 1)
	wantValue(t, g, inboxProcessed, want("dead"), 1)
	wantValue(t, g, inboxProcessed, want("processed"), 0)
	for _, o := range []string{"processed", "unhandled", "interrupted"} {
		if _, m := series(t, g, inboxProcessed, want(o)); m == nil {
			t.Errorf("no %s%v series at 0", inboxProcessed, want(o))
		}
	}
	if _, m := series(t, g, inboxProcessed, want("failed")); m != nil {
		t.Errorf("a queued failed series: %v", m)
	}
	wantValue(t, g, inboxDuration, dur, 2)
	if s := histogramSum(t, g, inboxDuration, dur); s != 0.5 {
		t.Errorf("process duration sum %v, want 0.5", s)
	}
	// The wait is observed for the first handling only, as the outbox's
	// commit to listener latency is: a retry's would count its backoff.
	wantValue(t, g, inboxWait, wait, 1)
	if s := histogramSum(t, g, inboxWait, wait); s < time.Hour.Seconds() {
		t.Errorf("enqueue to handler sum %v, want at least an hour", s)
	}

	// No handler: counted, not timed. An unknown enqueue time observes no
	// wait.
	processInbox(t, c, msg(1, time.Time{}), core.InboxResult{Outcome: core.InboxUnhandled, Err: errors.New("no handler")})
	wantValue(t, g, inboxProcessed, want("unhandled"), 1)
	wantValue(t, g, inboxDuration, dur, 2)
	wantValue(t, g, inboxWait, wait, 1)

	// An interrupted handler ran: it is timed.
	processInbox(t, c, msg(1, time.Time{}), core.InboxResult{Outcome: core.InboxInterrupted, Err: context.Canceled, Took: time.Second})
	wantValue(t, g, inboxProcessed, want("interrupted"), 1)
	wantValue(t, g, inboxDuration, dur, 3)

	// An enqueue time "in the future" (another node's clock) observes 0.
	future := core.InboxMessage{Source: "shop", MessageID: "m2", Topic: "order.paid", Store: "eu",
		Mode: core.InboxQueued, Attempt: 1, Enqueued: time.Now().Add(time.Hour)}
	processInbox(t, c, future, core.InboxResult{Outcome: core.InboxProcessed})
	wantValue(t, g, inboxWait, labels{"store": "eu", "topic": "order.paid"}, 1)
	if s := histogramSum(t, g, inboxWait, labels{"store": "eu", "topic": "order.paid"}); s != 0 {
		t.Errorf("an enqueue in the future observed %v s, want 0", s)
	}
	wantValue(t, g, inboxProcessed, labels{"store": "eu", "topic": "order.paid", "mode": "queued", "outcome": "processed"}, 1)

	// Nothing leaked into the dispatcher's own inbox (store "").
	wantValue(t, g, inboxProcessed, labels{"store": "", "topic": "order.created", "mode": "queued", "outcome": "retry"}, 0)

	// The series of an inbox removed from its dispatcher are forgotten,
	// and come back, from 0, with its next message.
	c.ForgetStore("eu")
	if f := family(t, g, inboxProcessed); f != nil {
		t.Errorf("ForgetStore left %v", f)
	}
	processInbox(t, c, msg(1, enqueued), core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
	wantValue(t, g, inboxProcessed, want("processed"), 1)
	wantValue(t, g, inboxProcessed, want("retry"), 0)
	wantValue(t, g, inboxDuration, dur, 1)
	wantValue(t, g, inboxWait, wait, 1)
}

// Topics are bounded by Config.MaxEventTypes as event types are, counted
// apart from them.
func TestInboxMaxTopics(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxEventTypes: 2})
	g := c.Gatherer()
	ctx := context.Background()
	for i := range 5 { // event types use up their own bound, not the topics'
		_, done := c.Publish(ctx, event(t, fmt.Sprintf("T%d", i)))
		done(nil)
	}
	const n = 1000
	for i := range n {
		mode := []core.InboxMode{core.InboxTransactional, core.InboxQueued}[i%2]
		processInbox(t, c, core.InboxMessage{Source: "s", MessageID: fmt.Sprint(i), Topic: fmt.Sprintf("topic-%d", i),
			Mode: mode, Attempt: int(mode), Enqueued: time.Now()}, core.InboxResult{Outcome: core.InboxProcessed})
	}
	processInbox(t, c, core.InboxMessage{Topic: "topic-0"}, core.InboxResult{Outcome: core.InboxProcessed}) // keeps its label

	wantValue(t, g, inboxProcessed, labels{"topic": "topic-0", "mode": "transactional", "outcome": "processed"}, 2)
	wantValue(t, g, inboxProcessed, labels{"topic": "topic-1", "mode": "queued", "outcome": "processed"}, 1)
	other := outboxprom.OtherEventType
	wantValue(t, g, inboxProcessed, labels{"topic": other, "mode": "transactional", "outcome": "processed"}, n/2-1)
	wantValue(t, g, inboxProcessed, labels{"topic": other, "mode": "queued", "outcome": "processed"}, n/2-1)
	wantValue(t, g, inboxWait, labels{"topic": other}, n/2-1)
	for name, want := range map[string][]string{
		inboxProcessed: {other, "topic-0", "topic-1"}, // sorted: "(" comes first
		inboxDuration:  {other, "topic-0", "topic-1"},
		inboxWait:      {other, "topic-1"}, // topic-0 came in the transactional mode only
	} {
		if got := topicLabels(t, c, name); !slices.Equal(got, want) {
			t.Errorf("%s topics %v, want %v", name, got, want)
		}
	}
	// The event types kept their own two labels and "(other)".
	if f := family(t, g, "outbox_published_total"); len(f.GetMetric()) != 3 {
		t.Errorf("%d published series, want 3", len(f.GetMetric()))
	}
	wantValue(t, g, "outbox_published_total", labels{"event_type": "T1"}, 1)
}

func TestInboxInvalidUTF8Labels(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	processInbox(t, c, core.InboxMessage{Topic: "bad\xff", Store: "s\xff", Mode: core.InboxQueued, Attempt: 1,
		Enqueued: time.Now()}, core.InboxResult{Outcome: core.InboxRetry})
	g := c.Gatherer()
	wantValue(t, g, inboxProcessed, labels{"store": "s\uFFFD", "topic": "bad\uFFFD", "mode": "queued", "outcome": "retry"}, 1)
	wantValue(t, g, inboxWait, labels{"store": "s\uFFFD", "topic": "bad\uFFFD"}, 1)
}

// ProcessInbox from many goroutines at once (run under -race).
func TestInboxConcurrent(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxEventTypes: 8})
	done := make(chan struct{})
	const goroutines, each = 8, 200
	for w := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				_, end := c.ProcessInbox(context.Background(), core.InboxMessage{
					Topic: fmt.Sprintf("t%d", (w*each+i)%16), Store: fmt.Sprintf("s%d", w%2),
					Mode: core.InboxQueued, Attempt: 1, Enqueued: time.Now()})
				end(core.InboxResult{Outcome: core.InboxProcessed})
			}
		}()
	}
	for range goroutines {
		<-done
	}
	var total float64
	for _, m := range family(t, c.Gatherer(), inboxProcessed).GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if total != goroutines*each {
		t.Errorf("processed %v, want %d", total, goroutines*each)
	}
	if n := len(topicLabels(t, c, inboxProcessed)); n != 9 {
		t.Errorf("%d topic labels, want 8 and (other)", n)
	}
}

// A real inbox over SQLite, in the transactional mode (which reports
// before Process returns), with the collector as its observer.
func TestInboxRealTransactional(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t, outboxprom.Config{})
	db := sqliteDB(t, "inbox.db")
	in, err := inbox.New(ctx, db, inbox.Config{Observer: col})
	if err != nil {
		t.Fatal(err)
	}
	// ProcessTx in the caller's business transaction, committed when fn
	// succeeds.
	process := func(id string, fn func(context.Context) error) error {
		t.Helper()
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := in.ProcessTx(ctx, tx, inbox.Message{Source: "billing", MessageID: id, Topic: "invoice.paid"}, fn); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := process("m0", func(context.Context) error { return errors.New("business rule") }); err == nil {
		t.Fatal("a failing business function succeeded")
	}
	for range 2 { // processed, then a duplicate
		if err := process("m1", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	g := col.Gatherer()
	want := func(outcome string) labels {
		return labels{"store": "", "topic": "invoice.paid", "mode": "transactional", "outcome": outcome}
	}
	wantValue(t, g, inboxProcessed, want("processed"), 1)
	wantValue(t, g, inboxProcessed, want("duplicate"), 1)
	wantValue(t, g, inboxProcessed, want("failed"), 1)
	wantValue(t, g, inboxDuration, labels{"store": "", "topic": "invoice.paid", "mode": "transactional"}, 2)
}

// An inbox of a dispatcher of several, given an id, creates its inbox
// series and nothing else: no outbox series (queues, lag, DEAD, claims)
// labelled with an id that names no outbox store, which would show as a
// store in the outbox's dashboards and alerts. ForgetStore deletes its
// series all the same, and a later processing creates them again.
func TestInboxStoreCreatesOnlyInboxSeries(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	processInbox(t, c, core.InboxMessage{Topic: "T", Store: "inbox-a", Mode: core.InboxQueued, Attempt: 1, Enqueued: time.Now()},
		core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels{"store": "inbox-a"}) && !strings.HasPrefix(f.GetName(), "outbox_inbox_") {
				t.Errorf("%s has a series for the inbox store inbox-a", f.GetName())
			}
		}
	}
	wantValue(t, g, inboxProcessed, labels{"store": "inbox-a", "topic": "T", "mode": "queued", "outcome": "processed"}, 1)
	c.ForgetStore("inbox-a")
	if _, m := series(t, g, inboxProcessed, labels{"store": "inbox-a", "outcome": "processed"}); m != nil {
		t.Error("ForgetStore left the inbox store's series")
	}
	processInbox(t, c, core.InboxMessage{Topic: "T", Store: "inbox-a", Mode: core.InboxQueued, Attempt: 1},
		core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
	wantValue(t, g, inboxProcessed, labels{"store": "inbox-a", "topic": "T", "mode": "queued", "outcome": "processed"}, 1)
	// A store that is both an outbox store and an inbox keeps both sets.
	c.ForStore("inbox-a").HotEnqueued()
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "inbox-a", "queue": "hot"}, 1)
	wantValue(t, g, inboxProcessed, labels{"store": "inbox-a", "topic": "T", "mode": "queued", "outcome": "processed"}, 1)
}
