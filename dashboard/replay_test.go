package dashboard_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/txctx"
)

func TestReplayAfterPreviewAndConfirmation(t *testing.T) {
	st := newStore(t)
	seed(t, st,
		event{id: "x1", typ: "A", status: core.StatusDead},
		event{id: "x2", typ: "A", status: core.StatusDead},
		event{id: "x3", typ: "B", status: core.StatusDead},
		event{id: "d1", typ: "A", status: core.StatusDone},
	)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))

	// Preview of selected ids: a dry run that changes nothing. An id
	// given twice is one event (as outboxctl counts them).
	code, body := c.get("/replay?id=x1&id=x3&id=d1&id=ghost&id=x1&idq=%22x3%22")
	if code != http.StatusOK {
		t.Fatalf("preview = %d\n%s", code, body)
	}
	mustContain(t, body, "Dry run: of the 2 DEAD events among the 4 selected, 2 would be replayed.", "d1: not DEAD (DONE)", "ghost: not found", `id="replay-confirm"`)
	if statusOf(t, st, "x1") != core.StatusDead {
		t.Fatal("the preview changed a row")
	}
	token := csrfToken(t, body)

	// Without the confirmation box: refused.
	form := url.Values{"csrf": {token}, "id": {"x1", "x3"}}
	if code, _ := c.post("/replay", form, nil); code != http.StatusBadRequest {
		t.Errorf("unconfirmed replay = %d, want 400", code)
	}
	form.Set("confirm", "yes")
	code, body = c.post("/replay", form, nil)
	if code != http.StatusOK {
		t.Fatalf("replay = %d\n%s", code, body)
	}
	mustContain(t, body, "Replayed 2 of 2 matching DEAD events: they are NEW again")
	for id, want := range map[string]core.Status{"x1": core.StatusNew, "x3": core.StatusNew, "x2": core.StatusDead, "d1": core.StatusDone} {
		if got := statusOf(t, st, id); got != want {
			t.Errorf("%s is %v, want %v", id, got, want)
		}
	}

	// By filter.
	_, body = c.get("/replay?type=A")
	mustContain(t, body, "Dry run: of the 1 DEAD event matching the filter type = &#34;A&#34;, 1 would be replayed.", ">x2<")
	code, _ = c.post("/replay", url.Values{"csrf": {csrfToken(t, body)}, "type": {"A"}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK || statusOf(t, st, "x2") != core.StatusNew {
		t.Errorf("replay by filter = %d, x2 %v", code, statusOf(t, st, "x2"))
	}
}

func TestForgedOrReadOnlyPostsAreRefused(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	_, body := c.get("/replay?id=x1")
	token := csrfToken(t, body)
	good := url.Values{"csrf": {token}, "id": {"x1"}, "confirm": {"yes"}}

	for name, tc := range map[string]struct {
		form    url.Values
		headers map[string]string
		cookies bool
	}{
		"no token":       {form: url.Values{"id": {"x1"}, "confirm": {"yes"}}, cookies: true},
		"wrong token":    {form: url.Values{"csrf": {"AAAA" + token[4:]}, "id": {"x1"}, "confirm": {"yes"}}, cookies: true},
		"no cookie":      {form: good},
		"foreign origin": {form: good, headers: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": ""}, cookies: true},
		"cross-site":     {form: good, headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, cookies: true},
	} {
		t.Run(name, func(t *testing.T) {
			cc := c
			if !tc.cookies {
				cc = newClient(t, c.srv)
			}
			code, body := cc.post("/replay", tc.form, tc.headers)
			if code != http.StatusForbidden {
				t.Errorf("POST = %d, want 403\n%s", code, body)
			}
			if statusOf(t, st, "x1") != core.StatusDead {
				t.Fatal("a refused POST changed the row")
			}
		})
	}

	// Read-only: the preview offers no form and a POST is refused even
	// with a token minted by a dashboard that allowed mutations.
	secret := make([]byte, 32)
	rw := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true, Secret: secret}))
	_, body = rw.get("/replay?id=x1")
	token = csrfToken(t, body)
	ro := newClient(t, newDashboard(t, dashboard.Config{Store: st, Secret: secret}))
	ro.jar = rw.jar
	code, body := ro.get("/replay?id=x1")
	if code != http.StatusOK {
		t.Fatalf("read-only preview = %d", code)
	}
	mustContain(t, body, `id="read-only"`)
	mustNotContain(t, body, `id="confirm-form"`)
	if code, _ := ro.post("/replay", url.Values{"csrf": {token}, "id": {"x1"}, "confirm": {"yes"}}, nil); code != http.StatusForbidden {
		t.Errorf("read-only POST = %d, want 403", code)
	}
	if statusOf(t, st, "x1") != core.StatusDead {
		t.Fatal("a read-only POST changed the row")
	}
}

