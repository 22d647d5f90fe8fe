package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// multiEnv is one dispatcher of NewMultiDispatcher over several inboxes,
// each on a fresh database of its own, all on one clock.
type multiEnv struct {
	t     *testing.T
	ctx   context.Context
	clock *testsupport.Clock
	envs  map[string]*env
	first *env // runs the dispatcher (its ctx and cleanup)
	d     *inbox.Dispatcher
	logs  *testsupport.LogBuffer // the dispatcher's
}

func newMultiEnv(t *testing.T, open opener, ids []string, cfg inbox.DispatcherConfig) *multiEnv {
	t.Helper()
	me := &multiEnv{t: t, clock: newClock(), envs: map[string]*env{}, logs: &testsupport.LogBuffer{}}
	for _, id := range ids {
		e := newEnv(t, open, inbox.Config{Now: me.clock.Now})
		me.envs[id] = e
		if me.first == nil {
			me.first, me.ctx = e, e.ctx
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = me.logs.Logger()
	}
	d, err := inbox.NewMultiDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	me.d = d
	for _, id := range ids {
		if err := d.AddInbox(id, me.envs[id].in); err != nil {
			t.Fatalf("AddInbox(%q): %v", id, err)
		}
	}
	return me
}

// start runs the dispatcher until the test ends.
func (me *multiEnv) start() {
	me.t.Helper()
	me.first.start(me.d)
}

// The selectors order the claim cycles over the inboxes.
// With one worker and BatchSize 1 every claim takes one message and the
// next claim waits for its handler, so the handler calls are the claims in
// order: round-robin visits a, b, c in turn, skipping the empty ones;
// drain-first stays on an inbox until a claim comes back empty. The
// handler learns each message's inbox from StoreID and FromContext.
func testMultiSelectorOrder(t *testing.T, open opener) {
	for _, c := range []struct {
		name string
		sel  core.Selector
		want string
	}{
		{"RoundRobin", core.RoundRobin{}, "a b c a c a"},
		{"DrainFirst", core.DrainFirst{}, "a a a b c c"},
		{"Default", nil, "a b c a c a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			me := newMultiEnv(t, open, []string{"c", "a", "b"}, inbox.DispatcherConfig{
				// Never detached: a claim slower than DetachAfter (a loaded
				// machine) passed its inbox's turn and changed the order.
				Owner: "w", Workers: 1, BatchSize: 1, PollInterval: time.Hour, Selector: c.sel, DetachAfter: -1,
			})
			var (
				mu    sync.Mutex
				order []string
			)
			mustHandle(t, me.d, "t", func(ctx context.Context, rec inbox.Record) error {
				id := inbox.StoreID(ctx)
				if inbox.FromContext(ctx) != me.envs[id].in {
					t.Errorf("FromContext of %s/%s is not inbox %q", rec.Source, rec.MessageID, id)
				}
				if rec.Source != id {
					t.Errorf("message %s/%s handled as inbox %q's", rec.Source, rec.MessageID, id)
				}
				mu.Lock()
				order = append(order, id)
				mu.Unlock()
				return nil
			})
			for id, n := range map[string]int{"a": 3, "b": 1, "c": 2} {
				for i := range n {
					me.envs[id].enqueue(inbox.Message{Source: id, MessageID: fmt.Sprint(i), Topic: "t"})
				}
			}
			me.start()
			for id, n := range map[string]int{"a": 3, "b": 1, "c": 2} {
				for i := range n {
					waitFor(t, id+" Done", func() bool { return me.envs[id].status(id, fmt.Sprint(i)) == inbox.StatusDone })
				}
			}
			mu.Lock()
			defer mu.Unlock()
			mustEqual(t, "claim order", strings.Join(order, " "), c.want)
		})
	}
}

