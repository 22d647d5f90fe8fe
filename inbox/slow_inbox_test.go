package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// twoInboxes is a dispatcher of two inboxes, other on SQLite and "slow"
// on a fresh MariaDB database (slowDB, whose claims a test makes slow),
// made with cfg and the handlers of handle (topic → handler); start
// starts it, closed at the test's end.
type twoInboxes struct {
	t           *testing.T
	other, slow *inbox.Inbox
	slowDB      *sqlx.DB
	d           *inbox.Dispatcher
}

func newTwoInboxes(t *testing.T, otherID string, cfg inbox.DispatcherConfig, handle map[string]inbox.HandlerFunc) *twoInboxes {
	t.Helper()
	ctx := context.Background()
	w := &twoInboxes{t: t, slowDB: openMySQL(t)}
	var err error
	if w.other, err = inbox.New(ctx, openSQLite(t), inbox.Config{}); err != nil {
		t.Fatal(err)
	}
	if w.slow, err = inbox.New(ctx, w.slowDB, inbox.Config{}); err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = (&testsupport.LogBuffer{}).Logger()
	}
	if w.d, err = inbox.NewMultiDispatcher(cfg); err != nil {
		t.Fatal(err)
	}
	for topic, h := range handle {
		if err := w.d.Handle(topic, h); err != nil {
			t.Fatal(err)
		}
	}
	for id, in := range map[string]*inbox.Inbox{otherID: w.other, "slow": w.slow} {
		if err := w.d.AddInbox(id, in); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *twoInboxes) start() {
	w.t.Helper()
	if err := w.d.Start(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.d.Close(cctx)
	})
}

// perStore counts the messages a handler handled, by inbox.
type perStore struct {
	mu sync.Mutex
	n  map[string]int
}

// handle is the handler: it counts the message for its inbox.
func (p *perStore) handle(ctx context.Context, _ inbox.Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[inbox.StoreID(ctx)]++
	return nil
}

// count returns how many messages of inbox store were handled.
func (p *perStore) count(store string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[store]
}

// enqueue enqueues message id of topic in in.
func enqueueTopic(t *testing.T, in *inbox.Inbox, id, topic string) {
	t.Helper()
	if err := in.Enqueue(context.Background(), inbox.Message{Source: "s", MessageID: id, Topic: topic, Payload: []byte{}}); err != nil {
		t.Fatal(err)
	}
}