// seedWentOn seeds two ordered events of key under the skip policy,
// the first DEAD, the second behind it (NEW): the key went on without
// the first (any status of a later event counts), so the store refuses
// to replay it.
func seedWentOn(t *testing.T, st *jdbcstore.Store, key, first, second string) {
	t.Helper()
	ctx := t.Context()
	lease := core.Lease{Owner: owner, Until: time.Now().Add(time.Hour)}
	for _, id := range []string{first, second} {
		env, err := core.NewEvent("A").ID(id).OrderKey(key).OnDead(core.SkipOnDead).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := txctx.NewX(st.DB()).Do(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			_, err := st.InsertOrdered(ctx, tx, env, lease)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := st.MarkDead(ctx, owner, first, "boom"); err != nil || !ok {
		t.Fatalf("MarkDead %s: %v, %v", first, ok, err)
	}
}

// The preview is the store's dry run of the replay: an event the store
// would leave DEAD (its key went on without it under the skip policy)
// is named with the store's reason, not announced as replayed.
func TestReplayPreviewIsADryRun(t *testing.T) {
	st := newStore(t)
	seedWentOn(t, st, "k", "k1", "k2")
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))

	code, body := c.get("/replay?id=k1&id=x1")
	if code != http.StatusOK {
		t.Fatalf("preview = %d\n%s", code, body)
	}
	mustContain(t, body, "Dry run: of the 2 DEAD events among the 2 selected, 1 would be replayed and 1 would not (below).",
		"<li>k1: "+jdbcstore.ReasonKeyWentOn+"</li>", ">x1<", "replay this one", `id="replay-confirm"`)
	mustNotContain(t, body, ">k1<") // not in the table of what a replay moves back to NEW

	_, body = c.get("/replay?type=A")
	mustContain(t, body, "Dry run: of the 2 DEAD events matching the filter type = &#34;A&#34;, 1 would be replayed and 1 would not (below).",
		"<li>k1: "+jdbcstore.ReasonKeyWentOn+"</li>")

	// Nothing to replay: no confirmation form.
	_, body = c.get("/replay?id=k1")
	mustContain(t, body, "Dry run: of the 1 DEAD event among the 1 selected, 0 would be replayed and 1 would not (below). Nothing has changed yet.</p>",
		"<li>k1: "+jdbcstore.ReasonKeyWentOn+"</li>")
	mustNotContain(t, body, "1 DEAD event matches", "A replay moves", `id="confirm-form"`)
	for id, want := range map[string]core.Status{"k1": core.StatusDead, "k2": core.StatusNew, "x1": core.StatusDead} {
		if got := statusOf(t, st, id); got != want {
			t.Errorf("after the previews %s is %v, want %v", id, got, want)
		}
	}
}

// More ids selected than the preview checks: those past the first
// previewShown are not said to miss the other filters.
func TestReplayPreviewOfManyIDs(t *testing.T) {
	st := newStore(t)
	q := url.Values{}
	var evs []event
	for i := range 101 {
		id := fmt.Sprintf("x%03d", i)
		evs = append(evs, event{id: id, typ: "A", status: core.StatusDead})
		q.Add("id", id)
	}
	seed(t, st, evs...)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	code, body := c.get("/replay?" + q.Encode())
	if code != http.StatusOK {
		t.Fatalf("preview = %d\n%s", code, body)
	}
	mustContain(t, body, "Dry run: the first 100 DEAD events among the 101 selected were checked (there are more): 100 would be replayed.",
		"every matching DEAD event (more than 100)")
	mustNotContain(t, body, "does not match", `id="missing"`)
}

// "Select all" on a page of MaxPageSize DEAD events of the longest ids
// (core.MaxEventIDLen characters) replays them all: the preview and the
// confirmed replay take every id of the page (at most 200 ids, and 8 KiB
// of query, were taken; then 32 KiB, which ids of characters the URL
// escapes to 12 bytes each exceeded).
func TestReplaySelectAllOfAFullPage(t *testing.T) {
	for name, id := range map[string]func(int) string{
		"ascii": func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) },
		"4-byte runes": func(i int) string {
			return fmt.Sprintf("%s%03d", strings.Repeat("\U0001D538", core.MaxEventIDLen-3), i)
		},
	} {
		t.Run(name, func(t *testing.T) { replaySelectAll(t, id) })
	}
}

