package acceptance

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/txctx"
)

// outageDatabase is the database side of an outage test: the framework's
// pool on an empty database no other test uses, an admin pool whose
// connections are never taken for the framework's, and the
// database-specific ways to lock the outbox table, to see the framework's
// statements in the server and to end its connections. Its methods fail
// the test on an error.
type outageDatabase interface {
	// pools returns the framework's (and the publishers') pool and the
	// admin's.
	pools() (framework, admin *sqlx.DB)
	// table is the table name (outbox_event, orders) as the admin pool
	// names it.
	table(name string) string
	// lockTable locks the outbox table against every statement of the
	// framework, reads included, on a connection of the admin, and counts
	// the rows not DONE under the lock; unlock releases it.
	lockTable(ctx context.Context) (pending int, unlock func() error)
	// blocked counts the framework's statements waiting in the server
	// whose text matches the LIKE pattern.
	blocked(pattern string) int
	// killFramework ends every connection of the framework's pool, waits
	// until they are gone and returns how many it ended.
	killFramework() int
	// addr is the server's TCP address.
	addr() string
	// uptime is how long the server process has been running.
	uptime() time.Duration
}

// testKilledConnections: the database goes away under load, three
// times: every connection of the framework's pool is killed while
// publishers, dispatcher and poller run. To make each kill hit statements
// in flight rather than idle connections (which the driver replaces
// unnoticed), an admin session holds the outbox table locked during the
// incident, so the poller's claim, the coalesced DONE write and the
// publishers' inserts are all blocked in the server when their
// connections are killed, a few times per incident. Before each incident
// the listeners pause until a backlog of events builds up; all of them
// are affected.
//
// Then, with nobody's help: every committed event ends DONE (publishes
// whose transaction was killed fail, which is allowed), the poller logs one
// ERROR per incident and "poller recovered" after it, and the ERROR lines
// in total stay a small constant per incident, far below the number of
// events the incidents affected.
// It returns the environment for the database's own checks.
func testKilledConnections(t *testing.T, d outageDatabase) *outageEnv {
	const (
		rounds  = 3
		passes  = 3   // kills per incident
		backlog = 200 // events committed while the listeners are paused
	)
	e := newOutageEnv(t, d)
	e.startPublishers(4)
	affected, killed := 0, 0
	for round := 1; round <= rounds; round++ {
		e.waitDeliveries(50) // the flow is healthy
		pending, n := e.lockedIncident(round, passes, backlog)
		affected += pending
		killed += n
		waitLong(t, fmt.Sprintf("\"poller recovered\" after incident %d", round), func() bool {
			return e.logs.Count("level=INFO", "poller recovered") == round
		})
		if n := e.logs.Count("level=ERROR", "component=outbox.poller"); n != round {
			t.Fatalf("after incident %d the poller logged %d ERROR lines, want %d (one per incident):\n%s",
				round, n, round, strings.Join(e.logs.Lines("level=ERROR"), "\n"))
		}
	}
	e.waitDeliveries(50) // and it flows again
	e.stopPublishers()
	e.waitAllDone()

	errorLines := e.logs.Lines("level=ERROR")
	committed, failures, delivered, invocations := e.stats()
	t.Logf("%d incidents, %d connections killed; %d events committed, %d publishes failed; %d events affected by the incidents; "+
		"%d delivered in %d listener calls; %d ERROR lines:\n%s",
		rounds, killed, committed, failures, affected, delivered, invocations, len(errorLines), strings.Join(errorLines, "\n"))
	// One from the poller, at most one (rate-limited) from the status
	// writes of the dispatcher, per incident.
	if len(errorLines) > 2*rounds {
		t.Errorf("%d ERROR lines for %d incidents, want at most %d", len(errorLines), rounds, 2*rounds)
	}
	if len(errorLines)*20 > affected {
		t.Errorf("%d ERROR lines for %d affected events: not far below one per event", len(errorLines), affected)
	}
	if n := e.logs.Count("poller recovered"); n != rounds {
		t.Errorf("%d \"poller recovered\" lines, want %d", n, rounds)
	}
	return e
}

// privateServer is a private database server of one test, which it may
// stop, kill and start, and the outage test's pools on it.
type privateServer struct {
	db                outageDatabase
	stop, kill, start func()
}

