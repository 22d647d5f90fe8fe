package dispatcher_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
)

// Close after a drain hands back the lease of an event the dispatcher
// never held in memory (dropped from a full hot queue), so another node
// need not wait for Lease; DONE rows and other owners' rows are untouched.
func TestCloseReleasesLeasesOfUndeliveredEvents(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, HotCapacity: 1, Retry: fixedDelay(time.Hour)})
	g := newGate(t)
	started := make(chan struct{}, 4)
	h.reg.RegisterFunc("Block", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-g.ch
		return nil
	})
	h.start()
	running := h.insert("Block")
	h.mustEnqueueHot(running)
	recv(t, started, "the listener to start")
	queued := h.insert("Block")
	h.mustEnqueueHot(queued)
	dropped := h.insert("Block")
	if h.enqueueHot(dropped) {
		t.Fatal("EnqueueHot on a full hot queue = true, want false")
	}
	other := h.env("Block")
	h.insertEnv(other, core.Lease{Owner: "node-b", Until: h.now().Add(time.Hour)})
	if r := h.row(dropped.ID()); r.LockedBy != h.d.Owner() {
		t.Fatalf("dropped row leased to %q, want this node", r.LockedBy)
	}

	g.open()
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	for _, id := range []string{running.ID(), queued.ID()} {
		if r := h.row(id); r.Status != core.StatusDone {
			t.Fatalf("%s: %v, want DONE", id, r.Status)
		}
	}
	if r := h.row(dropped.ID()); r.Status != core.StatusNew || r.LockedBy != "" || !r.LockedUntil.IsZero() {
		t.Fatalf("dropped row after Close: %v leased to %q until %v, want NEW and unleased", r.Status, r.LockedBy, r.LockedUntil)
	}
	if r := h.row(other.ID()); r.LockedBy != "node-b" {
		t.Fatalf("another node's row released: %q", r.LockedBy)
	}
	if got := h.logs.Lines("level=INFO", "released this node's leases", "events=1"); len(got) != 1 {
		t.Fatalf("want one INFO line with events=1, log:\n%s", h.logs)
	}
	if l := h.d.HotLease(h.env("Block")); !l.IsZero() {
		t.Fatalf("HotLease after Close = %+v, want the zero (unowned) lease", l)
	}
}

