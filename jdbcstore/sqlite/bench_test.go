package sqlite_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/txctx"
)

// BenchmarkOrderedPublish publishes events of one key in transactions with
// after-commit hooks (txctx), each event set DONE before the next (not
// timed): by the store, which then remembers the key's last event as DONE
// and publishes the next without reading it, or behind the store's back,
// so that it reads the key's last event first.
func BenchmarkOrderedPublish(b *testing.B) {
	for _, bc := range []struct {
		name       string
		remembered bool
	}{{"remembered", true}, {"read", false}} {
		b.Run(bc.name, func(b *testing.B) {
			st, _ := twoStores(b)
			ctx := context.Background()
			lease := core.Lease{Owner: testOwner, Until: time.Now().Add(time.Hour)}
			b.ResetTimer()
			for i := range b.N {
				env, err := core.NewEvent("Keyed").ID("b-" + strconv.Itoa(i)).OrderKey("k").PayloadJSONString(`{}`).Build()
				if err != nil {
					b.Fatal(err)
				}
				var leased bool
				err = txctx.NewX(st.DB()).Do(ctx, func(ctx context.Context) error {
					tx, _ := txctx.From(ctx)
					leased, err = st.InsertOrdered(ctx, tx, env, lease)
					return err
				})
				if err != nil || !leased {
					b.Fatalf("publish %d: leased %v, %v", i, leased, err)
				}
				b.StopTimer()
				if bc.remembered {
					if n, err := st.MarkDone(ctx, testOwner, []string{env.ID()}); err != nil || n != 1 {
						b.Fatalf("MarkDone %d: %d, %v", i, n, err)
					}
				} else if _, err := st.DB().ExecContext(ctx, "UPDATE outbox_event SET status = 1, done_at = 0,"+
					" locked_by = NULL, locked_until = NULL WHERE event_id = ?", env.ID()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
