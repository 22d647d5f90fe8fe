package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/txctx"
)

// An event id published, rolled back to a savepoint and published again
// with another payload in the same transaction (an id derived from a
// business key; an ORM retrying a nested transaction) is delivered once,
// as committed. The first publish's hand-off found the id stored after
// commit and delivered its own payload, which never committed; the
// dispatcher, holding the id, then dropped the committed event, and its
// row was marked DONE undelivered. On every database, through Publish and
// PublishAll, with the rollback run through the Tx or on its raw
// transaction.
func TestSavepointRepublishedIDDeliversTheCommittedEvent(t *testing.T) {
	for dbName, open := range testDatabases {
		t.Run(dbName, func(t *testing.T) {
			ctx := context.Background()
			db := open(t, "republish.db")
			cfg := outbox.Config{Logger: quietLogger()}
			cfg.Dispatcher.Workers = 1 // the hot queue in order: a stale hand-off comes first
			cfg.Poller.Interval = time.Hour
			ob, err := outbox.New(ctx, db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			type delivery struct{ id, payload string }
			seen := make(chan delivery, 16)
			ob.RegisterFunc("E", func(_ context.Context, e outbox.Envelope) error {
				seen <- delivery{e.ID(), string(e.Payload())}
				return nil
			})
			startUntilCleanup(t, ob)
			build := func(id, v string) outbox.Envelope {
				env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{"v":"` + v + `"}`).Build()
				if err != nil {
					t.Fatal(err)
				}
				return env
			}
			for i, tc := range []struct {
				name    string
				raw     bool
				publish func(ctx context.Context, env outbox.Envelope) error
			}{
				{"Publish", false, func(ctx context.Context, env outbox.Envelope) error { _, err := ob.Publish(ctx, env); return err }},
				{"PublishAll", false, func(ctx context.Context, env outbox.Envelope) error { _, err := ob.PublishAll(ctx, env); return err }},
				{"Publish, raw transaction", true, func(ctx context.Context, env outbox.Envelope) error { _, err := ob.Publish(ctx, env); return err }},
			} {
				id := "order-" + string(rune('a'+i))
				err := ob.InTx(ctx, func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					exec := tx.ExecContext
					if tc.raw {
						exec = tx.SQL().ExecContext
					}
					if _, err := exec(ctx, "SAVEPOINT s1"); err != nil {
						return err
					}
					if err := tc.publish(ctx, build(id, "rolled back")); err != nil {
						return err
					}
					if _, err := exec(ctx, "ROLLBACK TO SAVEPOINT s1"); err != nil {
						return err
					}
					return tc.publish(ctx, build(id, "committed"))
				})
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				got := testsupport.Recv(t, 30*time.Second, seen, "the delivery of "+id)
				if got.id != id || !strings.Contains(got.payload, "committed") || strings.Contains(got.payload, "rolled back") {
					t.Fatalf("%s: delivered %s %s, want %s with the committed payload", tc.name, got.id, got.payload, id)
				}
				// Nothing more of that id: the next delivery is a later event's.
				marker := event(t)
				if err := ob.InTx(ctx, func(ctx context.Context) error { _, err := ob.Publish(ctx, marker); return err }); err != nil {
					t.Fatal(err)
				}
				if next := testsupport.Recv(t, 30*time.Second, seen, "the marker's delivery"); next.id != marker.ID() {
					t.Fatalf("%s: delivered %s %s again, want only the marker %s after it", tc.name, next.id, next.payload, marker.ID())
				}
			}
		})
	}
}