func replaySelectAll(t *testing.T, idOf func(int) string) {
	st := newStore(t)
	var evs []event
	for i := range dashboard.MaxPageSize {
		id := idOf(i)
		if n := utf8.RuneCountInString(id); n != core.MaxEventIDLen {
			t.Fatalf("id %q has %d characters, not the most (%d)", id, n, core.MaxEventIDLen)
		}
		evs = append(evs, event{id: id, typ: "A", status: core.StatusDead})
	}
	seed(t, st, evs...)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	_, body := c.get(fmt.Sprintf("/dead?limit=%d", dashboard.MaxPageSize))
	boxes := regexp.MustCompile(`type="checkbox" name="id" value="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(boxes) != dashboard.MaxPageSize {
		t.Fatalf("%d boxes on a page of %d", len(boxes), dashboard.MaxPageSize)
	}
	q := url.Values{}
	for _, b := range boxes {
		q.Add("id", b[1])
	}
	code, body := c.get("/replay?" + q.Encode())
	if code != http.StatusOK {
		t.Fatalf("preview of a full page selected = %d\n%s", code, body)
	}
	mustContain(t, body, "Dry run: the first 100 DEAD events among the 500 selected were checked (there are more): 100 would be replayed.")
	form := url.Values{"csrf": {csrfToken(t, body)}, "confirm": {"yes"}, "id": q["id"]}
	code, body = c.post("/replay", form, nil)
	if code != http.StatusOK {
		t.Fatalf("replay of a full page selected = %d\n%s", code, body)
	}
	mustContain(t, body, "Replayed 500 of 500 matching DEAD events")
	for _, e := range []event{evs[0], evs[len(evs)-1]} {
		if got := statusOf(t, st, e.id); got != core.StatusNew {
			t.Errorf("%s is %v, want NEW", e.id, got)
		}
	}
}

// The result says how many were replayed of how many matched, names
// those left DEAD with the store's reason, and says "stopped being DEAD
// meanwhile" only of those that did.
func TestReplayResultSaysWhyEachWasNotReplayed(t *testing.T) {
	st := newStore(t)
	seedWentOn(t, st, "k", "k1", "k2")
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead}, event{id: "x2", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	_, body := c.get("/replay?id=x1")
	token := csrfToken(t, body)

	// k1 posted anyway (a preview from before its key went on): refused.
	code, body := c.post("/replay", url.Values{"csrf": {token}, "id": {"k1", "x1"}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK {
		t.Fatalf("replay = %d\n%s", code, body)
	}
	mustContain(t, body, "Replayed 1 of 2 matching DEAD events: it is NEW again and a running outbox delivers it.",
		"1 was left DEAD, for the reason given below.", "<li>k1: "+jdbcstore.ReasonKeyWentOn+"</li>")
	mustNotContain(t, body, "stopped being DEAD")
	if got := statusOf(t, st, "k1"); got != core.StatusDead {
		t.Errorf("k1 is %v, want DEAD", got)
	}

	// x2 is deleted by the replay's own UPDATE: it stopped being DEAD
	// between the read of its batch and the write.
	if _, err := st.DB().Exec(`CREATE TRIGGER gone_x2 BEFORE UPDATE ON outbox_event WHEN OLD.event_id = 'x2'
		BEGIN DELETE FROM outbox_event WHERE event_id = 'x2'; END`); err != nil {
		t.Fatal(err)
	}
	_, body = c.post("/replay", url.Values{"csrf": {token}, "id": {"k1", "x2"}, "confirm": {"yes"}}, nil)
	mustContain(t, body, "Replayed 0 of 2 matching DEAD events.",
		"1 was left DEAD, for the reason given below.", "1 stopped being DEAD meanwhile (replayed or discarded elsewhere, or purged).",
		"<li>k1: "+jdbcstore.ReasonKeyWentOn+"</li>", "<li>x2: "+jdbcstore.ReasonNoLongerDead+"</li>")
	mustNotContain(t, body, "NEW again")
	if got := statusOf(t, st, "k1"); got != core.StatusDead {
		t.Errorf("k1 is %v, want DEAD", got)
	}

	_, body = c.post("/replay", url.Values{"csrf": {token}, "id": {"x1"}, "confirm": {"yes"}}, nil)
	mustContain(t, body, "No DEAD event matched: nothing was replayed.", "<li>x1: not DEAD, not found, or not matching</li>")
}

// A replay by a relative time bound replays what its preview listed: the
// confirmation carries the bound as the instant the preview resolved, not
// as typed ("until=10m" was worked out again at the POST, 10 minutes
// before the confirmation, and took in an event the preview left out).
func TestReplayByRelativeTimeReplaysWhatThePreviewListed(t *testing.T) {
	clock := testsupport.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: sqlite.Dialect, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	seed(t, st, event{id: "old", typ: "A", status: core.StatusDead}) // created at T
	clock.Advance(50 * time.Minute)
	seed(t, st, event{id: "young", typ: "A", status: core.StatusDead}) // created at T+50m
	clock.Advance(10*time.Minute - time.Second)                        // now T+60m-1s: young is 9m59s old
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true, Now: clock.Now}))
	_, body := c.get("/replay?until=10m")
	mustContain(t, body, "1 would be replayed", ">old<")
	mustNotContain(t, body, ">young<")
	form := url.Values{"csrf": {csrfToken(t, body)}, "confirm": {"yes"}}
	for _, name := range []string{"since", "until"} {
		if v := hiddenValue(body, name); v != "" {
			form.Set(name, v)
		}
	}
	clock.Advance(2 * time.Second) // the operator reads, then confirms: young is 10m1s old
	code, body := c.post("/replay", form, nil)
	if code != http.StatusOK {
		t.Fatalf("replay = %d\n%s", code, body)
	}
	if got := statusOf(t, st, "young"); got != core.StatusDead {
		t.Errorf("young is %v: the replay took in an event its preview did not list", got)
	}
	if got := statusOf(t, st, "old"); got != core.StatusNew {
		t.Errorf("old is %v, want NEW", got)
	}
}

// hiddenValue returns the value of the hidden input name in body, "" when
// there is none.
func hiddenValue(body, name string) string {
	m := regexp.MustCompile(`<input type="hidden" name="` + name + `" value="([^"]*)">`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// A POST whose form is not URL-encoded is answered 415 saying so: its