// Status writes go to the inbox the message came from: the same key in two
// inboxes, failing in one and succeeding in the other, ends Processing
// (retry after the default Backoff's 2 s) in the first and Done in the
// second. RunOnce follows the rotation. Log lines about an inbox carry its
// id as "store".
func testMultiOutcomeToOrigin(t *testing.T, open opener) {
	me := newMultiEnv(t, open, []string{"a", "b"}, inbox.DispatcherConfig{Owner: "w"})
	mustHandle(t, me.d, "t", func(ctx context.Context, _ inbox.Record) error {
		if inbox.StoreID(ctx) == "a" {
			return errors.New("tenant a is down")
		}
		return nil
	})
	for _, id := range []string{"a", "b"} {
		me.envs[id].enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "t"})
	}
	now := me.clock.Now()
	for range 2 {
		if n, err := me.d.RunOnce(me.ctx); err != nil || n != 1 {
			t.Fatalf("RunOnce = %d, %v", n, err)
		}
	}
	a, b := me.envs["a"].get("s", "m"), me.envs["b"].get("s", "m")
	mustEqual(t, "a status", a.Status, inbox.StatusProcessing)
	mustEqual(t, "a attempt", a.Attempt, 1)
	mustEqual(t, "a error", a.LastError, "tenant a is down")
	mustEqual(t, "a next attempt (default Backoff)", a.NextAttemptAt, now.Add(2*time.Second))
	mustEqual(t, "b status", b.Status, inbox.StatusDone)
	mustEqual(t, "b attempt", b.Attempt, 1)
	mustEqual(t, "retry log of a", len(me.logs.Lines("level=WARN", "will retry", "store=a", "tenant a is down")), 1)
	mustEqual(t, "retry logs of b", len(me.logs.Lines("will retry", "store=b")), 0)
	if n, err := me.d.RunOnce(me.ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce with nothing due = %d, %v", n, err)
	}
	mustEqual(t, "Inboxes", fmt.Sprint(me.d.Inboxes()), "[a b]")
}

// A running dispatcher (resting an hour between polls) releases every
// inbox's expired leases, is woken by Enqueue on any inbox, and serves an
// inbox added while it runs at once.
func testMultiWakeReapAdd(t *testing.T, open opener) {
	me := newMultiEnv(t, open, []string{"a", "b"}, inbox.DispatcherConfig{Owner: "w", PollInterval: time.Hour})
	late := newEnv(t, open, inbox.Config{Now: me.clock.Now})
	mustHandle(t, me.d, "t", func(context.Context, inbox.Record) error { return nil })
	for _, id := range []string{"a", "b"} {
		e := me.envs[id]
		e.enqueue(inbox.Message{Source: "s", MessageID: "orphan", Topic: "t"})
		e.claim("crashed-node", time.Second, 10)
	}
	me.clock.Advance(time.Minute)
	me.start()
	for _, id := range []string{"a", "b"} {
		waitFor(t, id+" orphan Done", func() bool { return me.envs[id].status("s", "orphan") == inbox.StatusDone })
		mustEqual(t, "reap log of "+id, len(me.logs.Lines("level=INFO", "released expired leases", "store="+id, "messages=1")), 1)
	}
	me.envs["b"].enqueue(inbox.Message{Source: "s", MessageID: "woken", Topic: "t"})
	waitFor(t, "woken Done", func() bool { return me.envs["b"].status("s", "woken") == inbox.StatusDone })

	late.enqueue(inbox.Message{Source: "s", MessageID: "waiting", Topic: "t"})
	if err := me.d.AddInbox("c", late.in); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c's message Done", func() bool { return late.status("s", "waiting") == inbox.StatusDone })
	late.enqueue(inbox.Message{Source: "s", MessageID: "woken", Topic: "t"})
	waitFor(t, "c woken Done", func() bool { return late.status("s", "woken") == inbox.StatusDone })
}

