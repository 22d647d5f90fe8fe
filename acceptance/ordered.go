package acceptance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/txctx"
)

// orderedType is the event type the ordered cases publish, ordered by
// aggregate through Config.Ordering.
const orderedType = "AccountChanged"

// errPoison is the failure of a listener that cannot handle an event.
var errPoison = errors.New("ledger rejected the event")

// runOrdered runs the ordered-delivery cases against h.
func runOrdered(t *testing.T, h Harness) {
	t.Run("Ordered_BlockPolicyHoldsTheKeyOnly", func(t *testing.T) { t.Parallel(); testOrderedBlock(t, h) })
	t.Run("Ordered_SkipPolicyReleasesTheKey", func(t *testing.T) { t.Parallel(); testOrderedSkip(t, h) })
	t.Run("Ordered_ReplayUnblocksTheKey", func(t *testing.T) { t.Parallel(); testOrderedReplay(t, h) })
	t.Run("Ordered_DiscardUnblocksTheKey", func(t *testing.T) { t.Parallel(); testOrderedDiscard(t, h) })
	t.Run("Ordered_SlowKeyDoesNotStallOthers", func(t *testing.T) { t.Parallel(); testOrderedSlowKey(t, h) })
	t.Run("Ordered_KeyMovesToAnotherNodeAfterACrash", func(t *testing.T) { t.Parallel(); testOrderedNodeCrash(t, h) })
	t.Run("Ordered_RollbackLeavesNoGap", func(t *testing.T) { t.Parallel(); testOrderedRollback(t, h) })
	t.Run("Ordered_ConcurrentTransactionsSerialized", func(t *testing.T) { t.Parallel(); testOrderedConcurrentTx(t, h) })
	t.Run("Ordered_BadKeysRejectedBeforeAnyWrite", func(t *testing.T) { t.Parallel(); testOrderedBadKeys(t, h) })
}

// recorder keeps, per aggregate, the seq headers of the successful
// deliveries in the order the listener saw them.
type recorder struct {
	mu   sync.Mutex
	seqs map[string][]int
	got  chan struct{}
}

func newRecorder() *recorder { return &recorder{seqs: map[string][]int{}, got: make(chan struct{}, 1)} }

// listener records each delivery that fail (nil: none) lets succeed.
func (r *recorder) listener(fail func(agg string, seq int) error) core.ListenerFunc {
	return func(_ context.Context, e core.Envelope) error {
		v, _ := e.Header("seq")
		seq, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("event %s without a seq header: %w", e.ID(), err)
		}
		if fail != nil {
			if err := fail(e.AggregateID(), seq); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.seqs[e.AggregateID()] = append(r.seqs[e.AggregateID()], seq)
		r.mu.Unlock()
		select {
		case r.got <- struct{}{}:
		default:
		}
		return nil
	}
}

func (r *recorder) of(agg string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seqs[agg])
}

// wantOrder fails unless the successful deliveries of agg are want.
func (r *recorder) wantOrder(t *testing.T, agg string, want ...int) {
	t.Helper()
	if got := r.of(agg); !slices.Equal(got, want) {
		t.Errorf("aggregate %s delivered %v, want %v", agg, got, want)
	}
}

// account is event seq of account agg, ordered by Config.Ordering.
func account(t *testing.T, agg string, seq int) core.Envelope {
	t.Helper()
	return mustEvent(t, core.NewEvent(orderedType).AggregateType("Account").AggregateID(agg).
		Header("seq", strconv.Itoa(seq)).PayloadJSONString(`{}`))
}

// orderedFixture is newFixture with the ordered type ordered, no
// SkipRecent (the cases drive the poller with PollOnce) and tweak.
func orderedFixture(t *testing.T, h Harness, tweak func(*outbox.Config)) *fixture {
	return newFixture(t, h, true, func(c *outbox.Config) {
		c.Ordering = core.Ordering{Types: []string{orderedType}}
		c.Poller.SkipRecent = -1
		if tweak != nil {
			tweak(c)
		}
	})
}

// publishEach publishes every env in a transaction of its own, in order,
// and returns the ids.
func (f *fixture) publishEach(t *testing.T, envs ...core.Envelope) []string {
	t.Helper()
	ids := make([]string, len(envs))
	for i, env := range envs {
		if err := f.publish(t, nil, env); err != nil {
			t.Fatalf("publish %s: %v", env.ID(), err)
		}
		ids[i] = env.ID()
	}
	return ids
}

