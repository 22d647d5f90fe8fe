package dashboard_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func TestConfigValidation(t *testing.T) {
	st := newStore(t)
	for name, cfg := range map[string]dashboard.Config{
		"no store":        {},
		"store and dbs":   {Store: st, Databases: []dashboard.Database{{Name: "a", Store: st}}},
		"bad db name":     {Databases: []dashboard.Database{{Name: "a b", Store: st}}},
		"dup db name":     {Databases: []dashboard.Database{{Name: "a", Store: st}, {Name: "a", Store: st}}},
		"nil db store":    {Databases: []dashboard.Database{{Name: "a"}}},
		"base path":       {Store: st, BasePath: "/ops"},
		"base path query": {Store: st, BasePath: "/ops?x=1/"},
		"base path ..":    {Store: st, BasePath: "/../"},
		"base path .":     {Store: st, BasePath: "/./"},
		"base path a/..":  {Store: st, BasePath: "/ops/../x/"},
		// A backslash made the redirect to the base path leave the host.
		"base path backslash": {Store: st, BasePath: "/\\evil.example/"},
		"base path space":     {Store: st, BasePath: "/a b/"},
		"page size":           {Store: st, PageSize: dashboard.MaxPageSize + 1},
		"negative page":       {Store: st, PageSize: -1},
		"trusted origin":      {Store: st, TrustedOrigins: []string{"ops.example.com"}},
		"short secret":        {Store: st, Secret: []byte("short")},
		"query timeout":       {Store: st, QueryTimeout: -time.Second},
		"zero logger":         {Store: st, Logger: new(slog.Logger)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := dashboard.New(cfg); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	// Every invalid field at once.
	_, err := dashboard.New(dashboard.Config{Store: st, BasePath: "x", PageSize: -1, Secret: []byte("s"), QueryTimeout: -1})
	for _, field := range []string{"BasePath", "PageSize", "Secret", "QueryTimeout"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("New = %v, want it to name %s", err, field)
		}
	}
}

func TestOverview(t *testing.T) {
	st := newStore(t)
	seed(t, st,
		event{id: "n1", typ: "OrderPlaced", status: core.StatusNew},
		event{id: "d1", typ: "OrderPlaced", status: core.StatusDone},
		event{id: "x1", typ: "PaymentFailed", status: core.StatusDead},
		event{id: "x2", typ: "PaymentFailed", status: core.StatusDead},
	)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	code, body := c.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d\n%s", code, body)
	}
	mustContain(t, body, `id="count-NEW">1<`, `id="count-DONE">1<`, `id="count-DEAD">2<`, `id="count-RETRY">0<`,
		"1 delivered", "2 failed", `href="/dead?type=PaymentFailed"`, "read-only", "No blocked ordering keys.")
	// Read-only: no CSRF cookie is handed out.
	if len(c.jar) != 0 {
		t.Errorf("read-only dashboard set cookies: %v", c.jar)
	}
	if code, _ := c.get("/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	for _, p := range []string{"/static/app.css", "/static/app.js"} {
		if code, _ := c.get(p); code != http.StatusOK {
			t.Errorf("GET %s = %d", p, code)
		}
	}
	// The assets are not listed.
	if code, body := c.get("/static/"); code != http.StatusNotFound || strings.Contains(body, `href="app.css"`) {
		t.Errorf("GET /static/ = %d, want 404 without a listing\n%s", code, body)
	}
}

// The overview counts the blocked keys in words that fit the count.
func TestOverviewBlockedKeys(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "k1-1", typ: "A", key: "k1", status: core.StatusDead}, event{id: "k1-2", typ: "A", key: "k1", status: core.StatusNew})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	_, body := c.get("/")
	mustContain(t, body, "1 key waits behind a DEAD event", `href="/event?id=k1-1"`)
	seed(t, st, event{id: "k2-1", typ: "A", key: "k2", status: core.StatusDead})
	c = newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	_, body = c.get("/")
	mustContain(t, body, "2 keys wait behind a DEAD event")
}

