package prometheus_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
	outboxprom "github.com/outbox-go/outbox/prometheus"
	"github.com/outbox-go/outbox/retry"
)

// TestScrapeRealOutbox runs an outbox over SQLite with the collector as
// its Metrics and Observer: events delivered on the hot path, one that
// fails once (a retry), one that always fails (DEAD, replayed, DEAD
// again), one whose downstream is down once (put off), one without a
// listener and one delivered by the poller. It then drives every other
// signal, serves the metrics over HTTP, scrapes and parses them, checks
// what the outbox did, and checks that every metric the dashboard and the
// alert rules use exists.
func TestScrapeRealOutbox(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t, outboxprom.Config{})
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "ob.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ob, err := outbox.New(ctx, db, outbox.Config{
		Metrics:  col,
		Observer: col,
		Dispatcher: dispatcher.Config{Workers: 4, MaxAttempts: 2,
			Retry: retry.PolicyFunc(func(int) time.Duration { return 10 * time.Millisecond })},
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: -1},
	})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string]int{} // listener calls by event type
	call := func(typ string) int {
		mu.Lock()
		defer mu.Unlock()
		seen[typ]++
		return seen[typ]
	}
	ob.RegisterFunc("Ok", func(context.Context, core.Envelope) error { call("Ok"); return nil })
	ob.RegisterFunc("Cold", func(context.Context, core.Envelope) error { call("Cold"); return nil })
	ob.RegisterFunc("Flaky", func(context.Context, core.Envelope) error {
		if call("Flaky") == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	})
	ob.RegisterFunc("Broken", func(context.Context, core.Envelope) error {
		call("Broken")
		return errors.New("always fails")
	})
	ob.RegisterFunc("Down", func(context.Context, core.Envelope) error {
		if call("Down") == 1 {
			return core.Unavailable(errors.New("broker unreachable"), 10*time.Millisecond)
		}
		return nil
	})
	start(t, ctx, ob)

	publish := func(typ string) string {
		t.Helper()
		env, err := outbox.JSONEvent(typ, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		var id string
		if err := ob.InTx(ctx, func(ctx context.Context) error {
			id, err = ob.Publish(ctx, env)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for range 3 {
		publish("Ok")
	}
	publish("Flaky")
	broken := publish("Broken")
	publish("Down")
	publish("Nobody") // no listener: marked DONE, counted unhandled

	// A plain transaction has no after-commit hook: the poller delivers it.
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := outbox.JSONEvent("Cold", `{}`)
	if _, err := ob.PublishTx(ctx, tx, env); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The same event again: its id is taken, the insert fails.
	if err := ob.InTx(ctx, func(ctx context.Context) error {
		_, err := ob.Publish(ctx, env)
		return err
	}); err == nil {
		t.Fatal("a second insert of one event succeeded")
	}

	counts := func() map[core.Status]int {
		c, err := ob.CountByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	settled := func(done, dead int) func() bool {
		return func() bool { c := counts(); return c[core.StatusDone] == done && c[core.StatusDead] == dead }
	}
	testsupport.WaitFor(t, 30*time.Second, "7 events DONE and 1 DEAD", settled(7, 1))

	// Replay the DEAD event: it fails twice more and is DEAD again.
	res, err := ob.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{broken}}, jdbcstore.ReplayOptions{})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the replayed event DEAD again", func() bool {
		r, err := ob.Get(ctx, broken)
		return err == nil && r.Status == core.StatusDead && r.Attempts == 2
	})
	// The DONE writes are coalesced and may come after the status count;
	// the hot-path deliveries all reported DoneWritten once the rows are
	// DONE, since the write precedes the count.
	g := col.Gatherer()
	testsupport.WaitFor(t, 30*time.Second, "the DONE writes observed", func() bool {
		return histogramSum(t, g, "outbox_done_batch_size", labels{"store": ""}) >= 7
	})

	driveEverySignal(t, col)

	srv := httptest.NewServer(col.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)

	get := func(name string, want labels) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("scrape lacks %s", name)
		}
		var sum float64
		for _, m := range f.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return sum
	}
	atLeast := func(name string, want labels, min float64) {
		t.Helper()
		if got := get(name, want); got < min {
			t.Errorf("%s%v = %v, want at least %v", name, want, got, min)
		}
	}
	own := func(l labels) labels { l["store"] = ""; return l }
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Ok", "path": "hot", "outcome": "done"}), 3)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Flaky", "outcome": "retry"}), 1)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Flaky", "path": "retry", "outcome": "done"}), 1)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Broken", "outcome": "dead"}), 2)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Down", "outcome": "put_off"}), 1)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Down", "outcome": "done"}), 1)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Nobody", "outcome": "unhandled"}), 1)
	atLeast("outbox_deliveries_total", own(labels{"event_type": "Cold", "path": "cold", "outcome": "done"}), 1)
	atLeast("outbox_published_total", labels{"event_type": "Ok"}, 3)
	atLeast("outbox_published_total", labels{"event_type": "Cold"}, 1)
	atLeast("outbox_publish_errors_total", labels{"event_type": "Cold"}, 1)
	atLeast("outbox_dead_total", own(labels{}), 2)
	atLeast("outbox_replayed_total", own(labels{}), 1)
	atLeast("outbox_put_off_total", own(labels{}), 1)
	atLeast("outbox_unhandled_total", own(labels{"event_type": "Nobody"}), 1)
	atLeast("outbox_enqueued_total", own(labels{"queue": "hot"}), 7)
	atLeast("outbox_enqueued_total", own(labels{"queue": "cold"}), 1)
	atLeast("outbox_commit_to_listener_seconds", own(labels{"path": "hot"}), 7)
	atLeast("outbox_commit_to_listener_seconds", own(labels{"path": "cold"}), 1)
	atLeast("outbox_listener_duration_seconds", own(labels{"event_type": "Ok"}), 3)
	atLeast("outbox_claim_seconds", own(labels{}), 1)
	atLeast("outbox_claimed_total", own(labels{}), 1)
	atLeast("outbox_done_write_seconds", own(labels{}), 1)
	atLeast("outbox_inbox_processed_total", own(labels{"topic": "order.created", "mode": "transactional", "outcome": "processed"}), 1)
	atLeast("outbox_inbox_process_duration_seconds", labels{"store": "tenant-a", "mode": "queued"}, 1)
	atLeast("outbox_inbox_enqueue_to_handler_seconds", labels{"store": "tenant-a", "topic": "order.created"}, 1)

	// Every metric the dashboard and the alert rules query exists.
	used := map[string][]string{} // metric name → where
	for _, expr := range dashboardExprs(t, filepath.Join("dashboards", "outbox.json")) {
		for _, n := range metricNames(expr) {
			used[n] = append(used[n], "dashboard")
		}
	}
	for _, expr := range ruleExprs(t, filepath.Join("alerts", "outbox-rules.yml")) {
		for _, n := range metricNames(expr) {
			used[n] = append(used[n], "rules")
		}
	}
	if len(used) < 15 {
		t.Fatalf("only %d metric names found in the dashboard and rules: %v", len(used), used)
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range used {
			if !yield(n) {
				return
			}
		}
	}) {
		if !exposed(fams, n) {
			t.Errorf("%s (used by %v) is not exposed", n, slices.Compact(used[n]))
		}
	}
}