// pollUntil runs the outbox's poller (besides its own wake-ups) until
// every id is DONE.
func (f *fixture) pollUntil(t *testing.T, what string, ids ...string) {
	t.Helper()
	waitFor(t, what, func() bool {
		if _, err := parts.Outbox(f.ob).Poller.PollOnce(context.Background()); err != nil {
			t.Fatalf("PollOnce: %v", err)
		}
		for _, id := range ids {
			if f.status(t, id).Status != core.StatusDone {
				return false
			}
		}
		return true
	})
}

// storeOn is a store on db's default table, for the operators' calls the
// outbox does not wrap (Stats, BlockedKeys).
func storeOn(t *testing.T, db *sqlx.DB) *jdbcstore.Store {
	t.Helper()
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// blockedAccount publishes a/1, a/2, a/3 and b/1, b/2, interleaved, to an
// outbox whose listener fails a/1 until fixed is set, with one attempt
// before DEAD. It returns once a/1 is DEAD and b's events are DONE: a is
// blocked, b flowed. ids are a's three events.
func blockedAccount(t *testing.T, h Harness, onDead core.DeadPolicy) (f *fixture, rec *recorder, fixed *atomic.Bool, ids []string) {
	t.Helper()
	f = orderedFixture(t, h, func(c *outbox.Config) {
		c.Ordering.OnDead = onDead
		c.Dispatcher.MaxAttempts = 1
	})
	rec, fixed = newRecorder(), &atomic.Bool{}
	f.ob.RegisterFunc(orderedType, rec.listener(func(agg string, seq int) error {
		if agg == "a" && seq == 1 && !fixed.Load() {
			return errPoison
		}
		return nil
	}))
	all := f.publishEach(t, account(t, "a", 1), account(t, "b", 1), account(t, "a", 2), account(t, "b", 2), account(t, "a", 3))
	ids = []string{all[0], all[2], all[4]}
	f.waitStatus(t, ids[0], core.StatusDead)
	f.pollUntil(t, "the other key's events DONE", all[1], all[3])
	rec.wantOrder(t, "b", 1, 2)
	return f, rec, fixed, ids
}

// Block policy (the default): the DEAD event holds its key, for good and
// on every poll, while another key's events flow; the key is counted and
// listed as blocked.
func testOrderedBlock(t *testing.T, h Harness) {
	f, rec, _, ids := blockedAccount(t, h, core.BlockOnDead)
	for range 3 { // polls find nothing of the blocked key
		if res, err := parts.Outbox(f.ob).Poller.PollOnce(context.Background()); err != nil || res.Enqueued != 0 {
			t.Fatalf("PollOnce with the key blocked = %+v, %v; want nothing enqueued", res, err)
		}
	}
	for _, id := range ids[1:] {
		if rec := f.status(t, id); rec.Status != core.StatusNew || rec.Attempts != 0 {
			t.Errorf("%s behind the dead event: %v with %d attempts, want NEW untouched", id, rec.Status, rec.Attempts)
		}
	}
	rec.wantOrder(t, "a")
	st := storeOn(t, f.db)
	stats, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stats.BlockedKeys != 1 {
		t.Errorf("Stats.BlockedKeys = %d, want 1", stats.BlockedKeys)
	}
	keys, err := st.BlockedKeys(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].Key != core.AggregateOrderKey("Account", "a") || keys[0].EventID != ids[0] || keys[0].Seq != 1 ||
		!strings.Contains(keys[0].LastError, errPoison.Error()) {
		t.Errorf("BlockedKeys = %+v, want Account:a held by %s", keys, ids[0])
	}
}

// Skip policy: the DEAD event releases its key; the later events follow
// in order without an operator.
func testOrderedSkip(t *testing.T, h Harness) {
	f, rec, _, ids := blockedAccount(t, h, core.SkipOnDead)
	f.pollUntil(t, "the events after the skipped one DONE", ids[1:]...)
	rec.wantOrder(t, "a", 2, 3)
	if st := f.status(t, ids[0]).Status; st != core.StatusDead {
		t.Errorf("the skipped event is %v, want DEAD", st)
	}
	if n, err := storeOn(t, f.db).CountBlockedKeys(context.Background()); err != nil || n != 0 {
		t.Errorf("CountBlockedKeys = %d, %v; want 0 under the skip policy", n, err)
	}
}

// Replaying the dead event unblocks the key: it is delivered first, then
// the later events, in order.
func testOrderedReplay(t *testing.T, h Harness) {
	f, rec, fixed, ids := blockedAccount(t, h, core.BlockOnDead)
	fixed.Store(true)
	res, err := f.ob.ReplayDead(context.Background(), jdbcstore.DeadFilter{IDs: ids[:1]}, jdbcstore.ReplayOptions{})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("ReplayDead = %+v, %v", res, err)
	}
	// (This node remembers a/1 as finished for a few seconds after it
	// died, and takes it again after that.)
	f.pollUntil(t, "the replayed event and the ones after it DONE", ids...)
	rec.wantOrder(t, "a", 1, 2, 3)
}