// Close whose ctx expires releases at once the leases of queued events,
// of events waiting on a retry timer and of hot-queue drops; the event
// whose listener still runs keeps its lease until its worker exits.
func TestCloseDeadlineReleasesLeasesExceptRunning(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, HotCapacity: 2, Retry: fixedDelay(time.Hour)})
	g := newGate(t)
	started := make(chan struct{}, 4)
	h.reg.RegisterFunc("Fail", func(context.Context, core.Envelope) error { return errors.New("boom") })
	h.reg.RegisterFunc("Hang", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-g.ch // ignores ctx: still running after Close returned
		return nil
	})
	h.start()
	failed := h.insert("Fail")
	h.mustEnqueueHot(failed)
	h.waitStatus(failed.ID(), core.StatusRetry)
	// The timer is set right after the RETRY write: wait for it.
	h.wait("the in-process retry to be scheduled", func() bool { return h.d.PendingRetries() == 1 })
	hung := h.insert("Hang")
	h.mustEnqueueHot(hung)
	recv(t, started, "the listener to start")
	q1, q2 := h.insert("Hang"), h.insert("Hang")
	h.mustEnqueueHot(q1)
	h.mustEnqueueHot(q2)
	dropped := h.insert("Hang")
	if h.enqueueHot(dropped) {
		t.Fatal("EnqueueHot on a full hot queue = true, want false")
	}

	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	for _, id := range []string{failed.ID(), q1.ID(), q2.ID(), dropped.ID()} {
		if r := h.row(id); r.LockedBy != "" || !r.LockedUntil.IsZero() {
			t.Fatalf("%s right after Close: leased to %q until %v, want released", id, r.LockedBy, r.LockedUntil)
		}
	}
	if r := h.row(failed.ID()); r.Status != core.StatusRetry || r.Attempts != 1 {
		t.Fatalf("retried row: %v attempts %d, want RETRY 1", r.Status, r.Attempts)
	}
	if r := h.row(hung.ID()); r.LockedBy != h.d.Owner() {
		t.Fatalf("the running event's lease was released (%q): another node could deliver it concurrently", r.LockedBy)
	}
	g.open() // the listener returns nil: its DONE write needs the lease
	h.waitStatus(hung.ID(), core.StatusDone)
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// A store without core.LeaseReleaser keeps the leases: Close still works.
func TestCloseWithoutLeaseReleaser(t *testing.T) {
	st := memstore.New(nil)
	d, err := dispatcher.New(struct{ core.StatusWriter }{st}, registry.New(), dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := core.NewEvent("E").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(context.Background(), nil, env, d.HotLease(env)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if r, _ := st.Get(env.ID()); r.LockedBy != d.Owner() {
		t.Fatalf("lease %q, want kept by %q", r.LockedBy, d.Owner())
	}
}

// RemoveStore and Close hand back the leases of the added stores' rows.
func TestRemoveStoreAndCloseReleaseLeasesOfAddedStores(t *testing.T) {
	d, err := dispatcher.NewMulti(registry.New(), dispatcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stA, stB := memstore.New(nil), memstore.New(nil)
	qa, err := d.AddStoreQueue("a", stA)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := d.AddStoreQueue("b", stB)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(st *memstore.Store, q *dispatcher.StoreQueue) core.Envelope {
		env, err := core.NewEvent("E").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Insert(context.Background(), nil, env, q.HotLease(env)); err != nil {
			t.Fatal(err)
		}
		return env // committed, never enqueued: a hot-queue drop
	}
	ea, eb := insert(stA, qa), insert(stB, qb)
	if err := d.RemoveStore(closeCtx(t, waitTimeout), "a"); err != nil {
		t.Fatal(err)
	}
	if r, _ := stA.Get(ea.ID()); r.LockedBy != "" {
		t.Fatalf("after RemoveStore: store a row leased to %q, want released", r.LockedBy)
	}
	if r, _ := stB.Get(eb.ID()); r.LockedBy != d.Owner() {
		t.Fatalf("store b row released by RemoveStore(a): %q", r.LockedBy)
	}
	if err := d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatal(err)
	}
	if r, _ := stB.Get(eb.ID()); r.LockedBy != "" {
		t.Fatalf("after Close: store b row leased to %q, want released", r.LockedBy)
	}
}

// Close whose ctx ends first writes the DONE of the events whose
// listeners already succeeded before it returns: a DONE waiting for the
// batch window (an hour here) or for the last worker (one hung here) was
// written only after Close returned, so a process exiting right after it
// left the event leased to it, delivered again only once the lease ended.
func TestCloseDeadlineWritesPendingDone(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, DoneFlushWindow: time.Hour})
	g := newGate(t)
	started := make(chan struct{}, 1)
	h.reg.RegisterFunc("Ok", func(context.Context, core.Envelope) error { return nil })
	h.reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		started <- struct{}{}
		<-g.ch // ignores ctx: still running after Close returned
		return nil
	})
	h.start()
	ok, hung := h.insert("Ok"), h.insert("Hang")
	h.mustEnqueueHot(ok)
	h.mustEnqueueHot(hung)
	recv(t, started, "the second listener to start") // one worker: the first succeeded
	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if r := h.row(ok.ID()); r.Status != core.StatusDone {
		t.Fatalf("succeeded event right after Close: %v leased to %q, want DONE", r.Status, r.LockedBy)
	}
	if r := h.row(hung.ID()); r.LockedBy != h.d.Owner() {
		t.Fatalf("the running event's lease was released (%q)", r.LockedBy)
	}
	g.open()
	h.waitStatus(hung.ID(), core.StatusDone)
}

// failingReleaser is a store whose lease release fails, as in a database
// outage.
type failingReleaser struct{ *memstore.Store }

func (failingReleaser) ReleaseLeases(context.Context, string, []string) (int64, error) {
	return 0, errors.New("connection refused")
}

