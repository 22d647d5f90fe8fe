package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
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

	// Preview of selected ids: a dry run that changes nothing.
	code, body := c.get("/replay?id=x1&id=x3&id=d1&id=ghost")
	if code != http.StatusOK {
		t.Fatalf("preview = %d\n%s", code, body)
	}
	mustContain(t, body, "Dry run: 2 DEAD events match", "d1: not DEAD (DONE)", "ghost: not found", `id="replay-confirm"`)
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
	mustContain(t, body, "Replayed 2 of 2")
	for id, want := range map[string]core.Status{"x1": core.StatusNew, "x3": core.StatusNew, "x2": core.StatusDead, "d1": core.StatusDone} {
		if got := statusOf(t, st, id); got != want {
			t.Errorf("%s is %v, want %v", id, got, want)
		}
	}

	// By filter.
	_, body = c.get("/replay?type=A")
	mustContain(t, body, "Dry run: 1 DEAD event matches", ">x2<")
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

// A replay names the events it left DEAD with the store's reason: an
// ordered event under the skip policy whose key went on without it.
func TestReplayNamesWhatItLeftDead(t *testing.T) {
	st := newStore(t)
	ctx := t.Context()
	lease := core.Lease{Owner: owner, Until: time.Now().Add(time.Hour)}
	for _, id := range []string{"k1", "k2"} {
		env, err := core.NewEvent("A").ID(id).OrderKey("k").OnDead(core.SkipOnDead).PayloadJSONString(`{}`).Build()
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
	if ok, err := st.MarkDead(ctx, owner, "k1", "boom"); err != nil || !ok {
		t.Fatalf("MarkDead k1: %v, %v", ok, err)
	}
	// k2, inserted behind k1, waits unowned: the key went on (any status
	// of a later event counts).
	c := newClient(t, newDashboard(t, dashboard.Config{Store: st, AllowMutations: true}))
	_, body := c.get("/replay?id=k1")
	code, body := c.post("/replay", url.Values{"csrf": {csrfToken(t, body)}, "id": {"k1"}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK {
		t.Fatalf("replay = %d\n%s", code, body)
	}
	mustContain(t, body, "k1: its key went on without it under the skip policy")
	if got := statusOf(t, st, "k1"); got != core.StatusDead {
		t.Errorf("k1 is %v, want DEAD", got)
	}
}