// Discarding the dead event unblocks the key: it is never delivered, the
// later events are, in order.
func testOrderedDiscard(t *testing.T, h Harness) {
	f, rec, _, ids := blockedAccount(t, h, core.BlockOnDead)
	dry, err := f.ob.DiscardDead(context.Background(), jdbcstore.DeadFilter{IDs: ids[:1]}, jdbcstore.DiscardOptions{DryRun: true})
	if err != nil || dry.Matched != 1 || dry.Discarded != 0 {
		t.Fatalf("dry DiscardDead = %+v, %v", dry, err)
	}
	if res, err := parts.Outbox(f.ob).Poller.PollOnce(context.Background()); err != nil || res.Enqueued != 0 {
		t.Fatalf("PollOnce after a dry run = %+v, %v; want the key still blocked", res, err)
	}
	res, err := f.ob.DiscardDead(context.Background(), jdbcstore.DeadFilter{IDs: ids[:1]}, jdbcstore.DiscardOptions{})
	if err != nil || res.Discarded != 1 {
		t.Fatalf("DiscardDead = %+v, %v", res, err)
	}
	if _, err := f.ob.Get(context.Background(), ids[0]); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("discarded event: %v, want ErrNotFound", err)
	}
	f.pollUntil(t, "the events after the discarded one DONE", ids[1:]...)
	rec.wantOrder(t, "a", 2, 3)
}

// A slow event holds its key only: with the listener stuck on it, the
// other keys' events are delivered by the other workers, the slow key's
// next event waits, and follows once the slow one finished.
func testOrderedSlowKey(t *testing.T, h Harness) {
	f := orderedFixture(t, h, func(c *outbox.Config) { c.Dispatcher.Workers = 2 })
	rec := newRecorder()
	entered, gate := make(chan struct{}), make(chan struct{})
	f.ob.RegisterFunc(orderedType, rec.listener(func(agg string, seq int) error {
		if agg == "slow" && seq == 1 {
			close(entered)
			<-gate
		}
		return nil
	}))
	slow := f.publishEach(t, account(t, "slow", 1))
	testsupport.Recv(t, waitTimeout, entered, "the slow listener to start")
	slow = append(slow, f.publishEach(t, account(t, "slow", 2))...)
	var others []string
	for i := range 10 {
		for seq := 1; seq <= 2; seq++ {
			others = append(others, f.publishEach(t, account(t, fmt.Sprintf("k%d", i), seq))...)
		}
	}
	f.pollUntil(t, "every other key's events DONE while the slow one runs", others...)
	for i := range 10 {
		rec.wantOrder(t, fmt.Sprintf("k%d", i), 1, 2)
	}
	if r := f.status(t, slow[1]); r.Status != core.StatusNew || len(rec.of("slow")) != 0 {
		t.Fatalf("slow/2 is %v (deliveries %v) while slow/1 runs; want NEW, none", r.Status, rec.of("slow"))
	}
	close(gate)
	f.pollUntil(t, "the slow key's events DONE", slow...)
	rec.wantOrder(t, "slow", 1, 2)
}