// Close whose ctx expires during an outage releases twice (what no worker
// holds at once, the rest when the last worker exits): both fail, and the
// log has one WARN for them, not two identical lines.
func TestCloseDeadlineDuringAnOutageWarnsOnce(t *testing.T) {
	st := memstore.New(nil)
	reg := registry.New()
	logs := &testsupport.LogBuffer{}
	d, err := dispatcher.New(failingReleaser{st}, reg, dispatcher.Config{Workers: 1,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	started := make(chan struct{}, 1)
	reg.RegisterFunc("Hang", func(context.Context, core.Envelope) error {
		started <- struct{}{}
		<-g.ch
		return nil
	})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	insertAndEnqueue(t, st, d, "Hang")
	recv(t, started, "the listener to start")
	if err := d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	g.open()
	if err := d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if n := logs.Count("level=WARN", "cannot release this node's leases"); n != 1 {
		t.Errorf("%d WARN lines about the failed release, want 1:\n%s", n, logs)
	}
}

// RemoveStore whose ctx ends first hands back the leases of the store's
// events still queued (no worker will run them) with the rest, keeping
// only the running listener's: another node delivers them at once. They
// counted as held, so their leases were kept, and another node waited a
// whole Lease (a database moving to another node of a tenant set).
func TestRemoveStoreDeadlineReleasesTheQueuedEvents(t *testing.T) {
	reg := registry.New()
	d, err := dispatcher.NewMulti(reg, dispatcher.Config{Workers: 1, HotCapacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	started := make(chan struct{}, 1)
	reg.RegisterFunc("Hang", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		select {
		case <-g.ch:
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { g.open(); _ = d.Close(closeCtx(t, waitTimeout)) }()
	st, stB := memstore.New(nil), memstore.New(nil)
	q, err := d.AddStoreQueue("a", st)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := d.AddStoreQueue("b", stB)
	if err != nil {
		t.Fatal(err)
	}
	reg.RegisterFunc("Ok", func(context.Context, core.Envelope) error { return nil })
	var envs []core.Envelope
	var other core.Envelope
	for i := range 6 {
		env := insertAndEnqueue(t, st, q, "Hang")
		if i == 0 {
			recv(t, started, "the first listener to start")
		}
		if i == 2 { // another store's event, queued among a's
			other = insertAndEnqueue(t, stB, qb, "Ok")
		}
		envs = append(envs, env)
	}
	if err := d.RemoveStore(closeCtx(t, 50*time.Millisecond), "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RemoveStore = %v, want DeadlineExceeded", err)
	}
	for i, env := range envs[1:] {
		if r, _ := st.Get(env.ID()); r.LockedBy != "" {
			t.Errorf("queued event %d after RemoveStore: leased to %q, want released", i+1, r.LockedBy)
		}
	}
	// The other store's event stayed queued and is delivered.
	testsupport.WaitFor(t, waitTimeout, "store b's event to be DONE", func() bool {
		r, _ := stB.Get(other.ID())
		return r.Status == core.StatusDone
	}, nil)
}

// hotQueue is a store's intake: a *dispatcher.StoreQueue, or a
// *dispatcher.Dispatcher for the store given to New.
type hotQueue interface {
	HotLease(core.Envelope) core.Lease
	EnqueueHot(core.Envelope, core.Lease) bool
}

// insertAndEnqueue stores an event of eventType in st as its publisher
// would and hands it to q's hot queue.
func insertAndEnqueue(t *testing.T, st *memstore.Store, q hotQueue, eventType string) core.Envelope {
	t.Helper()
	env, err := core.NewEvent(eventType).PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(context.Background(), nil, env, q.HotLease(env)); err != nil {
		t.Fatal(err)
	}
	if !q.EnqueueHot(env, q.HotLease(env)) {
		t.Fatal("EnqueueHot = false")
	}
	return env
}

// Close releases the leases of events waiting on a timer (a retry, a
// delayed event) whenever the workers exit: they left the tracker only
// after Close had told the workers to stop, so the release after the
// last worker exited, when it came first, kept them as in flight, and
// another node waited a whole Lease for them. Run several times: the
// order was a race.
func TestCloseReleasesLeasesOfTimerEvents(t *testing.T) {
	for round := range 10 {
		h := newHarness(t, dispatcher.Config{Workers: 2, Retry: fixedDelay(time.Hour)})
		h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return errors.New("fail") })
		h.start()
		var envs []core.Envelope
		for range 20 {
			e := h.insert("E")
			h.mustEnqueueHot(e)
			envs = append(envs, e)
		}
		h.wait("20 pending retries", func() bool { return h.d.PendingRetries() == 20 })
		if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
			t.Fatalf("round %d: Close = %v", round, err)
		}
		for _, e := range envs {
			if r := h.row(e.ID()); r.Status != core.StatusRetry || r.LockedBy != "" {
				t.Fatalf("round %d: %s after Close: %v leased to %q, want RETRY and unleased", round, e.ID(), r.Status, r.LockedBy)
			}
		}
	}
}

// stuckReleaser is a store whose lease release does not answer (a
// database that went away) until its ctx ends or the test lets it go;
// each release reports its store's id on entered.
type stuckReleaser struct {
	*memstore.Store
	id      string
	entered chan string
	letGo   <-chan struct{}
}

func (s stuckReleaser) ReleaseLeases(ctx context.Context, _ string, _ []string) (int64, error) {
	select {
	case s.entered <- s.id:
	default:
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-s.letGo:
		return 0, nil
	}
}

// A Close whose ctx ended releases the leases of every store together,
// within one StatusTimeout from then: with several databases that do not
// answer, it took one StatusTimeout more per database, one after the
// other (a set of tenants with N unreachable databases closed N × 5 s
// late).
func TestCloseDeadlineReleasesStoresTogether(t *testing.T) {
	d, err := dispatcher.NewMulti(registry.New(), dispatcher.Config{StatusTimeout: time.Minute, Lease: time.Hour,
		Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	const stores = 4
	entered := make(chan string, 4*stores)
	letGo := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(letGo) }) }
	defer release()
	for i := range stores {
		id := string(rune('a' + i))
		if err := d.AddStore(id, stuckReleaser{Store: memstore.New(nil), id: id, entered: entered, letGo: letGo}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan error, 1)
	go func() { closed <- d.Close(ctx) }()
	seen := map[string]bool{}
	for len(seen) < stores { // all in flight at once: none waits for another
		select {
		case id := <-entered:
			seen[id] = true
		case <-time.After(waitTimeout):
			t.Fatalf("the releases of %d of %d stores started; the others wait for them", len(seen), stores)
		}
	}
	release()
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want its ctx's error", err)
	}
}

// Close whose ctx expires gives the listeners it cancels ListenerGrace to
// return, and releases the leases of the events of those that did before
// it returns: the next process (or another node) delivers them at once.
// (Before, the release ran right after the cancel, skipping every event
// still held, so the events of listeners unwinding from their cancelled
// ctx kept their leases, released in the background once the last worker
// exited: lost when the process exited after Close, and their events
// waited out Lease.)
func TestCloseDeadlineReleasesTheEventsOfCancelledListeners(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2, ListenerGrace: time.Minute})
	started := make(chan struct{}, 2)
	h.reg.RegisterFunc("Wait", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // unwinding takes a moment
		return ctx.Err()
	})
	h.start()
	a, b := h.insert("Wait"), h.insert("Wait")
	h.mustEnqueueHot(a)
	h.mustEnqueueHot(b)
	recv(t, started, "the first listener to start")
	recv(t, started, "the second listener to start")
	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	for _, id := range []string{a.ID(), b.ID()} {
		if r := h.row(id); r.Status != core.StatusNew || r.LockedBy != "" || !r.LockedUntil.IsZero() || r.Attempts != 0 {
			t.Errorf("%s right after Close: %v, %d attempts, leased to %q until %v; want NEW, released, no attempt charged", id, r.Status, r.Attempts, r.LockedBy, r.LockedUntil)
		}
	}
}

