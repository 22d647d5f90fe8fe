package dashboard_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/jdbcstore"
)

// gatedStore holds every ListDeadSummaries until released, counting the calls in
// progress.
type gatedStore struct {
	*jdbcstore.Store
	in, most atomic.Int32
	entered  chan struct{}
	release  chan struct{}
}

func (g *gatedStore) ListDeadSummaries(ctx context.Context, f jdbcstore.DeadFilter, after string, limit int) ([]jdbcstore.DeadSummary, error) {
	n := g.in.Add(1)
	defer g.in.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	g.entered <- struct{}{}
	<-g.release
	return g.Store.ListDeadSummaries(ctx, f, after, limit)
}

func TestMaxConcurrentReadsBoundsDatabaseCalls(t *testing.T) {
	g := &gatedStore{Store: newStore(t), entered: make(chan struct{}, 8), release: make(chan struct{})}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: g, MaxConcurrentReads: 1}))
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 3 {
		wg.Go(func() {
			code, _ := c.get("/dead")
			codes <- code
		})
	}
	for i := range 3 {
		select {
		case <-g.entered: // one call in, the others wait for its slot
		case <-time.After(time.Minute):
			t.Fatalf("call %d never reached the store", i)
		}
		if n := g.in.Load(); n != 1 {
			t.Errorf("%d calls in the store at once, want 1", n)
		}
		g.release <- struct{}{}
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("GET /dead = %d", code)
		}
	}
	if m := g.most.Load(); m != 1 {
		t.Errorf("at most %d calls at once, want 1", m)
	}
}

func TestStaleFiguresAreServedWhileRefreshed(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, StatsMaxAge: time.Nanosecond}))
	_, body := c.get("/")
	mustContain(t, body, `id="count-DEAD">1<`)
	seed(t, st, event{id: "x2", typ: "A", status: core.StatusDead})
	// Each load answers with the figures at hand and refreshes them in
	// the background: the new count shows up on a later load.
	deadline := time.Now().Add(time.Minute)
	for {
		_, body = c.get("/")
		if code, _ := c.get("/"); code != http.StatusOK {
			t.Fatalf("GET / = %d", code)
		}
		if stringsContains(body, `id="count-DEAD">2<`) {
			return
		}
		if !stringsContains(body, `id="count-DEAD">1<`) {
			t.Fatalf("unexpected count:\n%s", body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the figures were never refreshed")
		}
		time.Sleep(5 * time.Millisecond) // poll: the refresh runs in the background
	}
}