// An inbox whose database answers, but slowly (here: a claim waiting for
// a table lock, well within StatusTimeout), holds up no other inbox of
// the dispatcher: the loop goes on with the others while that claim
// runs. Its claims held the loop, so a healthy inbox's messages waited
// for each slow claim in turn (here, all of them until the lock ended).
func TestASlowInboxHoldsUpNoOtherInbox(t *testing.T) {
	ctx := context.Background()
	var handled perStore
	count := handled.count
	w := newTwoInboxes(t, "healthy", inbox.DispatcherConfig{Workers: 4, StatusTimeout: time.Minute, Lease: time.Hour,
		PollInterval: 20 * time.Millisecond}, map[string]inbox.HandlerFunc{"t": handled.handle})
	healthy, slow, slowDB := w.other, w.slow, w.slowDB
	enqueue := func(in *inbox.Inbox, id string) { t.Helper(); enqueueTopic(t, in, id, "t") }
	w.start()
	// The slow inbox's database answers at first.
	enqueue(slow, "before")
	testsupport.WaitFor(t, 20*time.Second, "the slow inbox's first message", func() bool { return count("slow") == 1 })

	// Then its table is locked: its claims wait (up to StatusTimeout).
	lock, err := slowDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "LOCK TABLES "+inbox.DefaultTable+" WRITE"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()
	var dbName string
	if err := slowDB.GetContext(ctx, &dbName, "SELECT DATABASE()"); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "a claim of the slow inbox waiting for the table lock", func() bool {
		var n int
		err := slowDB.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = ? AND STATE LIKE 'Waiting for table%' AND INFO LIKE '%FOR UPDATE%'`, dbName)
		return err == nil && n > 0
	})
	const n = 20
	for i := range n {
		enqueue(healthy, fmt.Sprintf("m-%d", i))
	}
	testsupport.WaitFor(t, 30*time.Second, "the healthy inbox's messages while the slow inbox's claim waits", func() bool {
		return count("healthy") == n
	})
	if got := count("slow"); got != 1 {
		t.Errorf("the slow inbox handled %d messages under the lock, want its first one only", got)
	}
	// Its claims go on once the lock ends.
	unlock()
	enqueue(slow, "after")
	testsupport.WaitFor(t, 30*time.Second, "the slow inbox's message after the lock", func() bool { return count("slow") == 2 })
}

// claimGate makes the claims of the MariaDB inbox on db that find
// messages wait while it is closed: a trigger on each updated row waits
// for a named lock the gate holds on a connection of its own (an empty
// claim updates no row and does not wait). open lets them through.
type claimGate struct {
	t      *testing.T
	db     *sqlx.DB
	dbName string
	lock   string
	holder *sql.Conn
}

func newClaimGate(t *testing.T, db *sqlx.DB) *claimGate {
	t.Helper()
	g := &claimGate{t: t, db: db}
	if err := db.Get(&g.dbName, "SELECT DATABASE()"); err != nil {
		t.Fatal(err)
	}
	lock := "outbox_test_gate_" + g.dbName
	g.lock = lock
	if _, err := db.Exec(fmt.Sprintf("CREATE TRIGGER claim_gate BEFORE UPDATE ON %s FOR EACH ROW SET @gate = GET_LOCK('%s', 60) + RELEASE_LOCK('%s')",
		inbox.DefaultTable, lock, lock)); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := holder.QueryRowContext(context.Background(), "SELECT GET_LOCK(?, 10)", lock).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK = %d, %v", got, err)
	}
	g.holder = holder
	t.Cleanup(g.open)
	return g
}

// waitClaim waits until a claim waits at the gate.
func (g *claimGate) waitClaim() {
	g.t.Helper()
	testsupport.WaitFor(g.t, 20*time.Second, "a claim of the slow inbox waiting at the gate", func() bool {
		var n int
		err := g.db.Get(&n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND STATE = 'User lock'`, g.dbName)
		return err == nil && n > 0
	})
}

// open releases the lock: the claims go through.
func (g *claimGate) open() {
	if g.holder != nil {
		var released sql.NullInt64
		if err := g.holder.QueryRowContext(context.Background(), "SELECT RELEASE_LOCK(?)", g.lock).Scan(&released); err != nil || released.Int64 != 1 {
			g.t.Errorf("RELEASE_LOCK = %v, %v", released, err)
		}
		_ = g.holder.Close() // back to the pool, holding no lock
		g.holder = nil
	}
}

