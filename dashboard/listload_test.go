package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/jdbcstore"
)

// payloadCounter is a dashboard.Store that counts the payload and header
// bytes that the reads returning whole events hand to the dashboard.
type payloadCounter struct {
	*jdbcstore.Store
	bytes atomic.Int64
}

func (p *payloadCounter) count(recs ...core.Record) {
	for _, r := range recs {
		p.bytes.Add(int64(len(r.Payload) + len(r.HeadersJSON)))
	}
}

func (p *payloadCounter) ListDead(ctx context.Context, f jdbcstore.DeadFilter, after string, limit int) ([]core.Record, error) {
	recs, err := p.Store.ListDead(ctx, f, after, limit)
	p.count(recs...)
	return recs, err
}

func (p *payloadCounter) Get(ctx context.Context, id string) (core.Record, error) {
	rec, err := p.Store.Get(ctx, id)
	p.count(rec)
	return rec, err
}

// The dead letters list and the replay preview show ids, types, tenants
// and errors: they must not read the payloads (up to 1 MiB each) and
// headers (up to 64 KiB) of the events they list.
func TestDeadListAndReplayPreviewReadNoPayloads(t *testing.T) {
	st := newStore(t)
	big := make([]byte, core.MaxPayloadBytes)
	const n = 20
	for i := range n {
		big[0] = byte(i)
		env, err := core.NewEvent("big").ID(fmt.Sprintf("b%02d", i)).TenantID("acme").Header("h", "v").PayloadBytes(big).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(t.Context(), st.DB(), env, core.Lease{Owner: owner}); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.MarkDead(t.Context(), owner, env.ID(), "poison"); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	pc := &payloadCounter{Store: st}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: pc, AllowMutations: true}))
	for _, p := range []string{"/dead?limit=100", "/dead?type=big&tenant=acme", "/replay?type=big", "/replay?all=1",
		"/replay?id=b03&id=b04&id=nope"} {
		code, body := c.get(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d\n%s", p, code, body)
		}
		mustContain(t, body, ">b03<", "poison")
		if b := pc.bytes.Load(); b != 0 {
			t.Fatalf("GET %s read %d bytes of payloads and headers", p, b)
		}
	}
	// The event page reads its one event in full.
	if code, _ := c.get("/event?id=b03"); code != http.StatusOK {
		t.Fatalf("GET event = %d", code)
	}
	if b, want := pc.bytes.Load(), int64(core.MaxPayloadBytes+len(`{"h":"v"}`)); b != want {
		t.Errorf("the event page read %d bytes of payload and headers, want %d", b, want)
	}
}

// inboxCounter is a dashboard.Inbox that counts the payload bytes the
// lists hand to the dashboard.
type inboxCounter struct {
	*inbox.Inbox
	bytes atomic.Int64
}

func (c *inboxCounter) count(recs []inbox.Record) {
	for _, r := range recs {
		c.bytes.Add(int64(len(r.Payload)))
	}
}

func (c *inboxCounter) List(ctx context.Context, status inbox.Status, after inbox.Key, limit int) ([]inbox.Record, error) {
	recs, err := c.Inbox.List(ctx, status, after, limit)
	c.count(recs)
	return recs, err
}

func (c *inboxCounter) ListPreview(ctx context.Context, status inbox.Status, after inbox.Key, limit, previewBytes int) ([]inbox.Record, error) {
	recs, err := c.Inbox.ListPreview(ctx, status, after, limit, previewBytes)
	c.count(recs)
	return recs, err
}

// The inbox list shows at most 200 characters of a payload, and only with
// ShowPayloads: it must not read whole payloads (up to 1 MiB each).
func TestInboxListReadsNoWholePayloads(t *testing.T) {
	st := newStore(t)
	in, err := inbox.New(t.Context(), st.DB(), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(strings.Repeat("é", inbox.MaxPayloadBytes/2))
	const n = 20
	for i := range n {
		if err := in.Enqueue(t.Context(), inbox.Message{Source: "s", MessageID: fmt.Sprintf("m-%02d", i), Topic: "t", Payload: big}); err != nil {
			t.Fatal(err)
		}
	}
	for _, show := range []bool{false, true} {
		ic := &inboxCounter{Inbox: in}
		c := newClient(t, newDashboard(t, dashboard.Config{Store: st, Inbox: ic, ShowPayloads: show}))
		code, body := c.get("/inbox?status=pending")
		if code != http.StatusOK {
			t.Fatalf("GET /inbox = %d\n%s", code, body)
		}
		mustContain(t, body, ">m-00<", ">m-19<")
		if show {
			mustContain(t, body, strings.Repeat("é", 200)+"…")
		}
		if b := ic.bytes.Load(); b > n*1000 {
			t.Errorf("ShowPayloads %v: the inbox list read %d bytes of payloads", show, b)
		}
	}
}
