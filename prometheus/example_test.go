package prometheus_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	outboxprom "github.com/outbox-go/outbox/prometheus"
)

// One Collector as the outbox's Metrics and Observer, its metrics served
// on /metrics.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-prometheus-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()

	col, err := outboxprom.New(outboxprom.Config{}) // Registerer: prometheus.DefaultRegisterer to join the process's metrics
	if err != nil {
		panic(err)
	}
	ob, err := outbox.New(ctx, db, outbox.Config{Metrics: col, Observer: col})
	if err != nil {
		panic(err)
	}
	ob.RegisterFunc("UserCreated", func(context.Context, outbox.Envelope) error { return nil })
	if err := ob.Start(ctx); err != nil {
		panic(err)
	}
	defer ob.Close(context.Background())

	mux := http.NewServeMux()
	mux.Handle("/metrics", col.Handler())
	srv := httptest.NewServer(mux) // http.ListenAndServe(":9090", mux) in a program
	defer srv.Close()

	err = ob.InTx(ctx, func(ctx context.Context) error {
		env, err := outbox.JSONEvent("UserCreated", `{"name":"Ada"}`)
		if err != nil {
			return err
		}
		_, err = ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		panic(err)
	}
	waitDelivered(col.Gatherer())

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "outbox_deliveries_total{") || strings.HasPrefix(l, "outbox_published_total{") {
			fmt.Println(l)
		}
	}
	// Output:
	// outbox_deliveries_total{event_type="UserCreated",outcome="dead",path="hot",store=""} 0
	// outbox_deliveries_total{event_type="UserCreated",outcome="done",path="hot",store=""} 1
	// outbox_deliveries_total{event_type="UserCreated",outcome="retry",path="hot",store=""} 0
	// outbox_published_total{event_type="UserCreated"} 1
}

// waitDelivered waits, up to 30 s, until g counts a delivery: the outcome
// is recorded just after the listener returns.
func waitDelivered(g prom.Gatherer) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err := testutil.GatherAndCount(g, "outbox_deliveries_total"); err == nil && n > 0 {
			return
		}
	}
}