// testServerRestarts runs testServerRestart on a server of its own that
// is shut down cleanly, and on one that is killed.
func testServerRestarts(t *testing.T, newServer func(t *testing.T) privateServer) {
	t.Run("Shutdown", func(t *testing.T) {
		t.Parallel()
		s := newServer(t)
		testServerRestart(t, s.db, s.stop, s.start)
	})
	t.Run("Crash", func(t *testing.T) {
		t.Parallel()
		s := newServer(t)
		testServerRestart(t, s.db, s.kill, s.start)
	})
}

// testServerRestart: a server restart while events flow, on a private
// server (the shared one must never be stopped): down shuts it down
// cleanly or kills it (a crash: the server recovers on the next start)
// and its port refuses connections until up starts it again on the same
// data directory; the publishes in between fail. Every committed event
// ends DONE, the poller logs one ERROR for the incident and "poller
// recovered" after it.
func testServerRestart(t *testing.T, d outageDatabase, down, up func()) {
	e := newOutageEnv(t, d)
	e.startPublishers(4)
	e.waitDeliveries(100)

	start := time.Now()
	phase := func(what string) { t.Logf("%8v %s", time.Since(start).Round(time.Millisecond), what) }
	failedBefore := e.failures()
	down()
	phase("the server process has exited")
	// A server slow to shut down (seen under load: a MariaDB still
	// serving its established connections for a minute after SIGTERM)
	// makes the poller fail and recover in turn before it is gone: each
	// of those incidents logs its ERROR and its "recovered" line. From
	// the exit on, the outage is one incident.
	pollerErrorsAtExit := e.logs.Count("level=ERROR", "component=outbox.poller")
	if c, err := net.DialTimeout("tcp", d.addr(), time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections with the server down", d.addr())
	}
	waitLong(t, "the poller to log the outage", func() bool {
		return e.logs.Count("level=ERROR", "component=outbox.poller") > 0
	})
	waitLong(t, "publishes to fail", func() bool { return e.failures() > failedBefore })
	phase("the poller logged the outage and publishes fail")
	up()
	phase("the server answers again")
	if up := d.uptime(); up > time.Since(start)+time.Second {
		t.Fatalf("the server has been up for %v, longer than this test's outage: it was not restarted", up)
	}
	waitLong(t, "\"poller recovered\"", func() bool { return e.logs.Count("level=INFO", "poller recovered") > 0 })
	phase("poller recovered")
	outage := time.Since(start)
	committedAfter := e.committedCount()
	waitLong(t, "publishes to succeed again", func() bool { return e.committedCount() >= committedAfter+100 })
	e.waitDeliveries(100)
	e.stopPublishers()
	e.waitAllDone()

	committed, failures, delivered, invocations := e.stats()
	errorLines := e.logs.Lines("level=ERROR")
	t.Logf("outage of %v: %d failed poll cycles; %d events committed, %d publishes failed, %d delivered in %d listener calls; %d ERROR lines:\n%s",
		outage.Round(time.Millisecond), e.logs.Count("poll cycle failed"), committed, failures, delivered, invocations,
		len(errorLines), strings.Join(errorLines, "\n"))
	errs, recovered := e.logs.Count("level=ERROR", "component=outbox.poller"), e.logs.Count("poller recovered")
	switch {
	case pollerErrorsAtExit > 1:
		t.Logf("the server served intermittently while shutting down: %d poller incidents before it exited", pollerErrorsAtExit)
		if errs-pollerErrorsAtExit > 1 {
			t.Errorf("the poller logged %d ERROR lines after the server exited, want at most 1", errs-pollerErrorsAtExit)
		}
	case errs != 1:
		t.Errorf("the poller logged %d ERROR lines for one outage, want 1", errs)
	}
	if recovered != errs {
		t.Errorf("%d \"poller recovered\" lines for %d ERROR lines, want one per incident", recovered, errs)
	}
	// The dispatcher's failed status writes are rate-limited to one line
	// per 5 s.
	if n, limit := e.logs.Count("level=ERROR", "component=outbox.dispatcher"), 2+int(outage/(5*time.Second)); n > limit {
		t.Errorf("the dispatcher logged %d ERROR lines during an outage of %v, want at most %d", n, outage, limit)
	}
}