// CSRF token, in a multipart body ParseForm does not read, looked missing
// ("missing or invalid CSRF token").
func TestMultipartPostIsRefusedAsSuch(t *testing.T) {
	st := newStore(t)
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	resp, err := c.c.Post(c.srv.URL+"/replay", "multipart/form-data; boundary=x", strings.NewReader("--x--\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("multipart POST = %d, want 415", resp.StatusCode)
	}
}

// A POST names its database in the form or in the URL: a script's
// replay?db=… replays there, never on the first database, and a form and
// URL that disagree are refused.
func TestReplayPostNamesItsDatabase(t *testing.T) {
	a, b := newStore(t), newStore(t)
	seed(t, a, event{id: "in-a", typ: "A", status: core.StatusDead})
	seed(t, b, event{id: "in-b", typ: "A", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{AllowMutations: true,
		Databases: []dashboard.Database{{Name: "eu-1", Store: a}, {Name: "us-1", Store: b}}}))
	_, body := c.get("/replay?db=us-1&type=A")
	token := csrfToken(t, body)

	form := url.Values{"csrf": {token}, "type": {"A"}, "confirm": {"yes"}, "db": {"eu-1"}}
	if code, body := c.post("/replay?db=us-1", form, nil); code != http.StatusBadRequest || !strings.Contains(body, "different databases") {
		t.Errorf("form eu-1, URL us-1 = %d\n%s", code, body)
	}
	if statusOf(t, a, "in-a") != core.StatusDead || statusOf(t, b, "in-b") != core.StatusDead {
		t.Fatal("a refused replay changed a row")
	}
	form.Del("db")
	if code, body := c.post("/replay?db=us-1", form, nil); code != http.StatusOK {
		t.Fatalf("replay?db=us-1 = %d\n%s", code, body)
	}
	if got := statusOf(t, b, "in-b"); got != core.StatusNew {
		t.Errorf("us-1's event is %v, want NEW", got)
	}
	if got := statusOf(t, a, "in-a"); got != core.StatusDead {
		t.Errorf("eu-1's event is %v, want DEAD (the URL named us-1)", got)
	}
}
