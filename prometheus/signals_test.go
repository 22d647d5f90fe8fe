package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

// event returns a valid envelope of type typ.
func event(t testing.TB, typ string) core.Envelope {
	t.Helper()
	env, err := core.JSONEvent(typ, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestMetricsSignals(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	root := labels{"store": ""}

	c.HotEnqueued()
	c.HotEnqueued()
	c.ColdEnqueued()
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "", "queue": "hot"}, 2)
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "", "queue": "cold"}, 1)

	c.HotDropped()
	wantValue(t, g, "outbox_hot_dropped_total", root, 1)

	c.DispatchSuccess() // counted by the Observer side instead
	c.DispatchFailure()
	if f := family(t, g, "outbox_deliveries_total"); f != nil {
		t.Errorf("DispatchSuccess/Failure made deliveries: %v", f)
	}

	c.DispatchDead()
	wantValue(t, g, "outbox_dead_total", root, 1)

	c.QueueDepths(7, 3)
	wantValue(t, g, "outbox_queue_depth", labels{"queue": "hot"}, 7)
	wantValue(t, g, "outbox_queue_depth", labels{"queue": "cold"}, 3)
	c.QueueDepths(0, 1)
	wantValue(t, g, "outbox_queue_depth", labels{"queue": "hot"}, 0)

	c.OldestLag(1500 * time.Millisecond)
	wantValue(t, g, "outbox_oldest_pending_seconds", root, 1.5)
	c.OldestLag(-time.Second) // never negative
	wantValue(t, g, "outbox_oldest_pending_seconds", root, 0)

	c.LeaseLost(3)
	c.LeaseLost(0)
	c.LeaseLost(-1) // a counter never goes down
	wantValue(t, g, "outbox_lease_lost_total", root, 3)

	c.LeasesReaped(4)
	wantValue(t, g, "outbox_leases_reaped_total", root, 4)

	c.Replayed(5)
	wantValue(t, g, "outbox_replayed_total", root, 5)

	c.Purged(10, 2)
	wantValue(t, g, "outbox_purged_total", labels{"store": "", "status": "done"}, 10)
	wantValue(t, g, "outbox_purged_total", labels{"store": "", "status": "dead"}, 2)

	c.Unhandled("Orphan")
	c.Unhandled("Orphan")
	wantValue(t, g, "outbox_unhandled_total", labels{"store": "", "event_type": "Orphan"}, 2)

	c.BlockedKeys(6)
	wantValue(t, g, "outbox_blocked_keys", root, 6)
	c.BlockedKeys(0)
	wantValue(t, g, "outbox_blocked_keys", root, 0)

	c.Postponed()
	wantValue(t, g, "outbox_put_off_total", root, 1)
}

func TestForStore(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	if c.ForStore("") != c.ForStore("") {
		t.Error("ForStore(\"\") is not the collector's own store")
	}
	if c.ForStore("eu") != c.ForStore("eu") {
		t.Error("ForStore returns a new view each call")
	}
	for _, id := range []string{"eu", "us"} {
		m := c.ForStore(id)
		m.HotEnqueued()
		m.ColdEnqueued()
		m.HotDropped()
		m.DispatchSuccess()
		m.DispatchFailure()
		m.DispatchDead()
		m.OldestLag(2 * time.Second)
		m.LeaseLost(1)
		m.LeasesReaped(1)
		m.(core.OpsMetrics).Replayed(1)
		m.(core.OpsMetrics).Purged(1, 1)
		m.(core.UnhandledMetrics).Unhandled("T")
		m.(core.OrderMetrics).BlockedKeys(1)
		m.(core.PostponeMetrics).Postponed()
		store := labels{"store": id}
		for _, name := range []string{"outbox_hot_dropped_total", "outbox_dead_total", "outbox_oldest_pending_seconds",
			"outbox_lease_lost_total", "outbox_leases_reaped_total", "outbox_replayed_total", "outbox_blocked_keys",
			"outbox_put_off_total"} {
			want := 1.0
			if name == "outbox_oldest_pending_seconds" {
				want = 2
			}
			wantValue(t, g, name, store, want)
		}
		wantValue(t, g, "outbox_enqueued_total", labels{"store": id, "queue": "hot"}, 1)
		wantValue(t, g, "outbox_enqueued_total", labels{"store": id, "queue": "cold"}, 1)
		wantValue(t, g, "outbox_purged_total", labels{"store": id, "status": "dead"}, 1)
		wantValue(t, g, "outbox_unhandled_total", labels{"store": id, "event_type": "T"}, 1)
	}
	// The queues are shared: a store's view sets the one gauge.
	c.ForStore("eu").QueueDepths(4, 2)
	wantValue(t, g, "outbox_queue_depth", labels{"queue": "hot"}, 4)
	// Nothing leaked into the collector's own store.
	wantValue(t, g, "outbox_dead_total", labels{"store": ""}, 0)

	c.ForgetStore("eu")
	if _, m := series(t, g, "outbox_oldest_pending_seconds", labels{"store": "eu"}); m != nil {
		t.Error("ForgetStore left the store's series")
	}
	wantValue(t, g, "outbox_oldest_pending_seconds", labels{"store": "us"}, 2)
	c.ForStore("eu").DispatchDead() // a later signal creates it again
	wantValue(t, g, "outbox_dead_total", labels{"store": "eu"}, 1)
	c.ForgetStore("") // never forgets the own store
	c.DispatchDead()
	wantValue(t, g, "outbox_dead_total", labels{"store": ""}, 1)
}

