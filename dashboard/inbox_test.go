package dashboard_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/jdbcstore"
)

func TestInboxPages(t *testing.T) {
	st := newStore(t)
	in, err := inbox.New(t.Context(), st.DB(), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		err := in.Enqueue(t.Context(), inbox.Message{Source: "billing", MessageID: fmt.Sprintf("m-%d", i), Topic: "invoice",
			Payload: []byte(`{"iban":"DE89 3704"}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	recs, err := in.Claim(t.Context(), "w", time.Minute, 3)
	if err != nil || len(recs) != 3 {
		t.Fatal(len(recs), err)
	}
	keys := []inbox.Key{recs[0].Key(), recs[1].Key(), recs[2].Key()}
	if _, err := in.Fail(t.Context(), "w", keys, `<script>window.x=1</script> bad invoice`); err != nil {
		t.Fatal(err)
	}

	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, Inbox: in, PageSize: 2}))
	code, body := c.get("/inbox")
	if code != http.StatusOK {
		t.Fatalf("GET /inbox = %d\n%s", code, body)
	}
	mustContain(t, body, `id="inbox-count-Dead">3<`, `id="inbox-count-Processing">1<`, ">m-0<", ">m-1<",
		"&lt;script&gt;window.x=1&lt;/script&gt; bad invoice", `id="inbox-next" href="/inbox?after_id=m-1&amp;after_source=billing&amp;limit=2&amp;status=dead"`,
		"Payloads are hidden")
	mustNotContain(t, body, ">m-2<", "DE89", "<script>window")
	_, body = c.get("/inbox?after_id=m-1&after_source=billing&limit=2&status=dead")
	mustContain(t, body, ">m-2<")
	mustNotContain(t, body, ">m-1<", "inbox-next")
	_, body = c.get("/inbox?status=pending")
	mustContain(t, body, ">m-3<")
	mustNotContain(t, body, ">m-0<")
	// The overview links the inbox.
	_, body = c.get("/")
	mustContain(t, body, `href="/inbox"`)

	for _, p := range []string{"/inbox?status=done", "/inbox?after_id=x", "/inbox?limit=0", "/inbox?after_source=%00&after_id=x"} {
		if code, _ := c.get(p); code != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", p, code)
		}
	}

	shown := newClient(t, newDashboard(t, dashboard.Config{Store: st, Inbox: in, ShowPayloads: true}))
	_, body = shown.get("/inbox")
	mustContain(t, body, "DE89 3704")

	none := newClient(t, newDashboard(t, dashboard.Config{Store: st}))
	if code, _ := none.get("/inbox"); code != http.StatusNotFound {
		t.Errorf("GET /inbox without an inbox = %d, want 404", code)
	}
	_, body = none.get("/")
	mustNotContain(t, body, `href="/inbox"`)
	if _, err := dashboard.New(dashboard.Config{Inbox: in, Databases: []dashboard.Database{{Name: "a", Store: st}}}); err == nil ||
		!strings.Contains(err.Error(), "Inbox") {
		t.Errorf("Inbox without Store: %v", err)
	}
}

// A nil *inbox.Inbox is no inbox (the README's snippet calls the field
// optional): no Inbox link, 404 for the inbox page. It used to pass New,
// held in the interface, and panic on GET /inbox. A nil *jdbcstore.Store
// is refused as no store.
func TestNilInboxIsNone(t *testing.T) {
	st := newStore(t)
	var in *inbox.Inbox
	for name, cfg := range map[string]dashboard.Config{
		"single":     {Store: st, Inbox: in},
		"tenant set": {Databases: []dashboard.Database{{Name: "a", Store: st, Inbox: in}}},
		// No Store: the nil inbox is none, so not one without Store.
		"tenant set, top-level nil inbox": {Databases: []dashboard.Database{{Name: "a", Store: st}}, Inbox: in},
	} {
		c := newClient(t, newDashboard(t, cfg))
		if code, body := c.get("/inbox"); code != http.StatusNotFound {
			t.Errorf("%s: GET /inbox with a nil *inbox.Inbox = %d, want 404\n%s", name, code, body)
		}
		code, body := c.get("/")
		if code != http.StatusOK {
			t.Errorf("%s: GET / = %d\n%s", name, code, body)
		}
		mustNotContain(t, body, `href="/inbox"`)
	}

	var nilStore *jdbcstore.Store
	for name, cfg := range map[string]dashboard.Config{
		"Store":              {Store: nilStore},
		"Databases[0].Store": {Databases: []dashboard.Database{{Name: "a", Store: nilStore}}},
	} {
		_, err := dashboard.New(cfg)
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != name {
			t.Errorf("a nil *jdbcstore.Store as %s: %v, want a ConfigError of that field", name, err)
		}
	}
}
