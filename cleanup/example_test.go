package cleanup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A cleaner deletes delivered (DONE) rows once they are older than
// DoneRetention, and DEAD rows after the longer DeadRetention, so the
// outbox table does not grow forever. Start runs it within the first minute, then every Interval (±10%);
// RunOnce runs one purge, as here. The store's clock is moved forward
// instead of waiting a week.
func Example() {
	dir, err := os.MkdirTemp("", "cleanup-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "shop.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := jdbcstore.New(db, jdbcstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// Two events: one delivered (DONE), one still waiting (NEW).
	lease := core.Lease{Owner: "node-1", Until: now.Add(time.Minute)}
	for _, id := range []string{"delivered", "waiting"} {
		env, err := core.NewEvent("OrderPlaced").ID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := store.Insert(ctx, db, env, lease); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := store.MarkDone(ctx, "node-1", []string{"delivered"}); err != nil {
		fmt.Println(err)
		return
	}

	c, err := cleanup.New(store, cleanup.Config{DoneRetention: 7 * 24 * time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.RunOnce(ctx)
	fmt.Println("at once: removed", res.Done, err)

	now = now.Add(8 * 24 * time.Hour)
	res, err = c.RunOnce(ctx)
	fmt.Println("after 8 days: removed", res.Done, err)

	counts, err := store.CountByStatus(ctx)
	fmt.Println("left:", counts[core.StatusDone], "DONE,", counts[core.StatusNew], "NEW", err)
	// Output:
	// at once: removed 0 <nil>
	// after 8 days: removed 1 <nil>
	// left: 0 DONE, 1 NEW <nil>
}