func TestOverviewFiguresAreSharedWithinStatsMaxAge(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, StatsMaxAge: 1 << 62}))
	_, body := c.get("/")
	mustContain(t, body, `id="count-DEAD">1<`)
	seed(t, st, event{id: "x2", typ: "A", status: core.StatusDead})
	_, body = c.get("/")
	mustContain(t, body, `id="count-DEAD">1<`) // cached
	c = newClient(t, newDashboard(t, dashboard.Config{Store: st, StatsMaxAge: -1}))
	_, body = c.get("/")
	mustContain(t, body, `id="count-DEAD">2<`)
}

func TestDeadListFiltersAndPages(t *testing.T) {
	st := newStore(t)
	var evs []event
	for i := range 7 {
		evs = append(evs, event{id: fmt.Sprintf("a-%d", i), typ: "A", tenant: "t1", status: core.StatusDead})
	}
	evs = append(evs, event{id: "b-0", typ: "B", status: core.StatusDead}, event{id: "n-0", typ: "A", status: core.StatusNew})
	seed(t, st, evs...)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, PageSize: 3}))

	code, body := c.get("/dead?type=A")
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, body, ">a-0<", ">a-1<", ">a-2<", `id="next-page" href="/dead?after=a-2&amp;limit=3&amp;type=A"`)
	mustNotContain(t, body, ">a-3<", ">b-0<", ">n-0<")
	_, body = c.get("/dead?type=A&limit=3&after=a-5")
	mustContain(t, body, ">a-6<", "first page")
	mustNotContain(t, body, ">a-5<", "next-page")
	_, body = c.get("/dead?tenant=t1&limit=100")
	mustContain(t, body, ">a-6<")
	mustNotContain(t, body, ">b-0<")
	_, body = c.get("/dead?type=nope")
	mustContain(t, body, "No DEAD events match.")
	_, body = c.get("/dead?since=2000-01-01&until=2999-01-01T10:00&limit=100")
	mustContain(t, body, ">b-0<")
}

func TestBadInputIsRefused(t *testing.T) {
	st := newStore(t)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	for _, path := range []string{
		"/dead?limit=0", "/dead?limit=501", "/dead?limit=x",
		"/dead?since=yesterday", "/dead?since=2025-02-01&until=2025-01-01",
		"/dead?type=" + strings.Repeat("x", core.MaxEventTypeLen+1),
		"/dead?tenant=%00", "/dead?type=%ff", "/dead?type=a&typeq=%22a%22", "/dead?typeq=a", "/replay?idq=x",
		"/event", "/event?id=" + strings.Repeat("x", 300),
		"/replay", "/replay?all=1&type=A", "/replay?all=2",
		"/replay?" + strings.Repeat("id=x&", dashboard.MaxPageSize+1),
		"/purge?done=forever", "/purge?dead=-1h", "/purge?done=106752d", "/purge?done=0s",
		"/?db=other",
		"/dead?" + strings.Repeat("x", 250<<10), // over the query bound
	} {
		code, body := c.get(path)
		if code < 400 || code >= 500 {
			t.Errorf("GET %s = %d, want a 4xx\n%s", trunc(path), code, body)
		}
	}
	if code, _ := c.get("/event?id=missing"); code != http.StatusNotFound {
		t.Errorf("unknown event = %d, want 404", code)
	}
	// A method a page does not answer: 405 with the methods it does.
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodDelete, "/", "GET, HEAD"},
		{http.MethodPut, "/dead", "GET, HEAD"},
		{http.MethodPost, "/dead", "GET, HEAD"}, // was 404 "no such action"
		{http.MethodPost, "/event", "GET, HEAD"},
		{http.MethodPut, "/replay", "GET, HEAD, POST"},
		{"GE", "/", "GET, HEAD"},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, c.srv.URL+tc.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s = %d, Allow %q; want 405, Allow %q", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"), tc.allow)
		}
	}
	if code, _ := c.post("/nosuch", nil, nil); code != http.StatusNotFound {
		t.Errorf("POST to no page = %d, want 404", code)
	}
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func TestEventPageHidesPersonalDataByDefault(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "UserSignedUp", status: core.StatusDead, lastErr: "smtp said no",
		payload: `{"email":"alice@example.com"}`, headers: map[string]string{"traceparent": "secret-trace-value"}})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	code, body := c.get("/event?id=x1")
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, body, "UserSignedUp", "DEAD", "smtp said no", "traceparent", "payload-hidden", "Replay this event")
	mustNotContain(t, body, "alice@example.com", "secret-trace-value")

	c = newClient(t, newDashboard(t, dashboard.Config{Store: st, ShowPayloads: true}))
	_, body = c.get("/event?id=x1")
	mustContain(t, body, "alice@example.com", "secret-trace-value", "&#34;email&#34;: &#34;alice@example.com&#34;")
}