// Node A holds the lease of a key's first event and stops writing (a
// crash, as far as the database can tell: its listener never returns).
// Node B delivers nothing of the key while A's lease runs; once it
// expired (B's clock moved past it) B delivers the event and the ones
// after it, in order.
func testOrderedNodeCrash(t *testing.T, h Harness) {
	db := h.Open(t)
	ctx := context.Background()
	newNode := func(owner string, tweak func(*outbox.Config)) (*outbox.Outbox, *testsupport.Metrics) {
		m := &testsupport.Metrics{}
		cfg := nodeConfig(owner, nil, m)
		cfg.Ordering = core.Ordering{Types: []string{orderedType}}
		cfg.Poller.Interval = time.Hour
		cfg.Poller.SkipRecent = -1
		tweak(&cfg)
		ob, err := outbox.New(ctx, db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return ob, m
	}
	// A: the listener of a/1 hangs until the end of the test; long
	// timeouts, so A writes nothing about it meanwhile.
	a, aMetrics := newNode("node-a", func(c *outbox.Config) {
		c.DisablePoller = true
		c.Dispatcher.ListenerTimeout = time.Hour
		c.Dispatcher.Lease = 2 * time.Hour
	})
	hung, release := make(chan struct{}), make(chan struct{})
	var hangOnce sync.Once
	a.RegisterFunc(orderedType, func(ctx context.Context, e core.Envelope) error {
		if v, _ := e.Header("seq"); v == "1" {
			hangOnce.Do(func() { close(hung) })
			<-release
		}
		return nil
	})
	clock := testsupport.NewClock(time.Now())
	b, _ := newNode("node-b", func(c *outbox.Config) { c.Now = clock.Now })
	rec := newRecorder()
	b.RegisterFunc(orderedType, rec.listener(nil))
	for _, ob := range []*outbox.Outbox{a, b} {
		if err := ob.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		close(release)
		for _, ob := range []*outbox.Outbox{a, b} {
			cctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			if err := ob.Close(cctx); err != nil {
				t.Errorf("Close: %v", err)
			}
			cancel()
		}
	})
	fa := &fixture{ob: a, db: db}
	ids := fa.publishEach(t, account(t, "a", 1))
	testsupport.Recv(t, waitTimeout, hung, "node A to start delivering a/1")
	ids = append(ids, fa.publishEach(t, account(t, "a", 2), account(t, "a", 3))...)
	if r := fa.status(t, ids[0]); r.LockedBy != "node-a" {
		t.Fatalf("a/1 is leased by %q, want node-a", r.LockedBy)
	}
	clock.Set(time.Now()) // B's clock is the real one, for now
	pollB := func() int {
		res, err := parts.Outbox(b).Poller.PollOnce(ctx)
		if err != nil {
			t.Fatalf("node B PollOnce: %v", err)
		}
		return res.Enqueued
	}
	if n := pollB(); n != 0 {
		t.Fatalf("node B took %d events of the key while node A's lease runs", n)
	}
	for _, id := range ids[1:] {
		if r := fa.status(t, id); r.Status != core.StatusNew || r.LockedBy != "" {
			t.Fatalf("%s: %v leased by %q, want NEW and unowned behind a/1", id, r.Status, r.LockedBy)
		}
	}
	clock.Advance(3 * time.Hour) // A's lease expired, for B
	fb := &fixture{ob: b, db: db}
	waitFor(t, "node B to deliver the key's events", func() bool {
		pollB()
		for _, id := range ids {
			if fb.status(t, id).Status != core.StatusDone {
				return false
			}
		}
		return true
	})
	rec.wantOrder(t, "a", 1, 2, 3)
	if n := aMetrics.Success.Load(); n != 0 {
		t.Errorf("node A finished %d deliveries; it was to hang", n)
	}
}

// A rolled-back ordered publish leaves no gap: the key's next event,
// published right after, takes the hot path (the poller is off) as the
// key's first position.
func testOrderedRollback(t *testing.T, h Harness) {
	f := orderedFixture(t, h, func(c *outbox.Config) { c.DisablePoller = true })
	rec := newRecorder()
	f.ob.RegisterFunc(orderedType, rec.listener(nil))
	gone := account(t, "r", 1)
	if err := f.publish(t, errBusiness, gone); !errors.Is(err, errBusiness) {
		t.Fatalf("InTx = %v, want the business error", err)
	}
	if _, err := f.ob.Get(context.Background(), gone.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("rolled-back event: %v, want ErrNotFound", err)
	}
	for i, seq := range []int{1, 2} {
		id := f.publishEach(t, account(t, "r", seq))[0]
		r := f.waitStatus(t, id, core.StatusDone)
		if r.OrderSeq != int64(i+1) {
			t.Errorf("event %d of the key has position %d, want %d", i+1, r.OrderSeq, i+1)
		}
	}
	rec.wantOrder(t, "r", 1, 2)
	if hot := f.metrics.Hot.Load(); hot != 2 {
		t.Errorf("%d events took the hot path, want 2", hot)
	}
}