// Several workers over several inboxes, messages enqueued while the
// dispatcher runs: every message is handled exactly once, in its own
// inbox, with either selector.
func testMultiDrainsAll(t *testing.T, open opener) {
	for _, sel := range []core.Selector{core.RoundRobin{}, core.DrainFirst{}} {
		t.Run(fmt.Sprintf("%T", sel), func(t *testing.T) {
			const perInbox = 25
			ids := []string{"a", "b", "c"}
			me := newMultiEnv(t, open, ids, inbox.DispatcherConfig{
				Owner: "w", Workers: 4, BatchSize: 3, PollInterval: 5 * time.Millisecond, Selector: sel,
			})
			var calls sync.Map // inbox/message id → *atomic.Int32
			mustHandle(t, me.d, "t", func(ctx context.Context, rec inbox.Record) error {
				v, _ := calls.LoadOrStore(inbox.StoreID(ctx)+"/"+rec.MessageID, new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
				return nil
			})
			me.start()
			var wg sync.WaitGroup
			for _, id := range ids {
				wg.Go(func() {
					for i := range perInbox {
						if err := me.envs[id].in.Enqueue(me.ctx, inbox.Message{Source: "s", MessageID: fmt.Sprint(i), Topic: "t", Payload: []byte{}}); err != nil {
							t.Errorf("enqueue %s/%d: %v", id, i, err)
						}
					}
				})
			}
			wg.Wait()
			for _, id := range ids {
				for i := range perInbox {
					waitFor(t, fmt.Sprintf("%s/%d Done", id, i), func() bool { return me.envs[id].status("s", fmt.Sprint(i)) == inbox.StatusDone })
					v, ok := calls.Load(fmt.Sprintf("%s/%d", id, i))
					if !ok || v.(*atomic.Int32).Load() != 1 {
						t.Fatalf("%s/%d handled %v times", id, i, v)
					}
				}
			}
		})
	}
}

// RemoveInbox stops claiming from the inbox and returns only after its
// running handler recorded the outcome; with a cancelled ctx it returns at
// once, cancels the inbox's running handler (which records nothing) and a
// second call waits again.
func testMultiRemoveInbox(t *testing.T, open opener) {
	me := newMultiEnv(t, open, []string{"a", "b"}, inbox.DispatcherConfig{Owner: "w", PollInterval: time.Hour})
	entered, release := make(chan string, 4), make(chan struct{})
	mustHandle(t, me.d, "slow", func(ctx context.Context, rec inbox.Record) error {
		entered <- inbox.StoreID(ctx)
		<-release
		return nil
	})
	mustHandle(t, me.d, "stuck", func(ctx context.Context, rec inbox.Record) error {
		entered <- inbox.StoreID(ctx)
		<-ctx.Done()
		return ctx.Err()
	})
	mustHandle(t, me.d, "t", func(context.Context, inbox.Record) error { return nil })
	me.start()
	a, b := me.envs["a"], me.envs["b"]

	// Graceful removal waits for the running handler's outcome.
	a.enqueue(inbox.Message{Source: "s", MessageID: "slow", Topic: "slow"})
	mustEqual(t, "handler's inbox", <-entered, "a")
	removed := make(chan error, 1)
	go func() { removed <- me.d.RemoveInbox(context.Background(), "a") }()
	waitFor(t, "a no longer listed", func() bool { return !slices.Contains(me.d.Inboxes(), "a") })
	select {
	case err := <-removed:
		t.Fatalf("RemoveInbox returned (%v) while a's handler was running", err)
	default:
	}
	close(release)
	if err := <-removed; err != nil {
		t.Fatalf("RemoveInbox: %v", err)
	}
	mustEqual(t, "a's message when RemoveInbox returned", a.status("s", "slow"), inbox.StatusDone)

	// a is no longer claimed from; b is.
	a.enqueue(inbox.Message{Source: "s", MessageID: "after", Topic: "t"})
	b.enqueue(inbox.Message{Source: "s", MessageID: "after", Topic: "t"})
	waitFor(t, "b's message Done", func() bool { return b.status("s", "after") == inbox.StatusDone })
	if n, err := me.d.RunOnce(me.ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	rec := a.get("s", "after")
	mustEqual(t, "a's new message status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "a's new message owner", rec.LockedBy, "")

	// A removal whose ctx ends first cancels the inbox's handlers.
	b.enqueue(inbox.Message{Source: "s", MessageID: "stuck", Topic: "stuck"})
	mustEqual(t, "handler's inbox", <-entered, "b")
	cancelled, cancel := context.WithCancel(me.ctx)
	cancel()
	if err := me.d.RemoveInbox(cancelled, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("RemoveInbox with a cancelled ctx: %v", err)
	}
	waitFor(t, "interruption logged", func() bool {
		return len(me.logs.Lines("interrupted by shutdown", "store=b", "message_id=stuck")) == 1
	})
	if err := me.d.RemoveInbox(me.ctx, "b"); err != nil {
		t.Fatalf("second RemoveInbox: %v", err)
	}
	rec = b.get("s", "stuck")
	mustEqual(t, "status", rec.Status, inbox.StatusProcessing)
	mustEqual(t, "attempt not charged", rec.Attempt, 0)
	mustEqual(t, "lease released", rec.LockedBy, "")
	mustEqual(t, "Inboxes", len(me.d.Inboxes()), 0)
	if err := me.d.RemoveInbox(me.ctx, "b"); err != nil {
		t.Fatalf("RemoveInbox of a removed inbox: %v", err)
	}
}

// Bad paths: invalid, duplicate and empty ids, nil and twice-added
// inboxes, removing "" or an unknown id, invalid configuration; a
// dispatcher without inboxes runs and claims nothing; the dispatcher of
// Inbox.NewDispatcher hands its handlers store id "".
func testMultiBadPaths(t *testing.T, open opener) {
	e := newEnv(t, open, inbox.Config{})
	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AddInbox("a", e.in); err != nil {
		t.Fatal(err)
	}
	other := newEnv(t, open, inbox.Config{})
	for _, c := range []struct {
		id string
		in *inbox.Inbox
	}{
		{"a", other.in},                      // duplicate id
		{"", other.in},                       // empty id
		{"x\ny", other.in},                   // control character
		{strings.Repeat("x", 129), other.in}, // too long
		{"b", nil},                           // nil inbox
		{"b", e.in},                          // added already as "a"
	} {
		if err := d.AddInbox(c.id, c.in); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("AddInbox(%q): %v", c.id, err)
		}
	}
	mustEqual(t, "Inboxes", fmt.Sprint(d.Inboxes()), "[a]")
	if err := d.RemoveInbox(e.ctx, ""); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf(`RemoveInbox(""): %v`, err)
	}
	if err := d.RemoveInbox(e.ctx, "unknown"); err != nil {
		t.Errorf("RemoveInbox(unknown): %v", err)
	}
	if err := d.HandleFunc("t", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("nil handler: %v", err)
	}
	for _, cfg := range []inbox.DispatcherConfig{{Workers: -1}, {BatchSize: -1}, {Lease: time.Second, HandlerTimeout: time.Second}} {
		if _, err := inbox.NewMultiDispatcher(cfg); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("NewMultiDispatcher(%+v): %v", cfg, err)
		}
	}

	empty, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := empty.RunOnce(e.ctx); err != nil || n != 0 {
		t.Fatalf("RunOnce without inboxes = %d, %v", n, err)
	}
	e.start(empty)

	single := e.dispatcher(inbox.DispatcherConfig{Owner: "w"})
	var gotID string
	var gotIn *inbox.Inbox
	mustHandle(t, single, "t", func(ctx context.Context, _ inbox.Record) error {
		gotID, gotIn = inbox.StoreID(ctx), inbox.FromContext(ctx)
		return nil
	})
	e.enqueue(inbox.Message{Source: "s", MessageID: "m", Topic: "t"})
	if n, err := single.RunOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	mustEqual(t, "StoreID", gotID, "")
	mustEqual(t, "FromContext", gotIn, e.in)
	mustEqual(t, "Inboxes of a single dispatcher", len(single.Inboxes()), 0)
	mustEqual(t, "StoreID outside a handler", inbox.StoreID(e.ctx), "")
	mustEqual(t, "FromContext outside a handler", inbox.FromContext(e.ctx), (*inbox.Inbox)(nil))
}
