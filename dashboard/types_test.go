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
	"github.com/outbox-go/outbox/jdbcstore"
)

// typeCounter is a dashboard.Store that records the most event types one
// read returned.
type typeCounter struct {
	*jdbcstore.Store
	most atomic.Int64
}

func (c *typeCounter) saw(n int) {
	for {
		m := c.most.Load()
		if int64(n) <= m || c.most.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}

func (c *typeCounter) Stats(ctx context.Context) (jdbcstore.Stats, error) {
	st, err := c.Store.Stats(ctx)
	c.saw(len(st.DeadByType))
	return st, err
}

func (c *typeCounter) StatsWith(ctx context.Context, o jdbcstore.StatsOptions) (jdbcstore.Stats, error) {
	st, err := c.Store.StatsWith(ctx, o)
	c.saw(len(st.DeadByType))
	return st, err
}

func (c *typeCounter) DeadTypes(ctx context.Context, offset, limit int) ([]jdbcstore.DeadTypeCount, error) {
	types, err := c.Store.DeadTypes(ctx, offset, limit)
	c.saw(len(types))
	return types, err
}

// seedDeadTypes inserts DEAD events of n types: one of each, and nine
// more of type-000000 so that it comes first.
func seedDeadTypes(t *testing.T, st *jdbcstore.Store, n int) {
	t.Helper()
	tx, err := st.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n + 9 {
		typ := fmt.Sprintf("type-%06d-%s", max(0, i-9), strings.Repeat("x", 100))
		env, err := core.NewEvent(typ).ID(fmt.Sprintf("e%06d", i)).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(t.Context(), tx, env, core.Lease{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec("UPDATE outbox_event SET status = 3, done_at = created_at"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// The overview shows the 10 types with the most DEAD events and /types a
// page of them: neither reads every type (20,000 types made a 9 MB page).
func TestManyDeadTypesAreReadAPageAtATime(t *testing.T) {
	st := newStore(t)
	const n = 5000
	seedDeadTypes(t, st, n)
	tc := &typeCounter{Store: st}
	c := newClient(t, newDashboard(t, dashboard.Config{Store: tc}))

	code, body := c.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d", code)
	}
	mustContain(t, body, "type-000000-", `id="count-DEAD">5009<`, `id="more-types"`)
	if got := strings.Count(body, `href="/dead?type=type-`); got != 10 {
		t.Errorf("the overview lists %d types, want 10", got)
	}

	code, body = c.get("/types")
	if code != http.StatusOK {
		t.Fatalf("GET /types = %d", code)
	}
	if len(body) > 100<<10 {
		t.Errorf("/types is %d bytes", len(body))
	}
	// Most DEAD events first.
	first := strings.Index(body, "type-000000-")
	if first < 0 || first > strings.Index(body, "type-000001-") {
		t.Errorf("type-000000 (10 DEAD) does not come first")
	}
	i := strings.Index(body, `id="next-page" href="`)
	if i < 0 {
		t.Fatal("/types has no next page link")
	}
	href := body[i+len(`id="next-page" href="`):]
	href = strings.ReplaceAll(href[:strings.Index(href, `"`)], "&amp;", "&")
	code, body = c.get(href)
	if code != http.StatusOK || !strings.Contains(body, fmt.Sprintf("type-%06d-", dashboard.DefaultPageSize)) ||
		strings.Contains(body, "type-000000-") {
		t.Errorf("GET %s = %d: not the second page", href, code)
	}
	if most := tc.most.Load(); most > dashboard.DefaultPageSize+1 {
		t.Errorf("a read returned %d types", most)
	}
	for _, bad := range []string{"/types?offset=-1", "/types?offset=x", "/types?offset=100000001"} {
		if code, _ := c.get(bad); code != http.StatusBadRequest {
			t.Errorf("GET %s = %d, want 400", bad, code)
		}
	}
}
