package browsertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/internal/scratchdb"
	"github.com/outbox-go/outbox/jdbcstore"
	_ "github.com/outbox-go/outbox/jdbcstore/mysql"
	_ "github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/poller"
)

// Event types and ids of the fixture.
const (
	payType   = "PaymentRequested"
	hostile   = `<script>window.__pwned=1</script>`
	hostileID = "evil-1"
	seedOwner = "seed"
)

// hostileError is the last error of the hostile event: markup that would
// run script if it were not escaped.
const hostileError = `</pre><img src=x onerror="window.__pwned=2"><script>window.__pwned=3</script>`

// waitTimeout bounds every wait on the browser or the database.
const waitTimeout = 60 * time.Second

func TestDashboardInBrowser(t *testing.T) {
	browser := newBrowser(t)
	t.Run("sqlite", func(t *testing.T) {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "app.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		runScenario(t, browser, db, true)
	})
	t.Run("mysql", func(t *testing.T) {
		dsn := os.Getenv("OUTBOX_TEST_MYSQL_DSN")
		if dsn == "" {
			t.Skip("OUTBOX_TEST_MYSQL_DSN not set")
		}
		runScenario(t, browser, scratch(t, "mysql", dsn), false)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("OUTBOX_TEST_POSTGRES_DSN")
		if dsn == "" {
			t.Skip("OUTBOX_TEST_POSTGRES_DSN not set")
		}
		runScenario(t, browser, scratch(t, "pgx", dsn), false)
	})
}

// scratch opens a new database on the server of dsn, dropped at the end.
func scratch(t *testing.T, driver, dsn string) *sqlx.DB {
	t.Helper()
	create := scratchdb.MySQL
	if driver == "pgx" {
		create = scratchdb.Postgres
	}
	newDSN, _, drop, err := create(t.Context(), dsn, "dashboard_browser_")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlx.Open(driver, newDSN)
	if err != nil {
		t.Fatal(errorsJoin(err, drop(true)))
	}
	t.Cleanup(func() {
		if err := errorsJoin(db.Close(), drop(true)); err != nil {
			t.Error(err)
		}
	})
	return db
}

func errorsJoin(a, b error) error {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return fmt.Errorf("%w; %w", a, b)
}