func TestHostileTextRendersInert(t *testing.T) {
	st := newStore(t)
	const typ = `<script>window.pwned=1</script>`
	const msg = `</pre><script>window.pwned=2</script><img src=x onerror=alert(1)>`
	seed(t, st, event{id: "x1", typ: typ, status: core.StatusDead, lastErr: msg, tenant: `"><b>t</b>`,
		payload: `{"html":"<script>alert(3)</script>"}`})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, ShowPayloads: true, AllowMutations: true}))
	for _, path := range []string{"/", "/types", "/dead", "/dead?type=" + url.QueryEscape(typ), "/event?id=x1", "/replay?id=x1",
		"/replay?type=" + url.QueryEscape(typ), "/dead?type=" + url.QueryEscape(`"><script>x()</script>`)} {
		code, body := c.get(path)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d", path, code)
		}
		mustNotContain(t, body, "<script>window", "<script>x()", "<img src=x", "<b>t</b>", "<script>alert")
		if strings.Count(body, "<script") != 1 { // only our own app.js
			t.Errorf("GET %s: %d script tags", path, strings.Count(body, "<script"))
		}
	}
	_, body := c.get("/event?id=x1")
	mustContain(t, body, "&lt;script&gt;window.pwned=1&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;")
}

func TestMountedUnderBasePath(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	h, err := dashboard.New(dashboard.Config{Store: st, BasePath: "/ops/outbox/"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/outbox/", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "app") })
	srv := httptestServer(t, mux)
	c := newClient(t, srv)
	code, body := c.get("/ops/outbox/")
	if code != http.StatusOK {
		t.Fatalf("GET = %d", code)
	}
	mustContain(t, body, `href="/ops/outbox/static/app.css"`, `href="/ops/outbox/dead?type=A"`)
	if code, _ := c.get("/ops/outbox/static/app.js"); code != http.StatusOK {
		t.Errorf("asset = %d", code)
	}
	if code, body := c.get("/ops/outbox/event?id=x1"); code != http.StatusOK || !strings.Contains(body, `href="/ops/outbox/replay?id=x1"`) {
		t.Errorf("event = %d", code)
	}
}

func TestMiddlewareWrapsEveryRequest(t *testing.T) {
	st := newStore(t)
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer ok" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, Middleware: auth}))
	for _, p := range []string{"/", "/static/app.css", "/dead"} {
		if code, _ := c.get(p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials = %d, want 401", p, code)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.srv.URL+"/", nil)
	req.Header.Set("Authorization", "Bearer ok")
	if code, _ := c.do(req); code != http.StatusOK {
		t.Errorf("GET / with credentials = %d", code)
	}
}

func TestTenantDatabases(t *testing.T) {
	a, b := newStore(t), newStore(t)
	seed(t, a, event{id: "in-a", typ: "A", status: core.StatusDead})
	seed(t, b, event{id: "in-b", typ: "B", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Databases: []dashboard.Database{{Name: "eu-1", Store: a}, {Name: "us-1", Store: b}}}))
	_, body := c.get("/dead")
	mustContain(t, body, ">in-a<", `<option value="us-1">`)
	mustNotContain(t, body, ">in-b<")
	_, body = c.get("/dead?db=us-1")
	mustContain(t, body, ">in-b<", `href="/event?db=us-1&amp;id=in-b"`, `<option value="us-1" selected>`)
	mustNotContain(t, body, ">in-a<")
	if code, _ := c.get("/event?db=us-1&id=in-a"); code != http.StatusNotFound {
		t.Errorf("event of the other database = %d, want 404", code)
	}
	if code, _ := c.get("/?db=nope"); code != http.StatusNotFound {
		t.Errorf("unknown database = %d, want 404", code)
	}
}

func TestPurgePreviewChangesNothing(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "d1", typ: "A", status: core.StatusDone}, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	// Ages of 0 keep; a tiny age counts the rows finished before now.
	code, body := c.get("/purge?done=1ns&dead=1ns")
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, body, "outboxctl purge --done-older-than 1ns --dead-older-than 1ns")
	if !strings.Contains(body, `<th>DONE rows</th><td class="num">1</td>`) || !strings.Contains(body, `<th>DEAD rows</th><td class="num">1</td>`) {
		t.Errorf("purge preview counts wrong:\n%s", body)
	}
	if statusOf(t, st, "d1") != core.StatusDone || statusOf(t, st, "x1") != core.StatusDead {
		t.Error("purge preview changed rows")
	}
}

// The purge preview's command names the table when it is not the
// default one, and says which database --dsn must name.
func TestPurgePreviewCommandNamesTheTable(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect, Table: "billing_outbox"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, newDashboard(t, dashboard.Config{Databases: []dashboard.Database{{Name: "eu", Store: st}}}))
	code, body := c.get("/purge?db=eu&done=7d")
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, body, "<code>outboxctl purge --table billing_outbox --done-older-than 7d</code>")
	mustContain(t, body, "naming the database eu")
}

