package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

const owner = "dashboard-test"

// newStore returns a SQLite store on a fresh file.
func newStore(t *testing.T) *jdbcstore.Store {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// event describes a row to seed.
type event struct {
	id, typ, tenant, lastErr string
	key                      string // an ordering key, block policy
	status                   core.Status
	payload                  string
	headers                  map[string]string
}

// seed inserts the events, then moves them to their status.
func seed(t *testing.T, st *jdbcstore.Store, evs ...event) {
	t.Helper()
	ctx := t.Context()
	lease := core.Lease{Owner: owner, Until: time.Now().Add(time.Hour)}
	for _, e := range evs {
		payload := e.payload
		if payload == "" {
			payload = `{"n":1}`
		}
		b := core.NewEvent(e.typ).ID(e.id).PayloadJSONString(payload)
		if e.tenant != "" {
			b.TenantID(e.tenant)
		}
		for k, v := range e.headers {
			b.Header(k, v)
		}
		if e.key != "" {
			b.OrderKey(e.key)
		}
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		l := lease
		if e.status == core.StatusNew {
			l = core.Lease{}
		}
		if e.key != "" {
			testsupport.InsertOrdered(t, st, env, l)
		} else if err := st.Insert(ctx, st.DB(), env, l); err != nil {
			t.Fatal(err)
		}
		switch e.status {
		case core.StatusDead:
			msg := e.lastErr
			if msg == "" {
				msg = "boom"
			}
			if ok, err := st.MarkDead(ctx, owner, e.id, msg); !ok || err != nil {
				t.Fatal(ok, err)
			}
		case core.StatusDone:
			if n, err := st.MarkDone(ctx, owner, []string{e.id}); n != 1 || err != nil {
				t.Fatal(n, err)
			}
		}
	}
}

// newDashboard returns a test server over the handler built from cfg.
func newDashboard(t *testing.T, cfg dashboard.Config) *httptest.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// client is a browser-like client: it keeps cookies, never follows
// redirects.
type client struct {
	t   *testing.T
	srv *httptest.Server
	c   *http.Client
	jar map[string]*http.Cookie
}

func newClient(t *testing.T, srv *httptest.Server) *client {
	return &client{t: t, srv: srv, c: srv.Client(), jar: map[string]*http.Cookie{}}
}

func (c *client) do(req *http.Request) (int, string) {
	c.t.Helper()
	for _, ck := range c.jar {
		req.AddCookie(ck)
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	for _, ck := range res.Cookies() {
		c.jar[ck.Name] = ck
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodGet, c.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do(req)
}

// post sends a form as a same-origin browser would (Origin set), plus
// the extra headers.
func (c *client) post(path string, form url.Values, headers map[string]string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	return c.do(req)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfToken returns the token of the confirmation form in body.
func csrfToken(t *testing.T, body string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return m[1]
}

// statusOf returns the stored status of id.
func statusOf(t *testing.T, st *jdbcstore.Store, id string) core.Status {
	t.Helper()
	rec, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

func mustNotContain(t *testing.T, body string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(body, b) {
			t.Errorf("page holds %q", b)
		}
	}
}

func httptestServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func stringsContains(s, sub string) bool { return strings.Contains(s, sub) }