// ForgetStore's promise holds for a core.Metrics taken from ForStore
// before it, as the dispatcher and the poller hold theirs: its later
// signals create the store's series again.
func TestForgetStoreThenEarlierView(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	eu := labels{"store": "eu"}
	hot := labels{"store": "eu", "queue": "hot"}
	m := c.ForStore("eu")
	m.HotEnqueued()
	c.ForgetStore("eu")
	if _, s := series(t, g, "outbox_enqueued_total", hot); s != nil {
		t.Fatal("ForgetStore left the store's series")
	}
	m.HotEnqueued()
	wantValue(t, g, "outbox_enqueued_total", hot, 1)

	m.ColdEnqueued()
	m.HotDropped()
	m.DispatchDead()
	m.OldestLag(3 * time.Second)
	m.LeaseLost(1)
	m.LeasesReaped(1)
	m.(core.OpsMetrics).Replayed(1)
	m.(core.OpsMetrics).Purged(1, 1)
	m.(core.UnhandledMetrics).Unhandled("T")
	m.(core.OrderMetrics).BlockedKeys(2)
	m.(core.PostponeMetrics).Postponed()
	for name, want := range map[string]float64{"outbox_hot_dropped_total": 1, "outbox_dead_total": 1,
		"outbox_oldest_pending_seconds": 3, "outbox_lease_lost_total": 1, "outbox_leases_reaped_total": 1,
		"outbox_replayed_total": 1, "outbox_blocked_keys": 2, "outbox_put_off_total": 1} {
		wantValue(t, g, name, eu, want)
	}
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "eu", "queue": "cold"}, 1)
	wantValue(t, g, "outbox_purged_total", labels{"store": "eu", "status": "done"}, 1)
	wantValue(t, g, "outbox_unhandled_total", labels{"store": "eu", "event_type": "T"}, 1)

	// The earlier value and the current one count on the same series, and
	// keep doing so after a second ForgetStore.
	c.ForStore("eu").HotEnqueued()
	wantValue(t, g, "outbox_enqueued_total", hot, 2)
	c.ForgetStore("eu")
	m.HotEnqueued()
	c.ForStore("eu").HotEnqueued()
	wantValue(t, g, "outbox_enqueued_total", hot, 2)
	// Other stores are untouched.
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "", "queue": "hot"}, 0)
}

// ForgetStore while signals come for the store, from a core.Metrics taken
// before and from ForStore each time: no data race (go test -race), and
// once it returned every signal lands on a series that is exported.
// An inbox processing under way when its store is forgotten counts its
// outcome on the store's series created again: it counted on deleted
// series no scrape saw, and the processing was lost from the counts.
func TestForgetStoreDuringAnInboxProcessing(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	_, end := c.ProcessInbox(context.Background(), core.InboxMessage{Store: "t1", Topic: "T", Mode: core.InboxTransactional})
	c.ForgetStore("t1")
	end(core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
	wantValue(t, g, "outbox_inbox_processed_total", labels{"store": "t1", "topic": "T", "mode": "transactional", "outcome": "processed"}, 1)
}

func TestForgetStoreConcurrentWithSignals(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	m := c.ForStore("eu")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.HotEnqueued()
				m.OldestLag(time.Second)
				c.ForStore("eu").ColdEnqueued()
				c.Claimed("eu", 1, time.Millisecond, nil)
			}
		})
	}
	for range 300 {
		c.ForgetStore("eu")
	}
	close(stop)
	wg.Wait()
	c.ForgetStore("eu")
	m.HotEnqueued()
	m.OldestLag(time.Second)
	c.ForStore("eu").ColdEnqueued()
	c.Claimed("eu", 1, time.Millisecond, nil)
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "eu", "queue": "hot"}, 1)
	wantValue(t, g, "outbox_oldest_pending_seconds", labels{"store": "eu"}, 1)
	wantValue(t, g, "outbox_enqueued_total", labels{"store": "eu", "queue": "cold"}, 1)
	wantValue(t, g, "outbox_claimed_total", labels{"store": "eu"}, 1)
}