// The purge preview reads its ages as outboxctl purge does
// (timearg.Age), so the command it shows takes them.
func TestPurgePreviewAgesAreOutboxctls(t *testing.T) {
	st := newStore(t)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	code, body := c.get("/purge?done=1d12h&dead=+7d+")
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, body, "outboxctl purge --done-older-than 1d12h --dead-older-than 7d</code>")
	for age, want := range map[string]string{
		"+7d": `done: invalid duration &#34;&#43;7d&#34;: write a Go duration (90m, 36h) or days (7d, 1d12h)`,
		"-1h": `done: duration &#34;-1h&#34; must not be negative`,
		"0s":  `done: duration &#34;0s&#34; must be positive (leave it empty to keep every event of that status)`,
		"0d":  `done: duration &#34;0d&#34; must be positive`,
	} {
		code, body := c.get("/purge?" + url.Values{"done": {age}}.Encode())
		if code != http.StatusBadRequest {
			t.Errorf("GET /purge?done=%s = %d, want 400", age, code)
		}
		mustContain(t, body, want)
	}
	// As long an age as outboxctl takes (it took ten years at most).
	code, body = c.get("/purge?done=106751d")
	if code != http.StatusOK {
		t.Fatalf("GET /purge?done=106751d = %d\n%s", code, body)
	}
	mustContain(t, body, "outboxctl purge --done-older-than 106751d</code>")
}