// A slow claim keeps its share of the workers it reserved: its message is
// handled although a busy inbox beside it wants every worker (here its
// handlers wait for the slow inbox's message, so a worker freed only by
// them would never come). With no share, the loop took every freed
// worker, and the slow claim gave its messages back, claim after claim.
func TestASlowInboxKeepsItsShareOfTheWorkers(t *testing.T) {
	slowHandled, healthyStarted := make(chan struct{}), make(chan struct{}, 10)
	var once sync.Once
	logs := &testsupport.LogBuffer{}
	w := newTwoInboxes(t, "healthy", inbox.DispatcherConfig{Workers: 2, StatusTimeout: 20 * time.Second, Lease: time.Hour,
		HandlerTimeout: 30 * time.Second, PollInterval: 20 * time.Millisecond, Logger: logs.Logger()}, map[string]inbox.HandlerFunc{
		"s": func(context.Context, inbox.Record) error { once.Do(func() { close(slowHandled) }); return nil },
		"h": func(ctx context.Context, _ inbox.Record) error {
			healthyStarted <- struct{}{}
			select {
			case <-slowHandled:
			case <-ctx.Done():
			}
			return nil
		},
	})
	gate := newClaimGate(t, w.slowDB)
	w.start()
	enqueueTopic(t, w.slow, "s-1", "s")
	gate.waitClaim() // the claim of s-1 runs beside the loop now
	for i := range 10 {
		enqueueTopic(t, w.other, fmt.Sprintf("h-%d", i), "h")
	}
	// The busy inbox takes the workers the loop has (every one, before)
	// and holds them until the slow inbox's message is handled.
	select {
	case <-healthyStarted:
	case <-time.After(20 * time.Second):
		t.Fatal("no handler of the busy inbox started")
	}
	gate.open()
	select {
	case <-slowHandled:
	case <-time.After(25 * time.Second):
		var st []struct {
			Status, Attempt int
			Locked          sql.NullString `db:"locked_by"`
		}
		_ = w.slowDB.Select(&st, `SELECT status, attempt, locked_by FROM `+inbox.DefaultTable)
		t.Fatalf("the slow inbox's message was not handled while the busy inbox held the other workers (rows %+v)\n%s", st, logs)
	}
}

// countingSelector picks id every time and counts its calls.
type countingSelector struct {
	id    string
	calls atomic.Int64
}

func (s *countingSelector) Next([]string, string, int) string {
	s.calls.Add(1)
	return s.id
}

// While the claim of the inbox a Selector keeps picking runs beside the
// loop, the loop rests until it ends: it spun, passing that inbox's turn
// thousands of times a second (a third to three quarters of a core).
func TestTheLoopRestsWhileThePickedInboxClaims(t *testing.T) {
	sel := &countingSelector{id: "slow"}
	handled := make(chan struct{})
	w := newTwoInboxes(t, "other", inbox.DispatcherConfig{Selector: sel, StatusTimeout: 20 * time.Second, Lease: time.Hour,
		PollInterval: time.Hour}, map[string]inbox.HandlerFunc{"s": func(context.Context, inbox.Record) error { close(handled); return nil }})
	gate := newClaimGate(t, w.slowDB)
	w.start()
	enqueueTopic(t, w.slow, "s-1", "s")
	gate.waitClaim()
	before := sel.calls.Load()
	time.Sleep(300 * time.Millisecond) // the claim waits at the gate meanwhile
	if n := sel.calls.Load() - before; n > 10 {
		t.Errorf("the Selector was asked %d times while the picked inbox's claim ran, want a few (the loop rests)", n)
	}
	gate.open()
	select {
	case <-handled:
	case <-time.After(25 * time.Second):
		t.Fatal("the slow inbox's message was not handled")
	}
}

// With a negative DetachAfter the loop waits for every claim: a slow
// inbox's claim holds the other inbox's claims until it ends (the order a
// Selector makes then holds exactly, whatever each claim takes).
func TestNeverDetachedClaimHoldsTheLoop(t *testing.T) {
	var handled perStore
	count := handled.count
	w := newTwoInboxes(t, "other", inbox.DispatcherConfig{Workers: 4, StatusTimeout: time.Minute, Lease: time.Hour,
		PollInterval: 20 * time.Millisecond, DetachAfter: -1}, map[string]inbox.HandlerFunc{"t": handled.handle})
	gate := newClaimGate(t, w.slowDB)
	w.start()
	enqueueTopic(t, w.slow, "gated", "t")
	gate.waitClaim()
	enqueueTopic(t, w.other, "waits", "t")
	// Detached (the default), the other inbox's message is handled within
	// a poll or two (20 ms each); held, never while the gate is closed.
	time.Sleep(500 * time.Millisecond)
	if n := count("other"); n != 0 {
		t.Errorf("the other inbox handled %d messages while the slow claim ran, want 0 (DetachAfter < 0)", n)
	}
	gate.open()
	testsupport.WaitFor(t, 30*time.Second, "both messages once the claim ended", func() bool {
		return count("slow") == 1 && count("other") == 1
	})
}
