package inbox_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// CountByStatus and List: counts per status, pages in key order, bad
// arguments refused.
func testList(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	for i := range 5 {
		e.enqueue(inbox.Message{Source: "s", MessageID: fmt.Sprintf("m-%d", i)})
	}
	e.enqueue(inbox.Message{Source: "a", MessageID: "z"})
	claimed := e.claim("w", time.Minute, 3) // a/z, s/m-0, s/m-1 (all due now: key order)
	var keys []inbox.Key
	for _, r := range claimed {
		keys = append(keys, r.Key())
	}
	if n, err := e.in.Fail(e.ctx, "w", keys, "poison"); err != nil || n != 3 {
		t.Fatalf("Fail = %d, %v", n, err)
	}
	if err := e.in.MarkProcessed(e.ctx, "s", "done-1"); err != nil {
		t.Fatal(err)
	}

	counts, err := e.in.CountByStatus(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "Dead", counts[inbox.StatusDead], 3)
	mustEqual(t, "Processing", counts[inbox.StatusProcessing], 3)
	mustEqual(t, "Done", counts[inbox.StatusDone], 1)

	page, err := e.in.List(e.ctx, inbox.StatusDead, inbox.Key{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "page 1", strings.Join(keysOf(page), " "), "a/z s/m-0")
	mustEqual(t, "error", page[0].LastError, "poison")
	rest, err := e.in.List(e.ctx, inbox.StatusDead, page[1].Key(), 2)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "page 2", len(rest), 1)
	pending, err := e.in.List(e.ctx, inbox.StatusProcessing, inbox.Key{}, inbox.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "pending", len(pending), 3)

	for _, bad := range []struct {
		status inbox.Status
		after  inbox.Key
		limit  int
	}{
		{inbox.StatusDead, inbox.Key{}, 0},
		{inbox.StatusDead, inbox.Key{}, inbox.MaxListLimit + 1},
		{inbox.Status(9), inbox.Key{}, 1},
		{inbox.StatusDead, inbox.Key{Source: "s"}, 1},
	} {
		if _, err := e.in.List(e.ctx, bad.status, bad.after, bad.limit); err == nil ||
			!(errors.Is(err, core.ErrInvalidConfig) || errors.Is(err, inbox.ErrEmptyMessageID)) {
			t.Errorf("List(%v, %v, %d) = %v, want a validation error", bad.status, bad.after, bad.limit, err)
		}
	}
}