func TestObserverPublish(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	ctx := context.Background()
	for range 3 {
		headers, done := c.Publish(ctx, event(t, "OrderPlaced"))
		if headers != nil {
			t.Errorf("Publish added headers %v", headers)
		}
		done(nil)
	}
	_, done := c.Publish(ctx, event(t, "OrderPlaced"))
	done(errors.New("insert failed"))
	wantValue(t, g, "outbox_published_total", labels{"event_type": "OrderPlaced"}, 3)
	wantValue(t, g, "outbox_publish_errors_total", labels{"event_type": "OrderPlaced"}, 1)
}

func TestObserverDeliver(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	outcomes := []core.Outcome{core.OutcomeDone, core.OutcomeRetry, core.OutcomeDead, core.OutcomePutOff,
		core.OutcomeUnhandled, core.OutcomeInterrupted}
	for i, o := range outcomes {
		path := []core.Path{core.PathHot, core.PathCold, core.PathRetry}[i%3]
		got, end := c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Store: "eu", Path: path,
			Attempt: 1, Committed: time.Now().Add(-time.Second)})
		if got != ctx {
			t.Error("Deliver changed the context")
		}
		end(core.DeliveryResult{Outcome: o, Listeners: 250 * time.Millisecond})
		wantValue(t, g, "outbox_deliveries_total",
			labels{"store": "eu", "event_type": "Shipped", "path": path.String(), "outcome": o.String()}, 1)
	}
	// The listeners ran in every attempt but the unhandled one.
	wantValue(t, g, "outbox_listener_duration_seconds", labels{"store": "eu", "event_type": "Shipped"}, 5)
	if s := histogramSum(t, g, "outbox_listener_duration_seconds", labels{"store": "eu", "event_type": "Shipped"}); s != 1.25 {
		t.Errorf("listener duration sum %v, want 1.25", s)
	}
	// Commit to listener: every first attempt, at least the second ago.
	for _, p := range []string{"hot", "cold", "retry"} {
		wantValue(t, g, "outbox_commit_to_listener_seconds", labels{"store": "eu", "path": p}, 2)
		if s := histogramSum(t, g, "outbox_commit_to_listener_seconds", labels{"store": "eu", "path": p}); s < 2 {
			t.Errorf("commit to listener sum on %s %v, want at least 2 s", p, s)
		}
	}

	// A later attempt, an unknown commit time or a commit "in the future"
	// (another node's clock) observe no latency, or 0.
	_, end := c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Path: core.PathRetry, Attempt: 2,
		Committed: time.Now().Add(-time.Minute)})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	_, end = c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Path: core.PathCold, Attempt: 1})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	wantValue(t, g, "outbox_commit_to_listener_seconds", labels{"store": "", "path": "retry"}, 0)
	wantValue(t, g, "outbox_commit_to_listener_seconds", labels{"store": "", "path": "cold"}, 0)
	_, end = c.Deliver(ctx, core.Delivery{Event: event(t, "Shipped"), Path: core.PathHot, Attempt: 1,
		Committed: time.Now().Add(time.Hour)})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	if s := histogramSum(t, g, "outbox_commit_to_listener_seconds", labels{"store": "", "path": "hot"}); s != 0 {
		t.Errorf("a commit in the future observed %v s, want 0", s)
	}
	wantValue(t, g, "outbox_deliveries_total", labels{"store": "", "event_type": "Shipped", "path": "retry", "outcome": "done"}, 1)

	// A delayed event counts from its NotBefore, not from its commit: the
	// delay is not lag.
	delayed, err := core.NewEvent("Shipped").NotBefore(time.Now().Add(-time.Second)).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	_, end = c.Deliver(ctx, core.Delivery{Event: delayed, Store: "delayed", Path: core.PathHot, Attempt: 1,
		Committed: time.Now().Add(-time.Hour)})
	end(core.DeliveryResult{Outcome: core.OutcomeDone})
	if s := histogramSum(t, g, "outbox_commit_to_listener_seconds", labels{"store": "delayed", "path": "hot"}); s < 1 || s > 60 {
		t.Errorf("a delayed event observed %v s from commit to listener, want about 1 s (from its NotBefore)", s)
	}
}