// RemoveStore whose ctx expires gives the store's listeners it cancels
// ListenerGrace to return, and releases the leases of their events before
// it returns, as Close does: the store is usually closed right after.
func TestRemoveStoreDeadlineReleasesTheEventsOfCancelledListeners(t *testing.T) {
	reg := registry.New()
	d, err := dispatcher.NewMulti(reg, dispatcher.Config{Workers: 2, HotCapacity: 16, ListenerGrace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 2)
	reg.RegisterFunc("Wait", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // unwinding takes a moment
		return ctx.Err()
	})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(closeCtx(t, waitTimeout)) }()
	st := memstore.New(nil)
	q, err := d.AddStoreQueue("a", st)
	if err != nil {
		t.Fatal(err)
	}
	a := insertAndEnqueue(t, st, q, "Wait")
	b := insertAndEnqueue(t, st, q, "Wait")
	recv(t, started, "the first listener to start")
	recv(t, started, "the second listener to start")
	if err := d.RemoveStore(closeCtx(t, 50*time.Millisecond), "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RemoveStore = %v, want DeadlineExceeded", err)
	}
	for _, env := range []core.Envelope{a, b} {
		if r, _ := st.Get(env.ID()); r.LockedBy != "" || r.Attempts != 0 {
			t.Errorf("%s right after RemoveStore: leased to %q, %d attempts; want released, no attempt charged", env.ID(), r.LockedBy, r.Attempts)
		}
	}
}
