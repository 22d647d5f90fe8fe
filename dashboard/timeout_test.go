package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
)

// answerWithin bounds how long a test waits for a page whose database
// hangs: far above the QueryTimeout the tests set, so that only a page
// waiting for the database itself (the client's patience) overruns it.
const answerWithin = 30 * time.Second

// getWithin loads path as get does, failing the test when no answer comes
// within answerWithin.
func (c *client) getWithin(path string) (int, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), answerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do(req)
}

// tryGet loads path as get does (without the cookies), reporting an
// answer that does not come within answerWithin as an error: for other
// goroutines than the test's.
func (c *client) tryGet(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(c.t.Context(), answerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.srv.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	res, err := c.c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// postWithin sends form as post does, failing the test when no answer
// comes within answerWithin.
func (c *client) postWithin(path string, form url.Values) (int, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), answerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return c.do(req)
}

// stuck makes the calls of a store or inbox wait, while it is set, until
// their ctx ends, as a query waiting for a row lock another transaction
// holds, or for a server behind a network blackhole, does.
type stuck struct{ on atomic.Bool }

func (s *stuck) wait(ctx context.Context) error {
	if !s.on.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

// stuckStore is a store whose every call waits while it is stuck.
type stuckStore struct {
	*jdbcstore.Store
	stuck
}

func (s *stuckStore) StatsWith(ctx context.Context, o jdbcstore.StatsOptions) (jdbcstore.Stats, error) {
	if err := s.wait(ctx); err != nil {
		return jdbcstore.Stats{}, err
	}
	return s.Store.StatsWith(ctx, o)
}

func (s *stuckStore) DeadTypes(ctx context.Context, offset, limit int) ([]jdbcstore.DeadTypeCount, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.DeadTypes(ctx, offset, limit)
}

func (s *stuckStore) Activity(ctx context.Context, buckets int, width time.Duration) ([]jdbcstore.ActivityBucket, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.Activity(ctx, buckets, width)
}

func (s *stuckStore) BlockedKeys(ctx context.Context, limit int) ([]jdbcstore.BlockedKey, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.BlockedKeys(ctx, limit)
}

func (s *stuckStore) ListDeadSummaries(ctx context.Context, f jdbcstore.DeadFilter, after string, limit int) ([]jdbcstore.DeadSummary, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.ListDeadSummaries(ctx, f, after, limit)
}

func (s *stuckStore) Get(ctx context.Context, id string) (core.Record, error) {
	if err := s.wait(ctx); err != nil {
		return core.Record{}, err
	}
	return s.Store.Get(ctx, id)
}

func (s *stuckStore) ReplayDead(ctx context.Context, f jdbcstore.DeadFilter, o jdbcstore.ReplayOptions) (jdbcstore.ReplayResult, error) {
	if err := s.wait(ctx); err != nil {
		return jdbcstore.ReplayResult{}, err
	}
	return s.Store.ReplayDead(ctx, f, o)
}

func (s *stuckStore) Purge(ctx context.Context, o jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error) {
	if err := s.wait(ctx); err != nil {
		return jdbcstore.PurgeResult{}, err
	}
	return s.Store.Purge(ctx, o)
}

// stuckInbox is an inbox whose every call waits while it is stuck.
type stuckInbox struct {
	*inbox.Inbox
	stuck
}

func (s *stuckInbox) CountByStatus(ctx context.Context) (map[inbox.Status]int, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Inbox.CountByStatus(ctx)
}

func (s *stuckInbox) ListPreview(ctx context.Context, status inbox.Status, after inbox.Key, limit, previewBytes int) ([]inbox.Record, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Inbox.ListPreview(ctx, status, after, limit, previewBytes)
}

// Every page whose database hangs answers 504 within Config.QueryTimeout,
// saying so, and logs the failure; its slot is free again: once the
// database answers, every page is served. Each page waited for its
// database until the client gave up, holding one of the
// MaxConcurrentReads slots: a few such pages stopped the dashboard.
func TestQueryTimeoutBoundsEveryPage(t *testing.T) {
	st := &stuckStore{Store: newStore(t)}
	seed(t, st.Store, event{id: "x1", typ: "A", status: core.StatusDead})
	in, err := inbox.New(t.Context(), st.DB(), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sin := &stuckInbox{Inbox: in}
	logs := chanHandler{msgs: make(chan string, 64)}
	c := newClient(t, newDashboard(t, dashboard.Config{
		Store: st, Inbox: sin, AllowMutations: true, MaxConcurrentReads: 1,
		QueryTimeout: 100 * time.Millisecond, StatsMaxAge: -1, Logger: slog.New(logs),
	}))
	_, body := c.getWithin("/replay?id=x1")
	replay := url.Values{"csrf": {csrfToken(t, body)}, "id": {"x1"}, "confirm": {"yes"}}

	pages := map[string]string{ // page: its log message
		"/":              "outbox dashboard: reading the overview failed",
		"/dead":          "outbox dashboard: listing DEAD events failed",
		"/event?id=x1":   "outbox dashboard: reading the event failed",
		"/types":         "outbox dashboard: reading the event types failed",
		"/purge?done=1h": "outbox dashboard: counting for the purge preview failed",
		"/replay?id=x1":  "outbox dashboard: previewing the replay failed",
		"/inbox":         "outbox dashboard: counting inbox messages failed",
		"POST /replay":   "outbox dashboard: replaying failed",
	}
	st.on.Store(true)
	sin.on.Store(true)
	for p, logged := range pages {
		var code int
		var body string
		if p == "POST /replay" {
			code, body = c.postWithin("/replay", replay)
		} else {
			code, body = c.getWithin(p)
		}
		if code != http.StatusGatewayTimeout {
			t.Errorf("%s with a database that does not answer = %d, want 504\n%s", p, code, body)
		}
		mustContain(t, body, "not done within the query timeout (100ms)")
		waitLogged(t, logs, logged)
	}
	if statusOf(t, st.Store, "x1") != core.StatusDead {
		t.Error("a replay cut short by the query timeout changed x1")
	}

	st.on.Store(false)
	sin.on.Store(false)
	for p := range pages {
		if p == "POST /replay" {
			continue
		}
		if code, body := c.getWithin(p); code != http.StatusOK {
			t.Errorf("%s once the database answers = %d, want 200\n%s", p, code, body)
		}
	}
	if code, body := c.postWithin("/replay", replay); code != http.StatusOK || statusOf(t, st.Store, "x1") != core.StatusNew {
		t.Errorf("replay once the database answers = %d, x1 %v\n%s", code, statusOf(t, st.Store, "x1"), body)
	}
}

// waitLogged waits for the log message msg.
func waitLogged(t *testing.T, logs chanHandler, msg string) {
	t.Helper()
	deadline := time.After(answerWithin)
	for {
		select {
		case m := <-logs.msgs:
			if m == msg {
				return
			}
		case <-deadline:
			t.Fatalf("%q was not logged", msg)
		}
	}
}

// A page waiting for a slot, every slot held by a call that does not
// answer (a driver that ignores its ctx), answers 504 at its
// QueryTimeout, and says what it waited for; it waited for the slot as
// long as the call held it.
func TestQueryTimeoutBoundsTheWaitForASlot(t *testing.T) {
	g := &gatedStore{Store: newStore(t), entered: make(chan struct{}, 8), release: make(chan struct{})}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: g, MaxConcurrentReads: 1, QueryTimeout: 100 * time.Millisecond}))
	t.Cleanup(func() { close(g.release) }) // before the server closes, should the test fail
	held := make(chan int, 1)
	go func() {
		code, _, err := c.tryGet("/dead")
		if err != nil {
			t.Error(err)
		}
		held <- code
	}()
	select {
	case <-g.entered:
	case <-time.After(answerWithin):
		t.Fatal("the list never reached the store")
	}
	code, body := c.getWithin("/types")
	if code != http.StatusGatewayTimeout {
		t.Errorf("a page waiting for the only slot = %d, want 504\n%s", code, body)
	}
	mustContain(t, body, "not done within the query timeout (100ms)", "waiting for a free database slot")
	g.release <- struct{}{}
	// Its own query ran after its deadline: 504, or 200 when the timer
	// that ends its context fired late.
	if code := <-held; code != http.StatusGatewayTimeout && code != http.StatusOK {
		t.Errorf("the page whose call held the slot past its timeout = %d, want 504 (or 200)", code)
	}
	if code, body := c.getWithin("/types"); code != http.StatusOK {
		t.Errorf("a page once the slot is free = %d, want 200\n%s", code, body)
	}
}

