package acceptance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/txctx"
)

// Node settings shared by the multi-node tests: short leases so a dead
// node's events move on within seconds, a fast poller, a small hot queue
// so some events take the cold path.
const (
	nodeLease           = 3 * time.Second
	nodeListenerTimeout = time.Second
	nodeListenerGrace   = 500 * time.Millisecond
	nodeStatusTimeout   = time.Second
	nodePollInterval    = 100 * time.Millisecond
	nodeHotCapacity     = 8
)

// invocationsDDL creates the table every listener invocation is recorded in.
const invocationsDDL = `CREATE TABLE IF NOT EXISTS invocations (event_id VARCHAR(36) NOT NULL, node VARCHAR(64) NOT NULL)`

// nodeConfig is the outbox configuration of node name in a multi-node test.
func nodeConfig(name string, logger *slog.Logger, m core.Metrics) outbox.Config {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := outbox.Config{Logger: logger, Metrics: m}
	cfg.Dispatcher.Owner = name
	cfg.Dispatcher.Lease = nodeLease
	cfg.Dispatcher.ListenerTimeout = nodeListenerTimeout
	cfg.Dispatcher.ListenerGrace = nodeListenerGrace
	cfg.Dispatcher.StatusTimeout = nodeStatusTimeout
	cfg.Dispatcher.HotCapacity = nodeHotCapacity
	cfg.Poller.Interval = nodePollInterval
	cfg.Poller.BacklogInterval = 20 * time.Millisecond
	cfg.Poller.SkipRecent = 50 * time.Millisecond
	cfg.Poller.ReapInterval = time.Second
	return cfg
}

// startNode builds and starts node name on db; its listener records every
// invocation in the invocations table.
func startNode(ctx context.Context, db *sqlx.DB, name string, logger *slog.Logger, m core.Metrics) (*outbox.Outbox, error) {
	ob, err := outbox.New(ctx, db, nodeConfig(name, logger, m))
	if err != nil {
		return nil, err
	}
	insertInvocation := db.Rebind(`INSERT INTO invocations (event_id, node) VALUES (?, ?)`)
	ob.RegisterAll(core.ListenerFunc(func(ctx context.Context, e core.Envelope) error {
		_, err := db.ExecContext(ctx, insertInvocation, e.ID(), name)
		return err
	}))
	if err := ob.Start(ctx); err != nil {
		return nil, err
	}
	return ob, nil
}

// publishShare publishes n events from node, one per transaction, from a
// few goroutines, and returns the ids.
func publishShare(ctx context.Context, ob *outbox.Outbox, node string, n int) ([]string, error) {
	const writers = 4
	var (
		mu   sync.Mutex
		out  []string
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				env, err := core.NewEvent("NodeEvent").AggregateID(node).PayloadJSONString(fmt.Sprintf(`{"i":%d}`, i)).Build()
				if err != nil {
					errs <- err
					return
				}
				err = ob.InTx(ctx, func(ctx context.Context) error {
					if _, ok := txctx.From(ctx); !ok {
						return fmt.Errorf("no tx")
					}
					_, err := ob.Publish(ctx, env)
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("%s publish %d: %w", node, i, err)
					return
				}
				mu.Lock()
				out = append(out, env.ID())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

// ledger is what the invocations and outbox tables say after a run.
type ledger struct {
	rows        int                 // outbox rows
	notDone     int                 // rows not DONE
	invocations map[string][]string // event id → nodes that invoked it
}

func readLedger(ctx context.Context, db *sqlx.DB, table string) (ledger, error) {
	var l ledger
	if err := db.GetContext(ctx, &l.rows, `SELECT COUNT(*) FROM `+table); err != nil {
		return l, err
	}
	if err := db.GetContext(ctx, &l.notDone, `SELECT COUNT(*) FROM `+table+` WHERE status <> 1`); err != nil {
		return l, err
	}
	var inv []struct {
		ID   string `db:"event_id"`
		Node string `db:"node"`
	}
	if err := db.SelectContext(ctx, &inv, `SELECT event_id, node FROM invocations`); err != nil {
		return l, err
	}
	l.invocations = map[string][]string{}
	for _, r := range inv {
		l.invocations[r.ID] = append(l.invocations[r.ID], r.Node)
	}
	return l, nil
}

// check verifies the ledger against the published ids: every event DONE and
// invoked (lost = 0), no invocation of an unknown id (phantom = 0), and
// duplicates only where allowed(nodes) says so. It returns the number of
// duplicated events.
func (l ledger) check(t *testing.T, published map[string]bool, allowed func(nodes []string) bool) int {
	t.Helper()
	if l.rows != len(published) {
		t.Errorf("outbox has %d rows, %d events were published", l.rows, len(published))
	}
	if l.notDone != 0 {
		t.Errorf("%d events are not DONE", l.notDone)
	}
	lost, dups := 0, 0
	for id := range published {
		nodes := l.invocations[id]
		switch {
		case len(nodes) == 0:
			lost++
		case len(nodes) > 1:
			dups++
			if !allowed(nodes) {
				t.Errorf("event %s delivered %d times (by %v): a duplicate not explained by a killed node", id, len(nodes), nodes)
			}
		}
	}
	for id := range l.invocations {
		if !published[id] {
			t.Errorf("phantom delivery of %s", id)
		}
	}
	if lost > 0 {
		t.Errorf("lost %d of %d events", lost, len(published))
	}
	return dups
}
