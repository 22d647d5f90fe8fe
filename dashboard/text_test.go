package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
)

// nextHref returns the link of id in body, unescaped for a request.
func nextHref(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`" href="`)
	if i < 0 {
		t.Fatalf("no %s link", id)
	}
	href := body[i+len(`id="`+id+`" href="`):]
	return strings.NewReplacer("&amp;", "&", "&#43;", "+").Replace(href[:strings.Index(href, `"`)])
}

// Event ids, types and tenants may hold any text core accepts (valid
// UTF-8 without NUL), control characters included: the pages take them,
// page past them and show them escaped.
func TestControlCharactersInIDsTypesAndTenants(t *testing.T) {
	st := newStore(t)
	seed(t, st, event{id: "a0", typ: "ty\t", tenant: "te\n", status: core.StatusDead},
		event{id: "a1\x1b", typ: "ty\t", tenant: "te\n", status: core.StatusDead},
		event{id: "a2 \r", typ: "ty\t", tenant: "te\n", status: core.StatusDead},
		event{id: "a3", typ: "ty\t", tenant: "te\n", status: core.StatusDead})
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))

	code, body := c.get("/dead?limit=2")
	if code != http.StatusOK {
		t.Fatalf("GET /dead = %d", code)
	}
	mustContain(t, body, `>a1\x1b<`, `>ty\t<`, `>te\n<`)
	mustNotContain(t, body, ">a1\x1b<")
	href := nextHref(t, body, "next-page")
	code, body = c.get(href)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", href, code, body)
	}
	mustContain(t, body, `>a2 \r<`, ">a3<")
	mustNotContain(t, body, ">a0<", `>a1\x1b<`)

	if code, body := c.get("/event?id=" + url.QueryEscape("a1\x1b")); code != http.StatusOK {
		t.Errorf("GET event a1\\x1b = %d: %s", code, body)
	}
	// The type link of the overview lists that type.
	_, body = c.get("/")
	href = "/dead?type=" + url.QueryEscape("ty\t")
	mustContain(t, body, `href="/dead?type=ty%09"`)
	if code, body := c.get(href); code != http.StatusOK || !strings.Contains(body, ">a3<") {
		t.Errorf("GET %s = %d", href, code)
	}
	// Replay by the tenant filter: exactly that tenant.
	code, body = c.get("/replay?tenant=" + url.QueryEscape("te\n"))
	if code != http.StatusOK || !strings.Contains(body, ">a3<") {
		t.Fatalf("replay preview = %d", code)
	}
	mustContain(t, body, `tenant = &#34;te\n&#34;`)
	// A form sends a line break as CR LF: an id holding one travels quoted.
	seed(t, st, event{id: "b\nc", typ: "ty\r", status: core.StatusDead})
	_, body = c.get("/dead?type=" + url.QueryEscape("ty\r"))
	m := regexp.MustCompile(`name="idq" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no quoted id in the list:\n%s", body)
	}
	code, body = c.get("/replay?idq=" + url.QueryEscape(html.UnescapeString(m[1])))
	if code != http.StatusOK || !strings.Contains(body, `>b\nc<`) {
		t.Fatalf("replay preview of the quoted id = %d:\n%s", code, body)
	}
	form := url.Values{"csrf": {csrfToken(t, body)}, "confirm": {"yes"}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1) {
		if m[1] != "csrf" {
			form.Add(m[1], html.UnescapeString(m[2]))
		}
	}
	if code, body := c.post("/replay", form, nil); code != http.StatusOK || statusOf(t, st, "b\nc") != core.StatusNew {
		t.Fatalf("POST %v = %d:\n%s", form, code, body)
	}
	// NUL never is an id, nor invalid UTF-8.
	for _, bad := range []string{"/event?id=a%00", "/dead?after=%ff", "/dead?type=%00"} {
		if code, _ := c.get(bad); code != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", bad, code)
		}
	}
}

// The inbox list pages past a message id holding a control character.
func TestInboxPagesPastControlCharacters(t *testing.T) {
	st := newStore(t)
	in, err := inbox.New(t.Context(), st.DB(), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m-0", "m-1\x07", "m-2"} {
		if err := in.Enqueue(t.Context(), inbox.Message{Source: "s\t", MessageID: id, Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, Inbox: in, PageSize: 2}))
	_, body := c.get("/inbox?status=pending")
	mustContain(t, body, `>m-1\a<`, `>s\t<`)
	href := nextHref(t, body, "inbox-next")
	code, body := c.get(href)
	if code != http.StatusOK || !strings.Contains(body, ">m-2<") {
		t.Fatalf("GET %s = %d:\n%s", href, code, body)
	}
}