// stuckGet is a store whose Get waits until its ctx ends.
type stuckGet struct{ *jdbcstore.Store }

func (s stuckGet) Get(ctx context.Context, id string) (core.Record, error) {
	<-ctx.Done()
	return core.Record{}, ctx.Err()
}

// A replay preview whose look-up of the ids not matched is cut short
// answers 504; it answered 200 with every id left "cannot be read".
func TestQueryTimeoutEndsTheReplayPreviewsLookUps(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: stuckGet{st}, QueryTimeout: 100 * time.Millisecond}))
	code, body := c.getWithin("/replay?id=x1&id=ghost")
	if code != http.StatusGatewayTimeout {
		t.Errorf("replay preview = %d, want 504\n%s", code, body)
	}
	mustContain(t, body, "previewing the replay failed: not done within the query timeout (100ms)")
}

// cutShortReplay replays, then waits until its ctx ends, as a replay
// whose later batch waits for a row lock does: it returns the events it
// replayed with the failure.
type cutShortReplay struct{ *jdbcstore.Store }

func (s cutShortReplay) ReplayDead(ctx context.Context, f jdbcstore.DeadFilter, o jdbcstore.ReplayOptions) (jdbcstore.ReplayResult, error) {
	if o.DryRun {
		return s.Store.ReplayDead(ctx, f, o)
	}
	res, err := s.Store.ReplayDead(context.WithoutCancel(ctx), f, o)
	if err != nil {
		return res, err
	}
	<-ctx.Done()
	return res, fmt.Errorf("outbox: jdbcstore: replay dead: %w", ctx.Err())
}

