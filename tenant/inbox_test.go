package tenant_test

// Tests of tenant.Inbox. Helpers carry an "ib" prefix: this package's
// outbox tests live in the same test package.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/tenant"
)

// ibSQLite describes a new SQLite file database.
func ibSQLite(t *testing.T, id string) tenant.Database {
	t.Helper()
	return tenant.Database{ID: id, Driver: "sqlite3", DSN: filepath.Join(t.TempDir(), id+".db")}
}

func ibCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ibNew returns a tenant.Inbox closed when the test ends.
func ibNew(t *testing.T, ctx context.Context, cfg tenant.InboxConfig) *tenant.Inbox {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ib, err := tenant.NewInbox(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := ib.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return ib
}

func ibStart(t *testing.T, ctx context.Context, ib *tenant.Inbox) {
	t.Helper()
	if err := ib.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func ibFor(t *testing.T, ib *tenant.Inbox, key string) *inbox.Inbox {
	t.Helper()
	in, err := ib.For(key)
	if err != nil {
		t.Fatalf("For(%q): %v", key, err)
	}
	return in
}

func ibEnqueue(t *testing.T, ctx context.Context, in *inbox.Inbox, source, id, topic, payload string) {
	t.Helper()
	if err := in.Enqueue(ctx, inbox.Message{Source: source, MessageID: id, Topic: topic, Payload: []byte(payload)}); err != nil {
		t.Fatalf("enqueue %s/%s: %v", source, id, err)
	}
}

// ibStatus returns a message's status, or -1 when it is not in the table.
func ibStatus(t *testing.T, ctx context.Context, in *inbox.Inbox, source, id string) inbox.Status {
	rec, err := in.Get(ctx, source, id)
	if errors.Is(err, inbox.ErrNotFound) {
		return -1
	}
	if err != nil {
		t.Errorf("get %s/%s: %v", source, id, err)
		return -1
	}
	return rec.Status
}

// ibWaitFor polls cond until it holds or the deadline passes.
func ibWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.WaitFor(t, 30*time.Second, what, cond)
}

// ibOpenInbox opens a database of the set on a pool of the test's own (to
// look at a database that left the set).
func ibOpenInbox(t *testing.T, ctx context.Context, d tenant.Database) *inbox.Inbox {
	t.Helper()
	db, err := tenant.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	in, err := inbox.New(ctx, db, inbox.Config{SkipSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func ibCount(t *testing.T, ctx context.Context, in *inbox.Inbox) int {
	t.Helper()
	var n int
	if err := in.DB().GetContext(ctx, &n, "SELECT COUNT(*) FROM "+in.Table()); err != nil {
		t.Fatal(err)
	}
	return n
}

// Three SQLite files, two MariaDB and two PostgreSQL databases in one
// tenant.Inbox:
// messages enqueued through the router land in their tenant's table only
// (the same message id in every tenant is seven different messages), and
// the shared dispatcher hands each to the handler with its own tenant's
// id and inbox, and marks it Done there.
func TestInboxRoutesToTenantDatabase(t *testing.T) {
	ctx := ibCtx(t)
	dbs := mixedDatabases(t)
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: dbs, Dispatcher: inbox.DispatcherConfig{PollInterval: time.Hour}})
	mustEqualIB(t, "StoreIDs", fmt.Sprint(ib.StoreIDs()), "[m1 m2 p1 p2 s1 s2 s3]")
	var handled sync.Map // store/message id → payload
	err := ib.HandleFunc("order.paid", func(ctx context.Context, msg inbox.Record) error {
		id := inbox.StoreID(ctx)
		if want, _ := ib.For(id); inbox.FromContext(ctx) != want {
			t.Errorf("FromContext of %s/%s is not tenant %s's inbox", msg.Source, msg.MessageID, id)
		}
		if _, dup := handled.LoadOrStore(id+"/"+msg.MessageID, string(msg.Payload)); dup {
			t.Errorf("%s/%s handled twice", id, msg.MessageID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dbs {
		in := ibFor(t, ib, d.ID)
		ibEnqueue(t, ctx, in, "psp", "shared", "order.paid", d.ID)
		ibEnqueue(t, ctx, in, "psp", "only-"+d.ID, "order.paid", d.ID)
	}
	for _, d := range dbs {
		in := ibFor(t, ib, d.ID)
		mustEqualIB(t, d.ID+" rows", ibCount(t, ctx, in), 2)
		rec, err := in.Get(ctx, "psp", "shared")
		if err != nil {
			t.Fatal(err)
		}
		mustEqualIB(t, d.ID+" shared payload", string(rec.Payload), d.ID)
		for _, other := range dbs {
			if other.ID != d.ID {
				mustEqualIB(t, other.ID+"'s message in "+d.ID, ibStatus(t, ctx, in, "psp", "only-"+other.ID), inbox.Status(-1))
			}
		}
	}
	ibStart(t, ctx, ib)
	for _, d := range dbs {
		in := ibFor(t, ib, d.ID)
		for _, id := range []string{"shared", "only-" + d.ID} {
			ibWaitFor(t, d.ID+"/"+id+" Done", func() bool { return ibStatus(t, ctx, in, "psp", id) == inbox.StatusDone })
			payload, ok := handled.Load(d.ID + "/" + id)
			if !ok || payload != d.ID {
				t.Fatalf("%s/%s handled with payload %v (%v), want %s", d.ID, id, payload, ok, d.ID)
			}
		}
	}
}

// The router: a known key returns its
// tenant's inbox; an unknown key an *UnknownKeyError wrapping
// ErrUnknownKey (with the store id Route mapped it to); an empty key
// ErrInvalidKey; ForUUID looks the canonical UUID text up.
func TestInboxRouter(t *testing.T) {
	ctx := ibCtx(t)
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	uid := tenant.UUIDKey(u)
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{ibSQLite(t, "acme"), ibSQLite(t, uid)}})
	acme := ibFor(t, ib, "acme")
	if got, err := ib.ForUUID(u); err != nil || got == acme || got == nil {
		t.Fatalf("ForUUID = %p, %v", got, err)
	}
	_, err := ib.For("globex")
	var uke *tenant.UnknownKeyError
	if !errors.Is(err, tenant.ErrUnknownKey) || !errors.As(err, &uke) || uke.Key != "globex" || uke.StoreID != "globex" {
		t.Fatalf("unknown key: %v (%+v)", err, uke)
	}
	if _, err := ib.ForUUID([16]byte{}); !errors.Is(err, tenant.ErrUnknownKey) {
		t.Fatalf("unknown UUID: %v", err)
	}
	if _, err := ib.For(""); !errors.Is(err, tenant.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}

	routed := ibNew(t, ctx, tenant.InboxConfig{
		Databases: []tenant.Database{ibSQLite(t, "eu"), ibSQLite(t, "us")},
		Route:     func(key string) string { return strings.SplitN(key, ":", 2)[0] },
	})
	if in, err := routed.For("eu:customer-7"); err != nil || in != ibFor(t, routed, "eu") {
		t.Fatalf("routed key: %v", err)
	}
	_, err = routed.For("apac:customer-9")
	if !errors.As(err, &uke) || uke.Key != "apac:customer-9" || uke.StoreID != "apac" || !errors.Is(err, tenant.ErrUnknownKey) {
		t.Fatalf("routed unknown key: %v", err)
	}
	if !strings.Contains(err.Error(), `"apac"`) {
		t.Fatalf("error does not name the store: %v", err)
	}
}

// Both selectors drain all seven databases in the order their definition
// gives. With one worker and BatchSize 1 each claim
// takes one message and the next claim waits for its handler, so the
// handler calls are the claims, in order: round-robin takes one from each
// database in id order, skipping empty ones; drain-first stays on a
// database until its claim comes back empty.
func TestInboxSelectorsDrainInOrder(t *testing.T) {
	counts := map[string]int{"m1": 2, "m2": 1, "p1": 1, "p2": 2, "s1": 3, "s2": 0, "s3": 1}
	for _, c := range []struct {
		name string
		sel  core.Selector
		want string
	}{
		{"RoundRobin", core.RoundRobin{}, "m1 m2 p1 p2 s1 s3 m1 p2 s1 s1"},
		{"DrainFirst", core.DrainFirst{}, "m1 m1 m2 p1 p2 p2 s1 s1 s1 s3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ibCtx(t)
			// Never detached: a claim slower than DetachAfter (a loaded
			// machine) passed its database's turn and changed the order.
			ib := ibNew(t, ctx, tenant.InboxConfig{Databases: mixedDatabases(t), Dispatcher: inbox.DispatcherConfig{
				Workers: 1, BatchSize: 1, PollInterval: time.Hour, Selector: c.sel, DetachAfter: -1,
			}})
			var (
				mu    sync.Mutex
				order []string
			)
			err := ib.Handle("t", inbox.HandlerFunc(func(ctx context.Context, _ inbox.Record) error {
				mu.Lock()
				order = append(order, inbox.StoreID(ctx))
				mu.Unlock()
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			for id, n := range counts {
				for i := range n {
					ibEnqueue(t, ctx, ibFor(t, ib, id), "s", fmt.Sprint(i), "t", "{}")
				}
			}
			ibStart(t, ctx, ib)
			for id, n := range counts {
				in := ibFor(t, ib, id)
				for i := range n {
					ibWaitFor(t, id+" Done", func() bool { return ibStatus(t, ctx, in, "s", fmt.Sprint(i)) == inbox.StatusDone })
				}
			}
			mu.Lock()
			defer mu.Unlock()
			mustEqualIB(t, "claim order", strings.Join(order, " "), c.want)
		})
	}
}

// Discovery adds and removes databases while messages flow
// and loses none: producers enqueue through the router into every tenant
// it knows, all the time; the set goes {s1 s2 m1 p1} → + s3, m2, p2 →
// − s2 → + s2, − m1. Every message enqueued into a database present at the end
// (s2 included: what it held while out of the set is handled when it
// returns) is Done, handled once, by its own tenant; every message of m1,
// which left, is still in its table. Unchanged databases keep their
// inbox.
func TestInboxDiscoveryWhileMessagesFlow(t *testing.T) {
	ctx := ibCtx(t)
	byID := map[string]tenant.Database{}
	for _, d := range mixedDatabases(t) {
		byID[d.ID] = d
	}
	var (
		discMu sync.Mutex
		cur    []string
	)
	setDiscovered := func(ids ...string) {
		discMu.Lock()
		cur = ids
		discMu.Unlock()
	}
	setDiscovered("s1", "s2", "m1", "p1")
	discover := func(context.Context) ([]tenant.Database, error) {
		discMu.Lock()
		defer discMu.Unlock()
		var out []tenant.Database
		for _, id := range cur {
			out = append(out, byID[id])
		}
		return out, nil
	}
	ib := ibNew(t, ctx, tenant.InboxConfig{Discover: discover, RefreshInterval: -1,
		Dispatcher: inbox.DispatcherConfig{Workers: 3, BatchSize: 4, PollInterval: 5 * time.Millisecond}})
	var handled sync.Map // store/message id → *atomic.Int32
	err := ib.HandleFunc("t", func(ctx context.Context, msg inbox.Record) error {
		if !strings.HasPrefix(msg.MessageID, inbox.StoreID(ctx)+"-") {
			t.Errorf("message %s handled by tenant %s", msg.MessageID, inbox.StoreID(ctx))
		}
		v, _ := handled.LoadOrStore(msg.MessageID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ibStart(t, ctx, ib)

	var (
		enqMu    sync.Mutex
		enqueued = map[string][]string{} // store id → message ids enqueued without error
	)
	countOf := func(id string) int {
		enqMu.Lock()
		defer enqMu.Unlock()
		return len(enqueued[id])
	}
	stop := make(chan struct{})
	var producers sync.WaitGroup
	for p := range 2 {
		producers.Go(func() {
			for seq := 0; ; seq++ {
				for _, id := range []string{"m1", "m2", "p1", "p2", "s1", "s2", "s3"} {
					select {
					case <-stop:
						return
					default:
					}
					in, err := ib.For(id)
					if err != nil {
						if !errors.Is(err, tenant.ErrUnknownKey) {
							t.Errorf("For(%s): %v", id, err)
						}
						continue
					}
					mid := fmt.Sprintf("%s-%d-%d", id, p, seq)
					// An Enqueue racing with its database's removal may
					// fail (the pool is closed): the caller sees the error.
					if in.Enqueue(ctx, inbox.Message{Source: "p", MessageID: mid, Topic: "t", Payload: []byte{}}) == nil {
						enqMu.Lock()
						enqueued[id] = append(enqueued[id], mid)
						enqMu.Unlock()
					}
				}
			}
		})
	}
	refresh := func(want string, ids ...string) {
		t.Helper()
		setDiscovered(ids...)
		res, err := ib.Refresh(ctx)
		if err != nil {
			t.Fatalf("refresh to %v: %v", ids, err)
		}
		mustEqualIB(t, "refresh to "+fmt.Sprint(ids), fmt.Sprintf("+%v -%v ~%v =%d !%v", res.Added, res.Removed, res.Replaced, res.Unchanged, res.Failed), want)
		mustEqualIB(t, "StoreIDs", fmt.Sprint(ib.StoreIDs()), fmt.Sprint(slices.Sorted(slices.Values(ids))))
	}
	flowing := func(min int, ids ...string) {
		t.Helper()
		for _, id := range ids {
			ibWaitFor(t, fmt.Sprintf("%d messages into %s", min, id), func() bool { return countOf(id) >= min })
		}
	}
	flowing(20, "s1", "s2", "m1", "p1")
	s1 := ibFor(t, ib, "s1")
	refresh("+[m2 p2 s3] -[] ~[] =4 ![]", "s1", "s2", "m1", "p1", "s3", "m2", "p2")
	mustEqualIB(t, "s1's inbox after a refresh that left it unchanged", ibFor(t, ib, "s1"), s1)
	flowing(20, "s3", "m2", "p2")
	refresh("+[] -[s2] ~[] =6 ![]", "s1", "s3", "m1", "m2", "p1", "p2")
	flowing(countOf("s1")+20, "s1")
	refresh("+[s2] -[m1] ~[] =5 ![]", "s1", "s2", "s3", "m2", "p1", "p2")
	flowing(countOf("s2")+20, "s2")
	close(stop)
	producers.Wait()

	enqMu.Lock()
	defer enqMu.Unlock()
	for _, id := range []string{"s1", "s2", "s3", "m2", "p1", "p2"} {
		in := ibFor(t, ib, id)
		for _, mid := range enqueued[id] {
			ibWaitFor(t, mid+" Done", func() bool { return ibStatus(t, ctx, in, "p", mid) == inbox.StatusDone })
			if v, ok := handled.Load(mid); !ok || v.(*atomic.Int32).Load() != 1 {
				t.Fatalf("%s handled %v times", mid, v)
			}
		}
		mustEqualIB(t, id+" rows", ibCount(t, ctx, in), len(enqueued[id]))
	}
	m1 := ibOpenInbox(t, ctx, byID["m1"])
	for _, mid := range enqueued["m1"] {
		if st := ibStatus(t, ctx, m1, "p", mid); st != inbox.StatusDone && st != inbox.StatusProcessing {
			t.Fatalf("%s in m1: status %v", mid, st)
		}
	}
	mustEqualIB(t, "m1 rows", ibCount(t, ctx, m1), len(enqueued["m1"]))
	t.Logf("enqueued: s1 %d, s2 %d, s3 %d, m1 %d, m2 %d, p1 %d, p2 %d",
		len(enqueued["s1"]), len(enqueued["s2"]), len(enqueued["s3"]), len(enqueued["m1"]), len(enqueued["m2"]),
		len(enqueued["p1"]), len(enqueued["p2"]))
}

// A database leaving the set stops being routed to at once, but is closed
// only after its running handler recorded its outcome; a handler that
// outlives DrainTimeout is cancelled, records nothing (its message stays
// leased, no attempt charged) and the refresh reports the timeout.
func TestInboxRemovalWaitsForRunningHandlers(t *testing.T) {
	ctx := ibCtx(t)
	a, b, c := ibSQLite(t, "a"), ibSQLite(t, "b"), ibSQLite(t, "c")
	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{a, b, c}, DrainTimeout: 50 * time.Millisecond,
		Dispatcher: inbox.DispatcherConfig{Owner: "node", PollInterval: time.Hour}})
	entered, release := make(chan string, 2), make(chan struct{})
	if err := ib.HandleFunc("slow", func(ctx context.Context, _ inbox.Record) error {
		entered <- inbox.StoreID(ctx)
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ib.HandleFunc("stuck", func(ctx context.Context, _ inbox.Record) error {
		entered <- inbox.StoreID(ctx)
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	ibStart(t, ctx, ib)

	ibEnqueue(t, ctx, ibFor(t, ib, "b"), "s", "slow", "slow", "{}")
	mustEqualIB(t, "handler's tenant", <-entered, "b")
	type result struct {
		res tenant.RefreshResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := ib.SetDatabases(context.Background(), []tenant.Database{a, c})
		done <- result{res, err}
	}()
	ibWaitFor(t, "b no longer routed to", func() bool { _, err := ib.For("b"); return errors.Is(err, tenant.ErrUnknownKey) })
	select {
	case r := <-done:
		t.Fatalf("SetDatabases returned (%+v) while b's handler was running", r)
	default:
	}
	close(release)
	r := <-done
	if r.err != nil || fmt.Sprint(r.res.Removed) != "[b]" {
		t.Fatalf("SetDatabases = %+v", r)
	}
	mustEqualIB(t, "b's message once b was removed", ibStatus(t, ctx, ibOpenInbox(t, ctx, b), "s", "slow"), inbox.StatusDone)

	ibEnqueue(t, ctx, ibFor(t, ib, "c"), "s", "stuck", "stuck", "{}")
	mustEqualIB(t, "handler's tenant", <-entered, "c")
	res, err := ib.SetDatabases(ctx, []tenant.Database{a})
	if !errors.Is(err, context.DeadlineExceeded) || fmt.Sprint(res.Removed) != "[c]" {
		t.Fatalf("SetDatabases past DrainTimeout = %+v, %v", res, err)
	}
	// The interrupted handler hands its lease back (without charging an
	// attempt) once it returns, after SetDatabases gave up waiting.
	cIn := ibOpenInbox(t, ctx, c)
	var rec inbox.Record
	ibWaitFor(t, "the interrupted handler's lease handed back", func() bool {
		var err error
		if rec, err = cIn.Get(ctx, "s", "stuck"); err != nil {
			t.Fatal(err)
		}
		return rec.LockedBy == ""
	})
	mustEqualIB(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqualIB(t, "attempt not charged", rec.Attempt, 0)
	mustEqualIB(t, "StoreIDs", fmt.Sprint(ib.StoreIDs()), "[a]")
}

// The periodic refresh (RefreshInterval) applies discoveries by itself; a
// failing discovery keeps the set; a database whose DSN changed is
// replaced, an unchanged one keeps its inbox.
func TestInboxPeriodicRefresh(t *testing.T) {
	ctx := ibCtx(t)
	a, b := ibSQLite(t, "a"), ibSQLite(t, "b")
	type found struct {
		dbs []tenant.Database
		err error
	}
	var (
		mu    sync.Mutex
		next  = found{dbs: []tenant.Database{a}}
		calls atomic.Int32
	)
	set := func(f found) { mu.Lock(); next = f; mu.Unlock() }
	discover := func(context.Context) ([]tenant.Database, error) {
		calls.Add(1)
		mu.Lock()
		defer mu.Unlock()
		return next.dbs, next.err
	}
	ib := ibNew(t, ctx, tenant.InboxConfig{Discover: discover, RefreshInterval: 5 * time.Millisecond})
	if err := ib.HandleFunc("t", func(context.Context, inbox.Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ibStart(t, ctx, ib)
	aIn := ibFor(t, ib, "a")
	set(found{dbs: []tenant.Database{a, b}})
	ibWaitFor(t, "b discovered", func() bool { return slices.Contains(ib.StoreIDs(), "b") })
	bIn := ibFor(t, ib, "b")
	ibEnqueue(t, ctx, bIn, "s", "m", "t", "{}")
	ibWaitFor(t, "b's message Done", func() bool { return ibStatus(t, ctx, bIn, "s", "m") == inbox.StatusDone })
	mustEqualIB(t, "a's inbox (unchanged)", ibFor(t, ib, "a"), aIn)

	set(found{err: errors.New("registry unavailable")})
	n := calls.Load()
	ibWaitFor(t, "two failed discoveries", func() bool { return calls.Load() >= n+2 })
	mustEqualIB(t, "StoreIDs after failed discoveries", fmt.Sprint(ib.StoreIDs()), "[a b]")

	moved := tenant.Database{ID: "b", Driver: "sqlite3", DSN: filepath.Join(t.TempDir(), "b-moved.db")}
	set(found{dbs: []tenant.Database{moved}})
	ibWaitFor(t, "a removed and b replaced", func() bool {
		in, err := ib.For("b")
		return fmt.Sprint(ib.StoreIDs()) == "[b]" && err == nil && in != bIn
	})
	mustEqualIB(t, "rows in the moved b", ibCount(t, ctx, ibFor(t, ib, "b")), 0)
}

// Bad paths: configuration, the list of databases, handlers, refresh
// without discovery, failing discovery and open, use after Close.
func TestInboxBadPaths(t *testing.T) {
	ctx := ibCtx(t)
	a := ibSQLite(t, "a")
	for name, cfg := range map[string]tenant.InboxConfig{
		"no databases":        {},
		"negative drain":      {Databases: []tenant.Database{a}, DrainTimeout: -time.Second},
		"duplicate id":        {Databases: []tenant.Database{a, a}},
		"empty id":            {Databases: []tenant.Database{{Driver: "sqlite3", DSN: a.DSN}}},
		"control character":   {Databases: []tenant.Database{{ID: "a\tb", Driver: "sqlite3", DSN: a.DSN}}},
		"id too long":         {Databases: []tenant.Database{{ID: strings.Repeat("x", 129), Driver: "sqlite3", DSN: a.DSN}}},
		"empty driver":        {Databases: []tenant.Database{{ID: "a", DSN: a.DSN}}},
		"empty DSN":           {Databases: []tenant.Database{{ID: "a", Driver: "sqlite3"}}},
		"invalid dispatcher":  {Databases: []tenant.Database{a}, Dispatcher: inbox.DispatcherConfig{Workers: -1}},
		"lease under timeout": {Databases: []tenant.Database{a}, Dispatcher: inbox.DispatcherConfig{Lease: time.Second, HandlerTimeout: time.Second}},
	} {
		if _, err := tenant.NewInbox(ctx, cfg); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := tenant.NewInbox(ctx, tenant.InboxConfig{Databases: []tenant.Database{a}, Inbox: inbox.Config{Table: "bad-name"}}); !errors.Is(err, core.ErrInvalidIdentifier) {
		t.Errorf("bad table: %v", err)
	}
	discoveryErr := errors.New("registry down")
	if _, err := tenant.NewInbox(ctx, tenant.InboxConfig{Discover: func(context.Context) ([]tenant.Database, error) { return nil, discoveryErr }}); !errors.Is(err, discoveryErr) {
		t.Errorf("failing discovery: %v", err)
	}
	if _, err := tenant.NewInbox(ctx, tenant.InboxConfig{Databases: []tenant.Database{{ID: "x", Driver: "no-such-driver", DSN: "secret-dsn"}}}); err == nil || strings.Contains(err.Error(), "secret-dsn") {
		t.Errorf("unknown driver: %v", err)
	}

	ib := ibNew(t, ctx, tenant.InboxConfig{Databases: []tenant.Database{a}})
	if err := ib.Handle("t", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("nil handler: %v", err)
	}
	if err := ib.HandleFunc("t", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("nil handler func: %v", err)
	}
	ok := func(context.Context, inbox.Record) error { return nil }
	if err := ib.HandleFunc("t", ok); err != nil {
		t.Fatal(err)
	}
	if err := ib.HandleFunc("t", ok); !errors.Is(err, inbox.ErrDuplicateHandler) {
		t.Errorf("duplicate handler: %v", err)
	}
	if _, err := ib.Refresh(ctx); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("Refresh without Discover: %v", err)
	}
	if _, err := ib.SetDatabases(ctx, []tenant.Database{a, ibSQLite(t, "b"), {ID: "b", Driver: "sqlite3", DSN: "x"}}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("invalid list: %v", err)
	}
	mustEqualIB(t, "StoreIDs after an invalid list", fmt.Sprint(ib.StoreIDs()), "[a]")
	res, err := ib.SetDatabases(ctx, []tenant.Database{a, {ID: "broken", Driver: "no-such-driver", DSN: "x"}})
	if err == nil || fmt.Sprint(res.Failed) != "[broken]" || len(res.Added) != 0 || fmt.Sprint(ib.StoreIDs()) != "[a]" {
		t.Errorf("a database that cannot be opened: %+v, %v", res, err)
	}
	if err := ib.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.SetDatabases(ctx, []tenant.Database{a}); !errors.Is(err, core.ErrClosed) {
		t.Errorf("SetDatabases after Close: %v", err)
	}
	if _, err := ib.For("a"); !errors.Is(err, tenant.ErrUnknownKey) || !errors.Is(err, core.ErrClosed) {
		t.Errorf("For after Close: %v, want ErrUnknownKey and core.ErrClosed", err)
	}
}

func mustEqualIB[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// Close whose ctx expires while a handler runs returns then, but leaves
// that handler its database: once it returns, its outcome is recorded
// before the database is closed. A second Close waits for the databases
// to be closed.
func TestInboxCloseExpiredLetsARunningHandlerFinish(t *testing.T) {
	ctx := ibCtx(t)
	d := ibSQLite(t, "a")
	lg, logs := testsupport.NewLogger()
	ib, err := tenant.NewInbox(ctx, tenant.InboxConfig{Databases: []tenant.Database{d}, Logger: lg,
		Dispatcher: inbox.DispatcherConfig{PollInterval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	if err := ib.HandleFunc("slow", func(context.Context, inbox.Record) error {
		started <- struct{}{}
		<-release // deaf to ctx, as a handler stuck in a call may be
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ibStart(t, ctx, ib)
	ibEnqueue(t, ctx, ibFor(t, ib, "a"), "src", "m1", "slow", `{}`)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler was not called")
	}

	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		closed <- ib.Close(cctx)
	}()
	select {
	case err := <-closed:
		if err != context.DeadlineExceeded { // itself, not joined with nils
			t.Errorf("Close with the handler running = %#v, want context.DeadlineExceeded", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Close did not return when its ctx expired")
	}
	close(release)

	in := ibOpenInbox(t, ctx, d)
	ibWaitFor(t, "the message Done, its lease released", func() bool {
		rec, err := in.Get(ctx, "src", "m1")
		if err != nil {
			t.Fatal(err)
		}
		return rec.Status == inbox.StatusDone && rec.LockedBy == ""
	})
	if err := ib.Close(ctx); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if lines := logs.Lines("database is closed"); len(lines) > 0 {
		t.Errorf("the database was closed under the handler: %q", lines)
	}
}