// A trusted origin a browser's Origin header can never equal is refused
// by New, each as a *core.ConfigError naming its index, with the other
// invalid fields.
func TestConfigTrustedOrigins(t *testing.T) {
	st := newStore(t)
	bad := []string{
		"ops.example.com",
		"ftp://ops.example.com",
		"https://",
		"https://ops.example.com/x",
		"https://ops.example.com?x=1",
		"https://ops.example.com?",
		"https://ops.example.com#x",
		"https://ops.example.com/#",
		"https://ops.example.com#",
		"https://user:pw@ops.example.com",
		"https://user@ops.example.com",
		"https://user:p%zzw@ops.example.com",
		"https://:443",
		// Hosts no browser sends: they could never match.
		"https://*.example.com",
		"https://ops.example.com:99999",
		"http://127.0.0.01:8080",
	}
	for _, o := range bad {
		_, err := dashboard.New(dashboard.Config{Store: st, TrustedOrigins: []string{o}})
		var ce *core.ConfigError
		if !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "TrustedOrigins[0]" {
			t.Errorf("New with trusted origin %q = %v, want a ConfigError for TrustedOrigins[0]", o, err)
		}
	}
	_, err := dashboard.New(dashboard.Config{Store: st, TrustedOrigins: bad, PageSize: -1})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	fields := map[string]bool{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *core.ConfigError
		if !errors.As(e, &ce) {
			t.Errorf("%v is not a *core.ConfigError", e)
			continue
		}
		fields[ce.Field] = true
	}
	for i, o := range bad {
		if f := fmt.Sprintf("TrustedOrigins[%d]", i); !fields[f] {
			t.Errorf("%q accepted: no error for %s in\n%v", o, f, err)
		}
	}
	if !fields["PageSize"] {
		t.Errorf("PageSize not reported with the origins:\n%v", err)
	}
	if strings.Contains(err.Error(), "pw@") || strings.Contains(err.Error(), "zzw") {
		t.Errorf("the error shows the user info's password:\n%v", err)
	}
}

// A trusted origin is compared as browsers send the Origin header: its
// scheme and host in lower case, without a default port or a trailing
// slash.
func TestTrustedOriginsAcceptCrossOriginPosts(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead}, event{id: "x2", typ: "A", status: core.StatusDead},
		event{id: "x3", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true,
		TrustedOrigins: []string{"HTTPS://Ops.Example.COM", "https://b.example:443/", "http://c.example:8080"}}))
	for id, origin := range map[string]string{"x1": "https://ops.example.com", "x2": "https://b.example", "x3": "http://c.example:8080"} {
		_, body := c.get("/replay?id=" + id)
		form := url.Values{"csrf": {csrfToken(t, body)}, "id": {id}, "confirm": {"yes"}}
		if code, body := c.post("/replay", form, map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site"}); code != http.StatusOK {
			t.Errorf("POST from trusted %s = %d, want 200\n%s", origin, code, body)
		}
		if code, _ := c.post("/replay", form, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
			t.Errorf("POST from an untrusted origin = %d, want 403", code)
		}
	}
}

// A refused cross-origin POST logs its Origin and path cut to 100
// characters: a 900 KiB Origin header made a 900 KiB log line (an
// audit: 10 requests wrote 9 MB of log).
func TestCrossOriginRefusalLogIsBounded(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x", typ: "A", status: core.StatusDead})
	logs := &testsupport.LogBuffer{}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true, Logger: logs.Logger()}))
	_, body := c.get("/replay?id=x")
	form := url.Values{"csrf": {csrfToken(t, body)}, "id": {"x"}, "confirm": {"yes"}}
	origin := "https://evil.example/" + strings.Repeat("a", 900<<10)
	if code, _ := c.post("/replay", form, map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Fatalf("POST from an untrusted origin = %d, want 403", code)
	}
	lines := logs.Lines("cross-origin POST refused")
	if len(lines) != 1 {
		t.Fatalf("%d refusal lines, want 1", len(lines))
	}
	if n := len(lines[0]); n > 1000 {
		t.Errorf("the refusal line is %d bytes long, want the origin cut short", n)
	}
}