// A replay cut short by the query timeout says how many events it
// replayed before, and the overview no longer shows them DEAD.
func TestReplayCutShortSaysWhatItReplayed(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead}, event{id: "x2", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: cutShortReplay{st}, AllowMutations: true, QueryTimeout: 100 * time.Millisecond}))
	_, body := c.getWithin("/")
	mustContain(t, body, `id="count-DEAD">2<`)
	_, body = c.getWithin("/replay?id=x1&id=x2")
	code, body := c.postWithin("/replay", url.Values{"csrf": {csrfToken(t, body)}, "id": {"x1", "x2"}, "confirm": {"yes"}})
	if code != http.StatusGatewayTimeout {
		t.Errorf("replay cut short = %d, want 504\n%s", code, body)
	}
	mustContain(t, body, "replaying failed: not done within the query timeout (100ms)", "(2 events were replayed before the failure)")
	if _, body := c.getWithin("/"); !strings.Contains(body, `id="count-DEAD">0<`) {
		t.Errorf("the overview after a replay cut short shows the figures from before it:\n%s", body)
	}
}

// On PostgreSQL, a replay whose UPDATE waits for a row lock another
// transaction holds is canceled at QueryTimeout: 504, nothing replayed,
// the slot free again; it waited as long as the lock was held.
func TestQueryTimeoutEndsAReplayWaitingForALockPostgres(t *testing.T) {
	db := testdb.Postgres(t)
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true, MaxConcurrentReads: 1, QueryTimeout: 2 * time.Second}))
	_, body := c.getWithin("/replay?id=x1")
	replay := url.Values{"csrf": {csrfToken(t, body)}, "id": {"x1"}, "confirm": {"yes"}}

	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(t.Context(), "SELECT 1 FROM "+st.Table()+" WHERE event_id = $1 FOR UPDATE", "x1"); err != nil {
		t.Fatal(err)
	}
	code, body := c.postWithin("/replay", replay)
	if code != http.StatusGatewayTimeout {
		t.Errorf("replay of a locked row = %d, want 504\n%s", code, body)
	}
	mustContain(t, body, "replaying failed: not done within the query timeout (2s)")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if statusOf(t, st, "x1") != core.StatusDead {
		t.Error("the replay cut short changed x1")
	}
	if code, body := c.getWithin("/dead"); code != http.StatusOK {
		t.Errorf("GET /dead after the timeout = %d\n%s", code, body)
	}
	if code, body := c.postWithin("/replay", replay); code != http.StatusOK || statusOf(t, st, "x1") != core.StatusNew {
		t.Errorf("replay once the lock is released = %d, x1 %v\n%s", code, statusOf(t, st, "x1"), body)
	}
}