// outageEnv is an outbox on its own database with publishers in the
// background and a listener recording every delivery.
type outageEnv struct {
	t      *testing.T
	d      outageDatabase
	db     *sqlx.DB // the framework's and the publishers' pool
	admin  *sqlx.DB // never among the framework's connections
	table  string   // the outbox table, as the admin names it
	orders string   // the business table, as the admin names it
	ob     *outbox.Outbox
	logs   *testsupport.LogBuffer
	pause  sync.RWMutex // held by the test: listeners wait
	stop   chan struct{}
	pubWG  sync.WaitGroup
	pubEnd sync.Once

	insertOrder string // the business write of a publish

	mu          sync.Mutex
	committed   map[string]bool
	delivered   map[string]int
	invocations int
	failed      int
}

// newOutageEnv starts an outageEnv on d.
func newOutageEnv(t *testing.T, d outageDatabase) *outageEnv {
	t.Helper()
	db, admin := d.pools()
	e := &outageEnv{
		t: t, d: d, db: db, admin: admin,
		table:     d.table("outbox_event"),
		orders:    d.table("orders"),
		logs:      &testsupport.LogBuffer{},
		stop:      make(chan struct{}),
		committed: map[string]bool{},
		delivered: map[string]int{},
	}
	ctx := context.Background()
	ocfg := outbox.Config{Logger: e.logs.Logger(), Metrics: &testsupport.Metrics{}}
	ocfg.Dispatcher.HotCapacity = 64 // overflow: the poller's claim carries part of the flow
	ocfg.Poller.Interval = 10 * time.Millisecond
	ocfg.Poller.BacklogInterval = 5 * time.Millisecond
	ocfg.Poller.SkipRecent = 20 * time.Millisecond
	ocfg.Poller.QueryTimeout = 10 * time.Second
	ob, err := outbox.New(ctx, e.db, ocfg)
	if err != nil {
		t.Fatal(err)
	}
	e.ob = ob
	if _, err := e.db.ExecContext(ctx, `CREATE TABLE orders (id VARCHAR(64) NOT NULL PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	e.insertOrder = e.db.Rebind(`INSERT INTO orders (id) VALUES (?)`)
	ob.RegisterFunc("OrderPlaced", func(_ context.Context, env core.Envelope) error {
		// While the test holds pause, no listener call runs.
		e.pause.RLock()
		defer e.pause.RUnlock()
		e.mu.Lock()
		e.delivered[env.ID()]++
		e.invocations++
		e.mu.Unlock()
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := ob.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			var lines []string
			for _, l := range e.logs.Lines() {
				if !strings.Contains(l, "level=DEBUG") {
					lines = append(lines, l)
				}
			}
			t.Logf("log (INFO and above):\n%s", strings.Join(lines, "\n"))
		}
	})
	t.Cleanup(e.stopPublishers) // before Close
	return e
}

// startPublishers runs n goroutines publishing one event per business
// transaction until stopPublishers.
func (e *outageEnv) startPublishers(n int) {
	for w := range n {
		e.pubWG.Add(1)
		go e.publishLoop(w)
	}
}

func (e *outageEnv) publishLoop(w int) {
	defer e.pubWG.Done()
	for i := 0; ; i++ {
		select {
		case <-e.stop:
			return
		default:
		}
		env, err := core.NewEvent("OrderPlaced").AggregateType("Order").AggregateID(fmt.Sprintf("w%d-%d", w, i)).
			PayloadJSONString(fmt.Sprintf(`{"writer":%d,"n":%d}`, w, i)).Build()
		if err != nil {
			e.t.Errorf("Build: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = e.ob.InTx(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := tx.ExecContext(ctx, e.insertOrder, env.ID()); err != nil {
				return err
			}
			_, err := e.ob.Publish(ctx, env)
			return err
		})
		cancel()
		e.mu.Lock()
		if err == nil {
			e.committed[env.ID()] = true
		} else {
			e.failed++
		}
		e.mu.Unlock()
		if err != nil {
			// The database is away: do not spin.
			select {
			case <-e.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

func (e *outageEnv) stopPublishers() {
	e.pubEnd.Do(func() { close(e.stop) })
	e.pubWG.Wait()
}

func (e *outageEnv) committedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.committed)
}

func (e *outageEnv) failures() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

func (e *outageEnv) deliveredCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.delivered)
}

func (e *outageEnv) stats() (committed, failed, delivered, invocations int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.committed), e.failed, len(e.delivered), e.invocations
}

// waitDeliveries waits until n more events have been delivered.
func (e *outageEnv) waitDeliveries(n int) {
	e.t.Helper()
	from := e.deliveredCount()
	waitLong(e.t, fmt.Sprintf("%d more deliveries", n), func() bool { return e.deliveredCount() >= from+n })
}

// lockedIncident builds a backlog with the listeners paused, locks the
// outbox table, lets the listeners go on (their DONE writes block), and
// kills every framework connection passes times, each time once the
// poller's claim is blocked too; then unlocks. It returns how many events
// were pending (not DONE) when the table was locked, and how many
// connections it killed.
func (e *outageEnv) lockedIncident(round, passes, backlog int) (pending, killed int) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	e.pause.Lock()
	paused := true
	defer func() {
		if paused {
			e.pause.Unlock()
		}
	}()
	from := e.committedCount()
	waitLong(t, "a backlog of committed events", func() bool { return e.committedCount() >= from+backlog })

	// The coalesced DONE write, as the server shows it.
	// (MySQL: "UPDATE `outbox_event` FORCE INDEX (PRIMARY) SET …".)
	doneWrite := "UPDATE " + parts.Outbox(e.ob).Store.Dialect().QuoteIdent("outbox_event") + "% SET status = " + fmt.Sprint(int(core.StatusDone)) + ",%"
	pending, unlock := e.d.lockTable(ctx)
	locked := true
	defer func() {
		if locked {
			_ = unlock()
		}
	}()
	e.pause.Unlock()
	paused = false

	for pass := 1; pass <= passes; pass++ {
		waitLong(t, "the poller's claim to block on the lock", func() bool { return e.d.blocked("%FOR UPDATE SKIP LOCKED%") > 0 })
		if pass == 1 {
			waitLong(t, "a DONE write to block on the lock", func() bool { return e.d.blocked(doneWrite) > 0 })
		}
		killed += e.d.killFramework()
	}
	locked = false
	if err := unlock(); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	t.Logf("incident %d: %d events pending at its start, %d connections killed", round, pending, killed)
	return pending, killed
}

// waitAllDone waits until every row is DONE, then checks that every
// committed event is among them and reached the listener.
func (e *outageEnv) waitAllDone() {
	t := e.t
	t.Helper()
	ctx := context.Background()
	waitLong(t, "every event to be DONE", func() bool {
		var n int
		if err := e.admin.GetContext(ctx, &n, e.admin.Rebind("SELECT COUNT(*) FROM "+e.table+" WHERE status <> ?"), int(core.StatusDone)); err != nil {
			t.Logf("count: %v", err) // the server may still be coming back
			return false
		}
		return n == 0
	})
	var done, orders []string
	if err := e.admin.SelectContext(ctx, &done, e.admin.Rebind("SELECT event_id FROM "+e.table+" WHERE status = ?"), int(core.StatusDone)); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.SelectContext(ctx, &orders, "SELECT id FROM "+e.orders); err != nil {
		t.Fatal(err)
	}
	isDone := make(map[string]bool, len(done))
	for _, id := range done {
		isDone[id] = true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	lost := 0
	for id := range e.committed {
		if !isDone[id] || e.delivered[id] == 0 {
			lost++
			if lost <= 10 {
				t.Errorf("committed event %s: DONE %v, delivered %d times", id, isDone[id], e.delivered[id])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d committed events lost", lost, len(e.committed))
	}
	// Atomicity: an event row exists iff its business row does (a publish
	// whose connection died in COMMIT may have committed: both rows, an
	// error to the caller), and no listener saw an event without a row.
	hasOrder := make(map[string]bool, len(orders))
	for _, id := range orders {
		hasOrder[id] = true
		if !isDone[id] {
			t.Errorf("business row %s committed without its event", id)
		}
	}
	unknown := 0
	for _, id := range done {
		if !hasOrder[id] {
			t.Errorf("event %s committed without its business row", id)
		}
		if !e.committed[id] {
			unknown++ // the publish reported an error, yet it committed
		}
	}
	for id := range e.delivered {
		if !isDone[id] {
			t.Errorf("phantom delivery of %s: no such event was committed", id)
		}
	}
	if unknown > 0 {
		t.Logf("%d publishes reported an error but committed (connection lost in COMMIT); delivered like the rest", unknown)
	}
}
