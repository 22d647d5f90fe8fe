package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
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
