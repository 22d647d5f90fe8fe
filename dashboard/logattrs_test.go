package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dashboard"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// A failed read is logged with the attribute keys the rest of the outbox
// uses: error (not err), and store naming a database of several (not db,
// and nothing for a lone database), so that one log query finds every
// failure.
func TestFailedReadLogAttributes(t *testing.T) {
	a, b := newStore(t), newStore(t)
	seed(t, b, event{id: "in-b", typ: "B", status: core.StatusDead})
	logs := &testsupport.LogBuffer{}
	c := newClient(t, newDashboard(t, dashboard.Config{Logger: logs.Logger(),
		Databases: []dashboard.Database{{Name: "eu-1", Store: a}, {Name: "us-1", Store: b}}}))
	if err := b.DB().Close(); err != nil {
		t.Fatal(err)
	}
	if code, _ := c.get("/dead?db=us-1"); code != http.StatusInternalServerError {
		t.Fatalf("a page of a closed database = %d, want 500", code)
	}
	lines := logs.Lines("listing DEAD events failed")
	if len(lines) != 1 || !strings.Contains(lines[0], "store=us-1") || !strings.Contains(lines[0], " error=") ||
		strings.Contains(lines[0], " err=") || strings.Contains(lines[0], " db=") {
		t.Fatalf("logged %q; want one line with store=us-1 and error=", lines)
	}

	lone := newStore(t)
	logs = &testsupport.LogBuffer{}
	c = newClient(t, newDashboard(t, dashboard.Config{Store: lone, Logger: logs.Logger()}))
	if err := lone.DB().Close(); err != nil {
		t.Fatal(err)
	}
	c.get("/dead")
	lines = logs.Lines("listing DEAD events failed")
	if len(lines) != 1 || strings.Contains(lines[0], "store=") || !strings.Contains(lines[0], " error=") {
		t.Fatalf("logged %q; want one line with error= and no store", lines)
	}
}