// runScenario: overview, filter the dead letters, open one, replay it
// after the confirmation and see it NEW then DONE; hostile text renders
// inert; forged and read-only POSTs change nothing.
func runScenario(t *testing.T, browser context.Context, db *sqlx.DB, screenshots bool) {
	ctx := t.Context()
	quiet := slog.New(slog.DiscardHandler)

	// The running outbox: its listener of payType holds each delivery
	// until released, so the replayed row is seen NEW before it is DONE.
	ob, err := outbox.New(ctx, db, outbox.Config{Logger: quiet,
		Poller: poller.Config{Interval: 100 * time.Millisecond, SkipRecent: -1}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	delivered := make(chan string, 16)
	ob.RegisterFunc(payType, func(ctx context.Context, e outbox.Envelope) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		delivered <- e.ID()
		return nil
	})

	st, err := jdbcstore.New(db, jdbcstore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	seedDead(t, st, event{"pay-1", payType, "acme", "card declined", `{"amount":42,"email":"ada@example.com"}`},
		event{"pay-2", payType, "acme", "card declined", `{"amount":7}`},
		event{"mail-1", "EmailRequested", "", "smtp 550", `{"to":"x"}`},
		event{hostileID, hostile, "", hostileError, `{"html":"<script>window.__pwned=4</script>"}`})
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Close(cctx); err != nil {
			t.Errorf("close outbox: %v", err)
		}
	})

	// Some traffic delivered meanwhile (no listener: marked DONE).
	for i := range 6 {
		err := ob.InTx(ctx, func(ctx context.Context) error {
			env, err := outbox.JSONEvent("OrderPlaced", fmt.Sprintf(`{"order":%d}`, i))
			if err != nil {
				return err
			}
			_, err = ob.Publish(ctx, env)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, st, core.StatusDone, 6)

	srv := serveDashboard(t, dashboard.Config{Store: st, AllowMutations: true, ShowPayloads: true, Logger: quiet})
	ro := serveDashboard(t, dashboard.Config{Store: st, Logger: quiet})
	tab := newTab(t, browser)

	// Overview.
	var deadCount string
	run(t, tab, "overview",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible("#count-DEAD", chromedp.ByID),
		chromedp.Text("#count-DEAD", &deadCount, chromedp.ByID),
	)
	if deadCount != "4" {
		t.Errorf("overview shows %q DEAD, want 4", deadCount)
	}
	if screenshots {
		screenshot(t, tab, "overview.png")
	}
	notPwned(t, tab, "overview")

	// Dead letters, filtered by type with the form.
	var rows int
	run(t, tab, "filter dead letters",
		chromedp.Navigate(srv.URL+"/dead"),
		chromedp.WaitVisible("#dead-list", chromedp.ByID),
		chromedp.SetValue(`input[name="type"]`, payType, chromedp.ByQuery),
		chromedp.Click("#filter", chromedp.ByID),
	)
	waitTrue(t, tab, `location.search.includes("type=`+payType+`") && document.readyState === "complete"`)
	run(t, tab, "count rows", chromedp.Evaluate(`document.querySelectorAll("#dead-list tbody tr").length`, &rows))
	if rows != 2 {
		t.Errorf("filtered list has %d rows, want 2", rows)
	}
	notPwned(t, tab, "dead list")

	// One event, then its replay after the preview and the confirmation.
	var status, payload string
	run(t, tab, "open event",
		chromedp.Click(`#dead-list a[href*="id=pay-1"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#event", chromedp.ByID),
		chromedp.Text("#status", &status, chromedp.ByID),
		chromedp.Text("#payload", &payload, chromedp.ByID),
	)
	if status != "DEAD" || !strings.Contains(payload, `"amount": 42`) {
		t.Errorf("event page: status %q, payload %q", status, payload)
	}
	if screenshots {
		screenshot(t, tab, "dead-letter.png")
	}
	var summary, result string
	run(t, tab, "replay",
		chromedp.Click("#replay-one", chromedp.ByID),
		chromedp.WaitVisible("#confirm-form", chromedp.ByID),
		chromedp.Text("#preview-summary", &summary, chromedp.ByID),
	)
	if !strings.Contains(summary, "Dry run: of the 1 DEAD event among the 1 selected, 1 would be replayed.") {
		t.Errorf("preview says %q", summary)
	}
	if got := statusOf(t, st, "pay-1"); got != core.StatusDead {
		t.Fatalf("after the preview pay-1 is %v, want DEAD", got)
	}
	run(t, tab, "confirm",
		chromedp.Click("#confirm", chromedp.ByID),
		chromedp.Click("#replay-confirm", chromedp.ByID),
		chromedp.WaitVisible("#replay-result", chromedp.ByID),
		chromedp.Text("#replay-result", &result, chromedp.ByID),
	)
	if !strings.HasPrefix(result, "Replayed 1 of 1") {
		t.Errorf("result says %q", result)
	}
	if got := statusOf(t, st, "pay-1"); got != core.StatusNew {
		t.Fatalf("after the replay pay-1 is %v, want NEW", got)
	}
	releaseOnce.Do(func() { close(release) })
	select {
	case id := <-delivered:
		if id != "pay-1" {
			t.Errorf("delivered %s, want pay-1", id)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the replayed event was not delivered")
	}
	waitStatus(t, st, "pay-1", core.StatusDone)
	if got := statusOf(t, st, "pay-2"); got != core.StatusDead {
		t.Errorf("pay-2 is %v, want DEAD (not replayed)", got)
	}

	// Hostile text renders as text.
	var typ, lastErr string
	run(t, tab, "hostile event",
		chromedp.Navigate(srv.URL+"/event?id="+hostileID),
		chromedp.WaitVisible("#event", chromedp.ByID),
		chromedp.Text("#event-type", &typ, chromedp.ByID),
		chromedp.Text("#last-error", &lastErr, chromedp.ByID),
	)
	if typ != hostile || lastErr != hostileError {
		t.Errorf("hostile event shows type %q and error %q", typ, lastErr)
	}
	notPwned(t, tab, "hostile event")
	run(t, tab, "hostile list", chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible("#dead-list", chromedp.ByID))
	notPwned(t, tab, "dead list with the hostile event")

	// Forged and read-only POSTs are refused and change nothing.
	var token string
	run(t, tab, "token", chromedp.Navigate(srv.URL+"/replay?id=pay-2"), chromedp.WaitVisible("#confirm-form", chromedp.ByID),
		chromedp.Value(`input[name="csrf"]`, &token, chromedp.ByQuery))
	// The forged token differs from the real one in its first character
	// whatever that character is (a fixed "x" equals it one time in 64).
	if token == "" {
		t.Fatal("the replay form carries no CSRF token")
	}
	forged := "x" + token[1:]
	if token[0] == 'x' {
		forged = "y" + token[1:]
	}
	for name, js := range map[string]string{
		"no token":    `fetch("/replay",{method:"POST",body:new URLSearchParams({id:"pay-2",confirm:"yes"})}).then(r=>r.status)`,
		"wrong token": `fetch("/replay",{method:"POST",body:new URLSearchParams({id:"pay-2",confirm:"yes",csrf:"` + forged + `"})}).then(r=>r.status)`,
	} {
		if code := fetchStatus(t, tab, js); code != http.StatusForbidden {
			t.Errorf("POST with %s = %d, want 403", name, code)
		}
	}
	run(t, tab, "read-only page", chromedp.Navigate(ro.URL+"/replay?id=pay-2"), chromedp.WaitVisible("#read-only", chromedp.ByID))
	if code := fetchStatus(t, tab, `fetch("/replay",{method:"POST",body:new URLSearchParams({id:"pay-2",confirm:"yes",csrf:"`+token+`"})}).then(r=>r.status)`); code != http.StatusForbidden {
		t.Errorf("POST to a read-only dashboard = %d, want 403", code)
	}
	// A page of another origin submits a complete form, token included:
	// the origin check refuses it.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/replay">
<input name="id" value="pay-2"><input name="confirm" value="yes"><input name="csrf" value="%s"></form>
<script>document.getElementById("f").submit()</script>`, srv.URL, token)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	var refused string
	run(t, tab, "foreign origin", chromedp.Navigate(evilURL))
	waitTrue(t, tab, `location.href.startsWith(`+jsString(srv.URL)+`) && document.readyState === "complete"`)
	run(t, tab, "refusal", chromedp.Text("body", &refused, chromedp.ByQuery))
	if !strings.Contains(refused, "cross-origin request refused") {
		t.Errorf("the foreign form got %q", refused)
	}
	if got := statusOf(t, st, "pay-2"); got != core.StatusDead {
		t.Errorf("after the refused POSTs pay-2 is %v, want DEAD", got)
	}
}

// waitTrue waits until the expression is true in the page, through
// navigations (whose evaluations fail and are retried).
func waitTrue(t *testing.T, tab context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		err := chromedp.Run(ctx, chromedp.Evaluate(expr, &ok))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s (last error: %v)", waitTimeout, expr, err)
		}
		<-tick.C
	}
}

func jsString(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// fetchStatus runs a fetch in the page and returns the response status.
func fetchStatus(t *testing.T, tab context.Context, js string) int {
	t.Helper()
	var code int
	run(t, tab, "fetch", chromedp.Evaluate(js, &code, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	return code
}

// notPwned fails unless the page ran none of the fixture's script.
func notPwned(t *testing.T, tab context.Context, where string) {
	t.Helper()
	var pwned bool
	run(t, tab, "check script", chromedp.Evaluate(`typeof window.__pwned !== "undefined"`, &pwned))
	if pwned {
		t.Errorf("%s: injected script ran", where)
	}
}

type event struct{ id, typ, tenant, lastErr, payload string }

// seedDead stores the events DEAD with their last error.
func seedDead(t *testing.T, st *jdbcstore.Store, evs ...event) {
	t.Helper()
	ctx := t.Context()
	lease := core.Lease{Owner: seedOwner, Until: time.Now().Add(time.Hour)}
	for _, e := range evs {
		b := core.NewEvent(e.typ).ID(e.id).PayloadJSONString(e.payload).Header("traceparent", "00-abc-def-01")
		if e.tenant != "" {
			b.TenantID(e.tenant)
		}
		env, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(ctx, st.DB(), env, lease); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.MarkDead(ctx, seedOwner, e.id, e.lastErr); !ok || err != nil {
			t.Fatalf("MarkDead %s: %v %v", e.id, ok, err)
		}
	}
}

func statusOf(t *testing.T, st *jdbcstore.Store, id string) core.Status {
	t.Helper()
	rec, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}

// waitStatus waits until the event has status want.
func waitStatus(t *testing.T, st *jdbcstore.Store, id string, want core.Status) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for statusOf(t, st, id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v after %s, want %v", id, statusOf(t, st, id), waitTimeout, want)
		}
		<-tick.C
	}
}

// waitCount waits until n events have status want.
func waitCount(t *testing.T, st *jdbcstore.Store, want core.Status, n int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := st.CountByStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if c[want] == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events %v after %s, want %d", c[want], want, waitTimeout, n)
		}
		<-tick.C
	}
}

func serveDashboard(t *testing.T, cfg dashboard.Config) *httptest.Server {
	t.Helper()
	h, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// run runs browser actions within waitTimeout.
func run(t *testing.T, tab context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, waitTimeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot saves the viewport as name in OUTBOX_SCREENSHOT_DIR, or in
// the test's temporary directory.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("OUTBOX_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	var png []byte
	run(t, tab, "screenshot "+name, chromedp.CaptureScreenshot(&png))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newBrowser starts headless Chromium for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM_PATH")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium not found at %s (install it: apt-get install -y chromium): %v", path, err)
		}
		t.Skipf("Chromium not found at %s: %v", path, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// No UserDataDir: chromedp makes a fresh temporary one per browser
		// and removes it after the process exited (a t.TempDir would race
		// with Chromium's last writes and fail the cleanup).
		chromedp.WindowSize(1100, 720),
		chromedp.CombinedOutput(io.Discard),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	// The first Run starts the browser, which lives as long as the
	// context of that Run: bctx, not a shorter one.
	if err := chromedp.Run(bctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return bctx
}

// newTab opens a tab of browser for one subtest.
func newTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	// Open the tab now, on its own context (see newBrowser).
	if err := chromedp.Run(tab); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return tab
}
