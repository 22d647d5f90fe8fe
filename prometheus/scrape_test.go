package prometheus_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	outboxprom "github.com/outbox-go/outbox/prometheus"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/retry"
)

// TestScrapeRealOutbox runs an outbox over SQLite with the collector as
// its Metrics and Observer: events delivered on the hot path, one that
// fails once (a retry), one that always fails (DEAD, replayed, DEAD
// again), one whose downstream is down once (put off), one without a
// listener and one delivered by the poller. It then drives every other
// signal, a relay's included, serves the metrics over HTTP, scrapes and
// parses them, checks what the outbox did, and checks that every metric
// the dashboard and the alert rules use exists.
func TestScrapeRealOutbox(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t, outboxprom.Config{})
	db := sqliteDB(t, "ob.db")
	ob, err := outbox.New(ctx, db, outbox.Config{
		Metrics:  col,
		Observer: col,
		Dispatcher: dispatcher.Config{Workers: 4, MaxAttempts: 2,
			Retry: retry.PolicyFunc(func(int) time.Duration { return 10 * time.Millisecond })},
		Poller: poller.Config{Interval: 50 * time.Millisecond}, // the default SkipRecent: new rows go hot (see redelivery_test.go)
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
	driveRelay(t, col)

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
	atLeast("outbox_relay_broker_up", labels{"broker": scrapedBroker}, 1)
	atLeast("outbox_relay_outages_total", labels{"broker": scrapedBroker}, 1)
	atLeast("outbox_relay_full_destinations", labels{"broker": scrapedBroker}, 1)

	// Every metric the dashboard and the alert rules query exists: every
	// metric name of every query, whatever its prefix, and every query
	// names one (a query the reader cannot see into fails rather than
	// pass unchecked).
	used := map[string][]string{} // metric name → where
	queries := dashboardExprs(t, filepath.Join("dashboards", "outbox.json"))
	for _, expr := range queries.promql {
		names := selectorNames(expr)
		if len(names) == 0 {
			t.Errorf("dashboard query %q names no metric", expr)
		}
		for _, n := range names {
			used[n] = append(used[n], "dashboard")
		}
	}
	for _, q := range queries.variables {
		for _, n := range variableMetrics(q) {
			used[n] = append(used[n], "dashboard variables")
		}
	}
	rules := ruleExprs(t, filepath.Join("alerts", "outbox-rules.yml"))
	if len(rules) < 8 {
		t.Fatalf("only %d rule expressions read: %q", len(rules), rules)
	}
	for _, expr := range rules {
		names := selectorNames(expr)
		if len(names) == 0 {
			t.Errorf("rule expression %q names no metric", expr)
		}
		for _, n := range names {
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

// scrapedBroker is the broker of driveRelay's relay.
const scrapedBroker = "nats jetstream nats://127.0.0.1:4222"

// driveRelay runs a relay's Breaker and Full with the collector as their
// Metrics, as a natsjs or rabbitmq relay given it as Config.Metrics does:
// an outage that ends, and a stream left full.
func driveRelay(t *testing.T, c *outboxprom.Collector) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	b, err := relay.NewBreaker(relay.BreakerConfig{Name: scrapedBroker, Logger: quiet, Metrics: c})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Down(errors.New("nats: connection closed"))
	b.Up()
	f := relaytest.Full(t, relay.FullConfig{Name: scrapedBroker, Logger: quiet, Metrics: c})
	_ = f.Refused("orders.created", errors.New("nats: maximum messages exceeded"), func() string { return "ORDERS" })
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

// promqlKeywords are the words of PromQL that are neither metric nor
// function names: aggregation operators (which may take their grouping
// before their parentheses), grouping and matching modifiers, set and
// comparison operators, and the number literals.
var promqlKeywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "atan2": true, "offset": true, "inf": true, "nan": true,
}

// labelListKeywords are followed by a parenthesized list of label names.
var labelListKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// selectorNames returns the metric names of the selectors of a PromQL
// expression, whatever their prefix: every identifier that is not a
// keyword, a function (followed by "("), a label name (inside {…} or the
// list of by, without, on, ignoring, group_left, group_right), a string,
// a range or subquery ([…]), a number or duration, or a Grafana variable.
// A metric selected as {__name__="x"} is not seen: the outbox's files do
// not use that form.
func selectorNames(expr string) []string {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || '0' <= c && c <= '9' }
	// skipString returns the index after the string opening at i.
	skipString := func(i int) int {
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	// skipTo returns the index after the first close outside strings from i.
	skipTo := func(i int, close byte) int {
		for i < len(expr) && expr[i] != close {
			if c := expr[i]; c == '"' || c == '\'' || c == '`' {
				i = skipString(i)
				continue
			}
			i++
		}
		return i + 1
	}
	labelList := false // the next "(" opens a list of label names
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case c == '{':
			i = skipTo(i+1, '}')
		case c == '[':
			i = skipTo(i+1, ']')
		case c == '(' && labelList:
			i, labelList = skipTo(i+1, ')'), false
		case c == '$' || '0' <= c && c <= '9' || c == '.':
			// A Grafana variable ($x, ${x}), a number or a duration.
			for i++; i < len(expr) && (isPart(expr[i]) || expr[i] == '.' || expr[i] == '{' || expr[i] == '}'); i++ {
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			switch lower := strings.ToLower(word); {
			case promqlKeywords[lower]:
				labelList = labelList || labelListKeywords[lower]
			case k < len(expr) && expr[k] == '(':
				// a function
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

// variableMetrics returns the metric names of a Grafana query variable:
// the selector of label_values(selector, label), nothing for another
// query (label_values(label), the data source variable's "prometheus").
func variableMetrics(query string) []string {
	inner, ok := strings.CutPrefix(strings.TrimSpace(query), "label_values(")
	i := strings.LastIndex(inner, ",")
	if !ok || i < 0 {
		return nil
	}
	return selectorNames(inner[:i])
}

// TestSelectorNames checks the reader of metric names the scrape test
// relies on: it must see every selector, whatever its prefix, and nothing
// else, or a dashboard query or an alert rule could use a metric the
// collector does not expose and the scrape test pass all the same.
func TestSelectorNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (job, store) (increase(outbox_dead_total[15m])) > 0`, []string{"outbox_dead_total"}},
		{`histogram_quantile(0.99, sum by (le, path) (rate(outbox_commit_to_listener_seconds_bucket{job=~"$job", store=~"$store"}[$__rate_interval])))`,
			[]string{"outbox_commit_to_listener_seconds_bucket"}},
		{`sum(rate(published_total[5m])) / ignoring(store) group_left(event_type) sum without (path) (rate(outbox_deliveries_total{outcome="done"}[5m]))`,
			[]string{"published_total", "outbox_deliveries_total"}},
		{`max by (job, store) (outbox_oldest_pending_seconds offset 1h) > bool 60 or on(job) vector(0) unless absent(up{job="a}b"})`,
			[]string{"outbox_oldest_pending_seconds", "up"}},
		{`SUM BY (store) (outbx_put_off_total)`, []string{"outbx_put_off_total"}},
		{`topk(5, count_values("v", outbox:lag:max5m))`, []string{"outbox:lag:max5m"}},
		{`sum(rate(outbox_done_batch_size_sum[$__rate_interval])) / sum(rate(outbox_done_batch_size_count[$__rate_interval]))`,
			[]string{"outbox_done_batch_size_sum", "outbox_done_batch_size_count"}},
	} {
		if got := selectorNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("selectorNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
	for q, want := range map[string][]string{
		`label_values(outbox_oldest_pending_seconds{job=~"$job"}, store)`: {"outbox_oldest_pending_seconds"},
		`label_values(outbox_queue_depth, job)`:                           {"outbox_queue_depth"},
		`label_values(job)`:                                               nil,
		`prometheus`:                                                      nil,
	} {
		if got := variableMetrics(q); !slices.Equal(got, want) {
			t.Errorf("variableMetrics(%q) = %q, want %q", q, got, want)
		}
	}
}

// dashboardQueries are the queries of a Grafana dashboard.
type dashboardQueries struct {
	promql    []string // every target's "expr"
	variables []string // the templating variables' queries ("query", "definition")
}

// dashboardExprs returns the queries of a Grafana dashboard.
func dashboardExprs(t *testing.T, path string) dashboardQueries {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var q dashboardQueries
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
			switch key {
			case "expr":
				q.promql = append(q.promql, v)
			case "query", "definition":
				q.variables = append(q.variables, v)
			}
		}
	}
	walk(dash, "")
	if len(q.promql) < 20 {
		t.Fatalf("%s: only %d queries found", path, len(q.promql))
	}
	return q
}

// ruleExprs returns the expr fields of a Prometheus rules file, with the
// continuation lines of a block (">-", "|-", …) expression. A small reader for the
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
		if v != "" && (v[0] == '>' || v[0] == '|') { // a block scalar: >-, |, |-, >+…
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

// TestDashboardVariablesFromTheStart checks that the dashboard's
// variables find a job as soon as its outbox runs, before any poll, and
// when it runs no poller at all (Poller.Disabled): a variable over a
// series only a poll reports would leave such a job out of the drop-down
// and every panel.
func TestDashboardVariablesFromTheStart(t *testing.T) {
	ctx := context.Background()
	col := newCollector(t, outboxprom.Config{})
	db := sqliteDB(t, "ob.db")
	ob, err := outbox.New(ctx, db, outbox.Config{Metrics: col, Observer: col, DisablePoller: true})
	if err != nil {
		t.Fatal(err)
	}
	start(t, ctx, ob)
	srv := httptest.NewServer(col.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	queries := dashboardExprs(t, filepath.Join("dashboards", "outbox.json"))
	checked := 0
	for _, q := range queries.variables {
		for _, n := range variableMetrics(q) {
			checked++
			if !exposed(fams, n) {
				t.Errorf("dashboard variable %q: %s is not exposed before the first poll", q, n)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no dashboard variable names a metric")
	}
}
