package acceptance

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Three dispatchers, each with its own pool and owner, share one SQLite
// file while all publish and all poll: every event is delivered exactly
// once (no node dies), none is lost. The one duplicate at-least-once
// allows without a crash: a status write that failed (on a machine loaded
// enough for SQLite's lock to be held past StatusTimeout), after which the
// same node delivers the event again; it must be logged.
func TestMultiNodeSQLite(t *testing.T) {
	const nodes, perNode = 3, 200
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	dbs := make([]*sqlx.DB, nodes)
	for i := range dbs {
		db, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	if _, err := dbs[0].ExecContext(ctx, invocationsDDL); err != nil {
		t.Fatal(err)
	}
	obs := make([]*outbox.Outbox, nodes)
	m := &testsupport.Metrics{}
	logs := &testsupport.LogBuffer{}
	for i := range obs {
		ob, err := startNode(ctx, dbs[i], fmt.Sprintf("node-%d", i), logs.Logger(), m)
		if err != nil {
			t.Fatal(err)
		}
		obs[i] = ob
	}
	closeAll := func() {
		for _, ob := range obs {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := ob.Close(cctx); err != nil {
				t.Errorf("close: %v", err)
			}
			cancel()
		}
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		published = map[string]bool{}
	)
	for i, ob := range obs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids, err := publishShare(ctx, ob, fmt.Sprintf("node-%d", i), perNode)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, id := range ids {
				published[id] = true
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		closeAll()
		t.FailNow()
	}
	waitFor(t, "every event DONE", func() bool {
		var n int
		if err := dbs[0].GetContext(ctx, &n, `SELECT COUNT(*) FROM outbox_event WHERE status <> 1`); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	closeAll()
	l, err := readLedger(ctx, dbs[0], "outbox_event")
	if err != nil {
		t.Fatal(err)
	}
	failedWrites := logs.Count("status write failed")
	sameNode := func(nodes []string) bool {
		for _, n := range nodes[1:] {
			if n != nodes[0] {
				return false
			}
		}
		return failedWrites > 0
	}
	if dups := l.check(t, published, sameNode); dups != 0 {
		t.Logf("%d duplicate deliveries after %d logged status write failures", dups, failedWrites)
	}
	t.Logf("%d events: %d via the hot path, %d dropped and delivered by a poller (%d cold enqueues)",
		len(published), m.Hot.Load(), m.Dropped.Load(), m.Cold.Load())
}