// driveEverySignal calls the signals a small test outbox does not make by
// itself, for the collector's own store and a tenant's.
func driveEverySignal(t *testing.T, c *outboxprom.Collector) {
	for _, m := range []core.Metrics{c, c.ForStore("tenant-a")} {
		m.HotDropped()
		m.LeaseLost(1)
		m.LeasesReaped(1)
		m.QueueDepths(1, 2)
		m.OldestLag(3 * time.Second)
		m.(core.OpsMetrics).Purged(4, 5)
		m.(core.OrderMetrics).BlockedKeys(1)
	}
	c.DoneWritten("tenant-a", 3, time.Millisecond, errors.New("db down"))
	c.Claimed("tenant-a", 0, time.Millisecond, errors.New("db down"))
	for _, m := range []core.InboxMessage{
		{Source: "shop", MessageID: "1", Topic: "order.created", Mode: core.InboxTransactional},
		{Source: "shop", MessageID: "2", Topic: "order.created", Store: "tenant-a", Mode: core.InboxQueued,
			Attempt: 1, Enqueued: time.Now().Add(-time.Second)},
	} {
		_, end := c.ProcessInbox(context.Background(), m)
		end(core.InboxResult{Outcome: core.InboxProcessed, Took: time.Millisecond})
	}
}

// scrape GETs url and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape: content type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// exposed reports whether name is a family of fams, or the _bucket, _sum
// or _count series of a histogram family.
func exposed(fams map[string]*dto.MetricFamily, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
	}
	return false
}

// metricRE matches the outbox metric names in a PromQL expression.
var metricRE = regexp.MustCompile(`\boutbox_[a-zA-Z0-9_]+`)

func metricNames(expr string) []string { return metricRE.FindAllString(expr, -1) }

// dashboardExprs returns the query expressions of a Grafana dashboard:
// every target's "expr" and every templating variable's query.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			if key == "expr" || key == "query" || key == "definition" {
				exprs = append(exprs, v)
			}
		}
	}
	walk(dash, "")
	return exprs
}

// ruleExprs returns the expr fields of a Prometheus rules file, with the
// continuation lines of a folded (">-") expression. A small reader for the
// file's own layout: the module takes no YAML dependency for a test.
func ruleExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		v, ok := strings.CutPrefix(trimmed, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == ">-" || v == "|" || v == ">" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			v = ""
			for i+1 < len(lines) {
				next := lines[i+1]
				if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
					break
				}
				v += " " + strings.TrimSpace(next)
				i++
			}
		}
		exprs = append(exprs, v)
	}
	if len(exprs) == 0 {
		t.Fatalf("%s: no expr found", path)
	}
	return exprs
}
