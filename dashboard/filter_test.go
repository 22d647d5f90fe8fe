package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/internal/timearg"
)

// A type filter is exact: " order.created" (a type of its own) never
// lists, previews or replays order.created.
func TestTypeAndTenantFiltersAreExact(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "legit1", typ: "order.created", tenant: "acme", status: core.StatusDead},
		event{id: "evil1", typ: " order.created", tenant: " acme", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	_, body := c.get("/types")
	var href string
	for _, l := range strings.Split(body, `href="`)[1:] {
		l = strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(l[:strings.Index(l, `"`)])
		if strings.HasPrefix(l, "/replay?type=+order") {
			href = l
		}
	}
	if href == "" {
		t.Fatalf("no replay link for %q in /types:\n%s", " order.created", body)
	}
	code, body := c.get(href)
	if code != http.StatusOK || !strings.Contains(body, ">evil1<") || strings.Contains(body, ">legit1<") {
		t.Fatalf("GET %s = %d, want evil1 only:\n%s", href, code, body)
	}
	mustContain(t, body, `type = &#34; order.created&#34;`)
	for _, q := range []string{"?type=+order.created", "?tenant=+acme", "?type=order.created+", "?tenant=acme%20"} {
		_, body := c.get("/dead" + q)
		if strings.Contains(body, ">legit1<") {
			t.Errorf("GET /dead%s lists legit1", q)
		}
		if strings.HasSuffix(q, "+") || strings.HasSuffix(q, "%20") {
			mustContain(t, body, "starts or ends with a space")
		}
	}
	tok := csrfToken(t, body)
	if code, _ := c.post("/replay", url.Values{"csrf": {tok}, "type": {" order.created"}, "confirm": {"yes"}}, nil); code != http.StatusOK {
		t.Fatalf("POST replay = %d", code)
	}
	if s := statusOf(t, st, "legit1"); s != core.StatusDead {
		t.Errorf("legit1 is %s after a replay of type %q", s, " order.created")
	}
	if s := statusOf(t, st, "evil1"); s != core.StatusNew {
		t.Errorf("evil1 is %s after its replay", s)
	}
}

// The time filters take what outboxctl's --since and --until take
// (timearg.Time), durations ago from Config.Now and years before 1970
// included, and refuse what it refuses in its words.
func TestTimeFiltersAreOutboxctls(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "x1", typ: "A", status: core.StatusDead})
	now := time.Now().Add(30 * 24 * time.Hour) // the events were created 30 days ago
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true, Now: func() time.Time { return now }}))
	for q, listed := range map[string]bool{
		"since=7d": false, "since=31d": true, "since=36h&type=A": false, "since=1000h": true,
		"until=7d": true, "until=1d12h": true, "until=31d": false,
		"since=1969-07-20": true, "since=1900-01-01T00:00:00Z&until=1969-07-20": false,
		"since=2000-01-01+10:00": true, "until=2000-01-01T10:00:00.5-01:00": false,
	} {
		for _, page := range []string{"/dead?", "/replay?"} {
			code, body := c.get(page + q)
			if got := strings.Contains(body, ">x1<"); code != http.StatusOK || got != listed {
				t.Errorf("GET %s%s = %d, lists x1: %v, want %v", page, q, code, got, listed)
			}
		}
	}
	// The replay confirmed takes the same bound again.
	_, body := c.get("/replay?since=31d")
	if code, _ := c.post("/replay", url.Values{"csrf": {csrfToken(t, body)}, "since": {"31d"}, "confirm": {"yes"}}, nil); code != http.StatusOK {
		t.Fatalf("replay since=31d = %d", code)
	}
	if got := statusOf(t, st, "x1"); got != core.StatusNew {
		t.Errorf("x1 is %v after the replay since=31d, want NEW", got)
	}

	for _, s := range []string{"yesterday", "0001-01-01", "-1h", "7days"} {
		_, want := timearg.Time(s, now)
		for _, page := range []string{"/dead", "/replay"} {
			code, body := c.get(page + "?" + url.Values{"until": {s}}.Encode())
			if code != http.StatusBadRequest {
				t.Errorf("GET %s?until=%s = %d, want 400", page, s, code)
			}
			mustContain(t, body, html.EscapeString("until: "+want.Error()))
		}
	}
}
