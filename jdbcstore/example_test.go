package jdbcstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	ctx := context.Background()
	store, err := jdbcstore.New(db, jdbcstore.Config{}) // dialect detected from the "sqlite3" driver
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// Insert an event in the same transaction as the business write.
	env, err := core.NewEvent("UserCreated").AggregateType("User").AggregateID("42").
		PayloadJSONString(`{"name":"Ada"}`).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// An unowned row: any node's poller may claim it.
	if err := store.Insert(ctx, tx, env, core.Lease{}); err != nil {
		_ = tx.Rollback()
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}

	pending, err := store.PollPending(ctx, time.Now().Add(time.Second), 0, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Dialect().Name(), store.Table(), len(pending), pending[0].Type, pending[0].Status)
	// Output: sqlite outbox_event 1 UserCreated NEW
}

// A DEAD event blocks its ordering key; discarding it releases the key.
func ExampleStore_DiscardDead() {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	store, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err)
		return
	}

	// Two events of account 42, in order; the first is leased to node-a.
	lease := core.Lease{Owner: "node-a", Until: time.Now().Add(time.Minute)}
	for _, id := range []string{"debit-1", "debit-2"} {
		env, err := core.NewEvent("AccountDebited").ID(id).AggregateType("Account").AggregateID("42").
			Ordered().PayloadJSONString(`{}`).Build()
		if err != nil {
			fmt.Println(err)
			return
		}
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		if _, err := store.InsertOrdered(ctx, tx, env, lease); err != nil {
			_ = tx.Rollback()
			fmt.Println(err)
			return
		}
		if err := tx.Commit(); err != nil {
			fmt.Println(err)
			return
		}
	}
	// The first one fails for good: the key is blocked.
	if _, err := store.MarkDead(ctx, "node-a", "debit-1", "ledger rejected it"); err != nil {
		fmt.Println(err)
		return
	}
	blocked, err := store.BlockedKeys(ctx, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range blocked {
		fmt.Printf("blocked: %s by %s (position %d): %s\n", b.Key, b.EventID, b.Seq, b.LastError)
	}

	res, err := store.DiscardDead(ctx, jdbcstore.DeadFilter{IDs: []string{"debit-1"}}, jdbcstore.DiscardOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("discarded:", res.Discarded)
	now := time.Now()
	claimed, err := store.ClaimDue(ctx, core.ClaimRequest{Owner: "node-b", Now: now.Add(time.Minute), LeaseUntil: now.Add(2 * time.Minute), Limit: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range claimed {
		fmt.Println("next:", r.ID, r.OrderKey, r.OrderSeq)
	}
	// Output:
	// blocked: Account:42 by debit-1 (position 1): ledger rejected it
	// discarded: 1
	// next: debit-2 Account:42 2
}
