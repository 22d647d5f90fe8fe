package jdbcstore_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Replaying DEAD events that are not ordered under the skip policy reads
// nothing from the keys table, so an account granted the outbox table
// alone (an application publishing no ordered event, as README's
// least-privilege accounts are) can replay them: the keys table is
// dropped here, as a missing privilege hides it. ReplayDead used to name
// it in every page's check ("SELECT command denied … outbox_event_keys",
// "permission denied for table outbox_event_keys").
func TestReplayWithoutTheKeysTable(t *testing.T) {
	for _, name := range []string{"mysql", "postgres"} {
		t.Run(name, func(t *testing.T) {
			st, db := orderedStores[name](t)
			ctx := t.Context()
			lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
			var ids []string
			for _, env := range []core.Envelope{
				mustEnv(t, core.NewEvent("Plain").PayloadJSONString(`{}`)),
				mustEnv(t, core.NewEvent("Blocking").PayloadJSONString(`{}`).OrderKey("k").OnDead(core.BlockOnDead)),
			} {
				inTx(t, db, func(ctx context.Context, tx core.Tx) {
					insert := st.InsertOrdered
					if env.OrderKey() == "" {
						insert = func(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease) (bool, error) {
							return true, st.Insert(ctx, ex, env, lease)
						}
					}
					if _, err := insert(ctx, tx, env, lease); err != nil {
						t.Fatalf("insert %s: %v", env.Type(), err)
					}
				})
				if ok, err := st.MarkDead(ctx, lease.Owner, env.ID(), "failed"); err != nil || !ok {
					t.Fatalf("MarkDead %s = %v, %v", env.Type(), ok, err)
				}
				ids = append(ids, env.ID())
			}
			slices.Sort(ids)
			if _, err := db.ExecContext(ctx, "DROP TABLE "+st.Dialect().QuoteIdent(st.Table()+"_keys")); err != nil {
				t.Fatal(err)
			}
			dry, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true, DryRun: true})
			if err != nil || !slices.Equal(dry.IDs, ids) {
				t.Fatalf("dry run = %+v, %v; want %v", dry, err, ids)
			}
			res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true})
			if err != nil || res.Replayed != 2 || !slices.Equal(res.IDs, ids) {
				t.Fatalf("ReplayDead = %+v, %v; want %v replayed", res, err, ids)
			}
		})
	}
}

// A replay of a skip-policy event that is still its key's last makes it
// hold the key again, and a transaction whose snapshot is older than the
// replay must see that: a REPEATABLE READ transaction publishing on the
// key afterwards either fails (PostgreSQL: serialization error, as for a
// concurrent publish) or leaves its event to the poller (MySQL/MariaDB,
// whose INSERT … SELECT reads the latest rows). On PostgreSQL the replay
// only locked the keys row, so the upsert went through and the insert,
// reading the replayed event DEAD in the old snapshot, took the hot lease:
// the event was delivered before the replayed one.
func TestReplayReachesOlderRepeatableReadPublisher(t *testing.T) {
	for _, name := range []string{"mysql", "postgres"} {
		t.Run(name, func(t *testing.T) {
			st, db := orderedStores[name](t)
			ctx := t.Context()
			lease := core.Lease{Owner: "node-1", Until: time.Now().Add(time.Minute)}
			first := mustEnv(t, core.NewEvent("Changed").PayloadJSONString(`{}`).OrderKey("k").OnDead(core.SkipOnDead))
			inTx(t, db, func(ctx context.Context, tx core.Tx) {
				if _, err := st.InsertOrdered(ctx, tx, first, lease); err != nil {
					t.Fatal(err)
				}
			})
			if ok, err := st.MarkDead(ctx, lease.Owner, first.ID(), "failed"); err != nil || !ok {
				t.Fatalf("MarkDead = %v, %v", ok, err)
			}
			tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			var n int
			if err := tx.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+st.Table()); err != nil { // the snapshot
				t.Fatal(err)
			}
			res, err := st.ReplayDead(ctx, jdbcstore.DeadFilter{IDs: []string{first.ID()}}, jdbcstore.ReplayOptions{})
			if err != nil || res.Replayed != 1 {
				t.Fatalf("ReplayDead = %+v, %v", res, err)
			}
			next := mustEnv(t, core.NewEvent("Changed").PayloadJSONString(`{}`).OrderKey("k").OnDead(core.SkipOnDead))
			leased, err := st.InsertOrdered(ctx, tx, next, lease)
			switch {
			case err != nil:
				t.Logf("publish after the replay refused: %v", err)
			case leased:
				t.Fatal("the event after the replayed one took the hot lease: it would be delivered before it")
			}
		})
	}
}
