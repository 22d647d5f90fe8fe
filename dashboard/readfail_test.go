package dashboard_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/jdbcstore"
)

// failingStats is a store whose StatsWith fails while failing is set.
type failingStats struct {
	*jdbcstore.Store
	failing atomic.Bool
}

func (s *failingStats) StatsWith(ctx context.Context, o jdbcstore.StatsOptions) (jdbcstore.Stats, error) {
	if s.failing.Load() {
		return jdbcstore.Stats{}, errors.New("connection refused")
	}
	return s.Store.StatsWith(ctx, o)
}

// chanHandler hands every log record's message to a channel.
type chanHandler struct{ msgs chan string }

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }

// A refresh of the overview's figures that fails in the background, the
// page being served the older figures meanwhile, is logged (Config.Logger
// receives failed database reads) and the page says the figures are old
// and why; it was dropped silently.
func TestOverviewRefreshFailureIsLoggedAndShown(t *testing.T) {
	st := &failingStats{Store: newStore(t)}
	seed(t, st.Store, event{id: "d-1", typ: "A", status: core.StatusDead})
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC).UnixNano())
	logs := chanHandler{msgs: make(chan string, 16)}
	srv := newDashboard(t, dashboard.Config{
		Store: st, StatsMaxAge: time.Second, Logger: slog.New(logs),
		Now: func() time.Time { return time.Unix(0, now.Load()).UTC() },
	})
	c := newClient(t, srv)
	if code, body := c.get("/"); code != 200 {
		t.Fatalf("overview: %d\n%s", code, body)
	}
	st.failing.Store(true)
	now.Add(int64(time.Minute))
	// Old figures at once; their refresh starts, and fails.
	if code, body := c.get("/"); code != 200 {
		t.Fatalf("overview with old figures: %d\n%s", code, body)
	}
	deadline := time.After(30 * time.Second)
	for logged := false; !logged; {
		select {
		case m := <-logs.msgs:
			logged = m == "outbox dashboard: reading the overview failed"
		case <-deadline:
			t.Fatal("the failed refresh of the overview was not logged")
		}
	}
	code, body := c.get("/")
	if code != 200 {
		t.Fatalf("overview after a failed refresh: %d\n%s", code, body)
	}
	mustContain(t, body, `id="read-failed"`, "connection refused", "2026-11-24 12:01:00.000 UTC")
}