// Two transactions publishing on one key are serialized: the second
// waits in Publish until the first commits, and the events are delivered
// in commit order.
func testOrderedConcurrentTx(t *testing.T, h Harness) {
	f := orderedFixture(t, h, nil)
	rec := newRecorder()
	f.ob.RegisterFunc(orderedType, rec.listener(nil))
	first, second := account(t, "c", 1), account(t, "c", 2)
	published, commit := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- f.ob.InTx(context.Background(), func(ctx context.Context) error {
			if _, err := f.ob.Publish(ctx, first); err != nil {
				return err
			}
			close(published)
			<-commit
			return nil
		})
	}()
	testsupport.Recv(t, waitTimeout, published, "the first transaction to publish")
	secondDone := make(chan error, 1)
	go func() { secondDone <- f.publish(t, nil, second) }()
	select {
	case err := <-secondDone:
		close(commit)
		t.Fatalf("the second transaction finished (%v) while the first, on the same key, is open", err)
	case <-time.After(200 * time.Millisecond): // a bounded negative check: it must still wait
	}
	close(commit)
	if err := testsupport.Recv(t, waitTimeout, firstDone, "the first commit"); err != nil {
		t.Fatal(err)
	}
	if err := testsupport.Recv(t, waitTimeout, secondDone, "the second commit"); err != nil {
		t.Fatal(err)
	}
	f.pollUntil(t, "both events DONE", first.ID(), second.ID())
	rec.wantOrder(t, "c", 1, 2)
	if a, b := f.status(t, first.ID()).OrderSeq, f.status(t, second.ID()).OrderSeq; a != 1 || b != 2 {
		t.Errorf("positions %d, %d; want 1, 2 (commit order)", a, b)
	}
}

// An event of an ordered type without an aggregate fails Publish with
// ErrNoOrderKey and writes nothing (no event row, no key row), even when
// the transaction commits; a key too long fails Build with
// ErrOrderKeyTooLong; a key of the longest length, in 4-byte characters,
// is stored and delivered.
func testOrderedBadKeys(t *testing.T, h Harness) {
	f := orderedFixture(t, h, nil)
	rec := newRecorder()
	f.ob.RegisterFunc(orderedType, rec.listener(nil))
	noKey := mustEvent(t, core.NewEvent(orderedType).Header("seq", "1").PayloadJSONString(`{}`))
	err := f.ob.InTx(context.Background(), func(ctx context.Context) error {
		if _, err := f.ob.Publish(ctx, noKey); !errors.Is(err, core.ErrNoOrderKey) {
			t.Errorf("Publish without a key = %v, want ErrNoOrderKey", err)
		}
		return nil // commit all the same
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	if _, err := f.ob.Get(context.Background(), noKey.ID()); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("event refused with ErrNoOrderKey: %v, want ErrNotFound", err)
	}
	if h.Name != "sqlite" { // SQLite keeps no keys table: a position is its key's last row's plus one
		var keyRows int
		if err := f.db.GetContext(context.Background(), &keyRows, "SELECT COUNT(*) FROM outbox_event_keys"); err != nil || keyRows != 0 {
			t.Errorf("keys table holds %d rows (%v), want 0", keyRows, err)
		}
	}

	long := strings.Repeat("😀", core.MaxOrderKeyLen)
	if _, err := core.NewEvent(orderedType).OrderKey(long + "x").PayloadJSONString(`{}`).Build(); !errors.Is(err, core.ErrOrderKeyTooLong) {
		t.Errorf("Build with a key of %d characters = %v, want ErrOrderKeyTooLong", core.MaxOrderKeyLen+1, err)
	}
	env := mustEvent(t, core.NewEvent(orderedType).AggregateID("longest").OrderKey(long).Header("seq", "1").PayloadJSONString(`{}`))
	err = f.ob.InTx(context.Background(), func(ctx context.Context) error {
		if _, ok := txctx.From(ctx); !ok {
			return errors.New("no transaction")
		}
		_, err := f.ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		t.Fatalf("publish with a key of %d 4-byte characters: %v", core.MaxOrderKeyLen, err)
	}
	if r := f.waitStatus(t, env.ID(), core.StatusDone); r.OrderKey != long || r.OrderSeq != 1 {
		t.Errorf("stored key of %d characters, position %d; want the key as given, 1", len([]rune(r.OrderKey)), r.OrderSeq)
	}
	rec.wantOrder(t, "longest", 1)
}