func TestObserverDoneWrittenAndClaimed(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	g := c.Gatherer()
	c.DoneWritten("", 10, 2*time.Millisecond, nil)
	c.DoneWritten("", 6, 4*time.Millisecond, errors.New("db down"))
	wantValue(t, g, "outbox_done_batch_size", labels{"store": ""}, 2)
	if s := histogramSum(t, g, "outbox_done_batch_size", labels{"store": ""}); s != 16 {
		t.Errorf("batch size sum %v, want 16", s)
	}
	wantValue(t, g, "outbox_done_write_seconds", labels{"store": ""}, 2)
	wantValue(t, g, "outbox_done_write_errors_total", labels{"store": ""}, 1)

	c.Claimed("eu", 5, time.Millisecond, nil)
	c.Claimed("eu", 0, time.Millisecond, nil)
	c.Claimed("eu", 0, time.Millisecond, errors.New("db down"))
	wantValue(t, g, "outbox_claim_seconds", labels{"store": "eu"}, 3)
	wantValue(t, g, "outbox_claimed_total", labels{"store": "eu"}, 5)
	wantValue(t, g, "outbox_claim_errors_total", labels{"store": "eu"}, 1)
}

func TestMaxEventTypes(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxEventTypes: 2})
	g := c.Gatherer()
	ctx := context.Background()
	for i := range 5 {
		_, done := c.Publish(ctx, event(t, fmt.Sprintf("T%d", i)))
		done(nil)
	}
	_, done := c.Publish(ctx, event(t, "T0")) // known types keep their label
	done(nil)
	c.Unhandled("T9")
	wantValue(t, g, "outbox_published_total", labels{"event_type": "T0"}, 2)
	wantValue(t, g, "outbox_published_total", labels{"event_type": "T1"}, 1)
	wantValue(t, g, "outbox_published_total", labels{"event_type": outboxprom.OtherEventType}, 3)
	wantValue(t, g, "outbox_unhandled_total", labels{"store": "", "event_type": outboxprom.OtherEventType}, 1)
	if f := family(t, g, "outbox_published_total"); len(f.GetMetric()) != 3 {
		t.Errorf("%d published series, want 3", len(f.GetMetric()))
	}
}

// An event type named like the label of the types past the bound is
// counted with them, as the docs say, and takes no place of its own.
func TestEventTypeNamedOther(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxEventTypes: 2})
	g := c.Gatherer()
	ctx := context.Background()
	for _, typ := range []string{outboxprom.OtherEventType, "T0", "T1", "T2"} {
		_, done := c.Publish(ctx, event(t, typ))
		done(nil)
	}
	wantValue(t, g, "outbox_published_total", labels{"event_type": "T0"}, 1)
	wantValue(t, g, "outbox_published_total", labels{"event_type": "T1"}, 1)
	wantValue(t, g, "outbox_published_total", labels{"event_type": outboxprom.OtherEventType}, 2)
}

// A label value that is not valid UTF-8 would make the client library
// panic; the collector replaces the bad bytes instead.
func TestInvalidUTF8Labels(t *testing.T) {
	c := newCollector(t, outboxprom.Config{})
	c.ForStore("bad\xff").DispatchDead()
	c.DoneWritten("bad\xff", 1, 0, nil)
	c.Claimed("bad\xff", 1, 0, nil)
	_, end := c.Deliver(context.Background(), core.Delivery{Event: event(t, "T"), Store: "bad\xff", Attempt: 1, Committed: time.Now()})
	end(core.DeliveryResult{})
	wantValue(t, c.Gatherer(), "outbox_dead_total", labels{"store": "bad\uFFFD"}, 1)
	wantValue(t, c.Gatherer(), "outbox_claimed_total", labels{"store": "bad\uFFFD"}, 1)
}

// Signals from many goroutines at once (run under -race).
func TestConcurrentSignals(t *testing.T) {
	c := newCollector(t, outboxprom.Config{MaxEventTypes: 8})
	ctx := context.Background()
	done := make(chan struct{})
	const goroutines, each = 8, 200
	for w := range goroutines {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				typ := fmt.Sprintf("T%d", (w*each+i)%16)
				_, pub := c.Publish(ctx, event(t, typ))
				pub(nil)
				_, end := c.Deliver(ctx, core.Delivery{Event: event(t, typ), Store: fmt.Sprintf("s%d", w%2), Attempt: 1})
				end(core.DeliveryResult{Outcome: core.OutcomeDone})
				c.ForStore(fmt.Sprintf("s%d", w%2)).HotEnqueued()
			}
		}()
	}
	for range goroutines {
		<-done
	}
	var total float64
	f := family(t, c.Gatherer(), "outbox_published_total")
	for _, m := range f.GetMetric() {
		total += m.GetCounter().GetValue()
	}
	if total != goroutines*each {
		t.Errorf("published %v, want %d", total, goroutines*each)
	}
	if n := len(f.GetMetric()); n != 9 {
		t.Errorf("%d event_type series, want 8 and (other)", n)
	}
}
