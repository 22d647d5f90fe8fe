package publish_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/publish"
)

// batchInserter is a core.BatchInserter and core.OrderedInserter that
// records its calls. leasedOrdered is what it reports for an ordered
// event; err, when set, fails InsertBatch.
type batchInserter struct {
	fakeInserter
	mu            sync.Mutex
	batches       [][]core.Envelope
	leases        [][]core.Lease
	leasedOrdered bool
	err           error
}

var (
	_ core.BatchInserter   = (*batchInserter)(nil)
	_ core.OrderedInserter = (*batchInserter)(nil)
)

func (b *batchInserter) InsertBatch(_ context.Context, ex core.Execer, envs []core.Envelope, leases []core.Lease) ([]bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = append(b.batches, slices.Clone(envs))
	b.leases = append(b.leases, slices.Clone(leases))
	if b.err != nil {
		return nil, b.err
	}
	leased := make([]bool, len(envs))
	for i, env := range envs {
		leased[i] = !leases[i].IsZero() && (env.OrderKey() == "" || b.leasedOrdered)
	}
	_, err := ex.ExecContext(context.Background(), "INSERT batch", len(envs))
	return leased, err
}

func (b *batchInserter) InsertOrdered(context.Context, core.Execer, core.Envelope, core.Lease) (bool, error) {
	return false, errors.New("InsertOrdered called: the batch must go through InsertBatch")
}

// events builds n events with ids id-0, id-1, ….
func events(t *testing.T, n int) []core.Envelope {
	t.Helper()
	envs := make([]core.Envelope, n)
	for i := range envs {
		envs[i] = mustBuild(t, ev().ID(fmt.Sprintf("id-%d", i)))
	}
	return envs
}

func idsOf(envs []core.Envelope) []string {
	ids := make([]string, len(envs))
	for i, env := range envs {
		ids[i] = env.ID()
	}
	return ids
}

// wantBatchError checks that err names event index (id) and wraps want.
func wantBatchError(t *testing.T, err error, index int, id string, want error) {
	t.Helper()
	var be *core.BatchError
	if !errors.As(err, &be) || be.Index != index || be.ID != id || !errors.Is(err, want) {
		t.Fatalf("err = %v, want a *core.BatchError at %d (%s) wrapping %v", err, index, id, want)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("event %d", index)) {
		t.Errorf("err = %q does not name event %d", err, index)
	}
}

func TestPublishAllWithoutTransaction(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	envs := events(t, 2)
	if ids, err := c.PublishAll(context.Background(), envs...); !errors.Is(err, core.ErrNoTransaction) || ids != nil {
		t.Fatalf("PublishAll without tx = %q, %v; want ErrNoTransaction", ids, err)
	}
	if _, err := c.PublishAllTx(context.Background(), nil, envs...); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("PublishAllTx(nil) = %v; want ErrNoTransaction", err)
	}
	done := newFakeTx()
	done.Commit()
	if _, err := c.PublishAll(core.ContextWithTx(context.Background(), done), envs...); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("PublishAll on a committed tx = %v; want ErrNoTransaction", err)
	}
	if _, err := c.PublishAll(context.Background()); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("PublishAll of nothing without tx = %v; want ErrNoTransaction", err)
	}
	if ins.count() != 0 || len(hot.received()) != 0 {
		t.Errorf("inserted %d, hot %d; want nothing", ins.count(), len(hot.received()))
	}
}

func TestPublishAllNothing(t *testing.T) {
	st := &batchInserter{}
	c, err := publish.New(st, &fakeHotQueue{})
	if err != nil {
		t.Fatal(err)
	}
	tx := newFakeTx()
	ids, err := c.PublishAll(core.ContextWithTx(context.Background(), tx))
	if err != nil || ids == nil || len(ids) != 0 {
		t.Fatalf("PublishAll() = %#v, %v; want no ids, no error", ids, err)
	}
	if len(st.batches) != 0 || len(tx.Execs()) != 0 || tx.CommitHooks() != 0 {
		t.Errorf("batches=%d execs=%d hooks=%d; want nothing", len(st.batches), len(tx.Execs()), tx.CommitHooks())
	}
}

// Every envelope is checked before anything is written; the error names
// the first bad one.
func TestPublishAllRefusesABadEnvelopeBeforeWriting(t *testing.T) {
	st := &batchInserter{}
	hot := &fakeHotQueue{}
	c, err := publish.New(st, hot)
	if err != nil {
		t.Fatal(err)
	}
	envs := events(t, 4)
	cases := map[string]struct {
		envs  []core.Envelope
		index int
		id    string
		want  error
	}{
		"invalid":       {[]core.Envelope{envs[0], envs[1], {}, envs[3]}, 2, "", core.ErrEmptyEventType},
		"duplicate id":  {[]core.Envelope{envs[0], envs[1], envs[2], envs[1]}, 3, envs[1].ID(), core.ErrDuplicateEvent},
		"invalid first": {[]core.Envelope{{}, envs[1]}, 0, "", core.ErrEmptyEventType},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tx := newFakeTx()
			ids, err := c.PublishAll(core.ContextWithTx(context.Background(), tx), tc.envs...)
			wantBatchError(t, err, tc.index, tc.id, tc.want)
			if ids != nil || len(st.batches) != 0 || len(tx.Execs()) != 0 || tx.CommitHooks() != 0 {
				t.Errorf("ids=%q batches=%d execs=%d hooks=%d; want nothing", ids, len(st.batches), len(tx.Execs()), tx.CommitHooks())
			}
		})
	}
	var ve *core.ValidationError
	_, err = c.PublishAll(core.ContextWithTx(context.Background(), newFakeTx()), envs[0], core.Envelope{})
	if !errors.As(err, &ve) || ve.Field != "event_type" {
		t.Errorf("err = %v, want the *core.ValidationError inside", err)
	}
}

// With a core.BatchInserter the events go in one call, leased to the hot
// queue's node, and reach the hot queue in order after commit, through
// one after-commit hook.
func TestPublishAllThroughABatchInserter(t *testing.T) {
	st := &batchInserter{}
	hot := &fakeHotQueue{}
	c, err := publish.New(st, hot)
	if err != nil {
		t.Fatal(err)
	}
	envs := events(t, 10)
	tx := newFakeTx()
	ids, err := c.PublishAll(core.ContextWithTx(context.Background(), tx), envs...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, idsOf(envs)) {
		t.Errorf("ids = %q, want %q", ids, idsOf(envs))
	}
	if len(st.batches) != 1 || !slices.Equal(idsOf(st.batches[0]), idsOf(envs)) {
		t.Fatalf("InsertBatch calls = %d, want 1 with every event in order", len(st.batches))
	}
	for i, l := range st.leases[0] {
		if l != fakeLease {
			t.Errorf("event %d inserted with lease %+v, want %+v", i, l, fakeLease)
		}
	}
	if st.count() != 0 || len(tx.Execs()) != 1 {
		t.Errorf("single inserts = %d, statements = %d; want 0 and 1", st.count(), len(tx.Execs()))
	}
	if tx.CommitHooks() != 1 {
		t.Errorf("after-commit hooks = %d, want 1", tx.CommitHooks())
	}
	if len(hot.received()) != 0 {
		t.Fatal("the hot queue got events before commit")
	}
	tx.Commit()
	if got := idsOf(hot.received()); !slices.Equal(got, idsOf(envs)) {
		t.Errorf("hot queue got %q after commit, want %q", got, idsOf(envs))
	}
}

// A store without core.BatchInserter gets one Insert per event, in order,
// on the same transaction.
func TestPublishAllFallsBackToOneInsertPerEvent(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	envs := events(t, 3)
	tx := newFakeTx()
	ids, err := c.PublishAllTx(context.Background(), tx, envs...)
	if err != nil || !slices.Equal(ids, idsOf(envs)) {
		t.Fatalf("PublishAllTx = %q, %v", ids, err)
	}
	if !slices.Equal(idsOf(ins.envs), idsOf(envs)) || len(tx.Execs()) != 3 {
		t.Fatalf("inserted %q with %d statements, want %q with 3", idsOf(ins.envs), len(tx.Execs()), idsOf(envs))
	}
	for _, ex := range ins.exs {
		if ex != core.Execer(tx) {
			t.Errorf("inserted on %T, not on the caller's transaction", ex)
		}
	}
	tx.Commit()
	if got := idsOf(hot.received()); !slices.Equal(got, idsOf(envs)) {
		t.Errorf("hot queue got %q, want %q", got, idsOf(envs))
	}
}

func TestPublishAllInsertErrors(t *testing.T) {
	t.Run("batch", func(t *testing.T) {
		boom := errors.New("boom")
		st := &batchInserter{err: &core.BatchError{Index: 1, ID: "id-1", Err: boom}}
		hot := &fakeHotQueue{}
		c, err := publish.New(st, hot)
		if err != nil {
			t.Fatal(err)
		}
		tx := newFakeTx()
		ids, err := c.PublishAll(core.ContextWithTx(context.Background(), tx), events(t, 3)...)
		wantBatchError(t, err, 1, "id-1", boom)
		if ids != nil || tx.CommitHooks() != 0 {
			t.Errorf("ids=%q hooks=%d after a failed insert", ids, tx.CommitHooks())
		}
		tx.Commit()
		if len(hot.received()) != 0 {
			t.Error("events of a failed batch reached the hot queue")
		}
	})
	t.Run("one by one", func(t *testing.T) {
		st := memstore.New(nil)
		st.Fail = func(op, id string) error {
			if id == "id-2" {
				return errors.New("boom")
			}
			return nil
		}
		c, err := publish.New(onlyInsert{st}, &fakeHotQueue{})
		if err != nil {
			t.Fatal(err)
		}
		tx := newFakeTx()
		_, err = c.PublishAllTx(context.Background(), tx, events(t, 3)...)
		var be *core.BatchError
		if !errors.As(err, &be) || be.Index != 2 || be.ID != "id-2" || !strings.HasPrefix(err.Error(), "outbox: publish all: event 2 (id-2)") {
			t.Fatalf("err = %v, want event 2 named", err)
		}
		if tx.CommitHooks() != 0 {
			t.Errorf("hooks = %d after a failed insert", tx.CommitHooks())
		}
	})
}

// An ordered event needs a store that keeps order: refused up front.
func TestPublishAllOrderedNeedsAnOrderingStore(t *testing.T) {
	c, ins := newTestClient(t, &fakeHotQueue{})
	envs := events(t, 3)
	envs[1] = mustBuild(t, ev().ID("k-1").OrderKey("k"))
	tx := newFakeTx()
	_, err := c.PublishAll(core.ContextWithTx(context.Background(), tx), envs...)
	wantBatchError(t, err, 1, "k-1", core.ErrOrderingUnsupported)
	if ins.count() != 0 || len(tx.Execs()) != 0 {
		t.Errorf("inserts=%d execs=%d; want none", ins.count(), len(tx.Execs()))
	}
	c.SetOrdering(core.Ordering{Types: []string{"UserCreated"}}) // ev()'s type, without an aggregate
	_, err = c.PublishAll(core.ContextWithTx(context.Background(), tx), events(t, 2)...)
	wantBatchError(t, err, 0, "id-0", core.ErrNoOrderKey)
}

// Config.Ordering applies to every event of the batch; an ordered event
// behind a pending one of its key is left to the poller, the others go
// to the hot queue. The caller's slice is not changed.
func TestPublishAllOrdered(t *testing.T) {
	st := &batchInserter{leasedOrdered: false}
	hot := &fakeHotQueue{}
	c, err := publish.New(st, hot)
	if err != nil {
		t.Fatal(err)
	}
	c.SetOrdering(core.Ordering{Types: []string{"Ordered"}})
	envs := []core.Envelope{
		mustBuild(t, ev().ID("plain")),
		mustBuild(t, core.NewEvent("Ordered").ID("agg").AggregateType("A").AggregateID("1").PayloadJSONString(`{}`)),
		mustBuild(t, ev().ID("keyed").OrderKey("k")),
	}
	tx := newFakeTx()
	if _, err := c.PublishAll(core.ContextWithTx(context.Background(), tx), envs...); err != nil {
		t.Fatal(err)
	}
	if envs[1].OrderKey() != "" {
		t.Error("the caller's envelope was changed")
	}
	if got := st.batches[0][1].OrderKey(); got != core.AggregateOrderKey("A", "1") {
		t.Errorf("inserted with key %q, want the aggregate's", got)
	}
	tx.Commit()
	if got := idsOf(hot.received()); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("hot queue got %q, want only the unordered event", got)
	}
}

// A transaction without hooks: unowned rows, no hot hand-off.
func TestPublishAllPlainTransaction(t *testing.T) {
	st := &batchInserter{}
	hot := &fakeHotQueue{}
	c, err := publish.New(st, hot)
	if err != nil {
		t.Fatal(err)
	}
	plain := &plainTx{tx: newFakeTx()}
	if _, err := c.PublishAllTx(context.Background(), plain, events(t, 2)...); err != nil {
		t.Fatal(err)
	}
	for _, l := range st.leases[0] {
		if !l.IsZero() {
			t.Errorf("lease %+v on a plain transaction, want unowned", l)
		}
	}
	plain.tx.Commit()
	if len(hot.received()) != 0 || plain.tx.CommitHooks() != 0 {
		t.Error("a plain transaction's events went to the hot queue")
	}
}

// recordingObserver adds a header to every event and records the
// outcome of each publish.
type recordingObserver struct {
	core.NopObserver
	mu   sync.Mutex
	seen []string
	errs []error
	bad  string // an event id to return an invalid header for
}

func (o *recordingObserver) Publish(_ context.Context, env core.Envelope) (map[string]string, func(error)) {
	o.mu.Lock()
	o.seen = append(o.seen, env.ID())
	o.mu.Unlock()
	h := map[string]string{"traceparent": "tp-" + env.ID()}
	if env.ID() == o.bad {
		h = map[string]string{"": "x"}
	}
	return h, func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.errs = append(o.errs, err)
	}
}

func TestPublishAllObserved(t *testing.T) {
	st := &batchInserter{}
	c, err := publish.New(st, &fakeHotQueue{})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recordingObserver{}
	c.Observer = obs
	envs := events(t, 3)
	if _, err := c.PublishAll(core.ContextWithTx(context.Background(), newFakeTx()), envs...); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(obs.seen, idsOf(envs)) || len(obs.errs) != 3 || obs.errs[0] != nil || obs.errs[2] != nil {
		t.Fatalf("observer saw %q, outcomes %v; want every event once, nil", obs.seen, obs.errs)
	}
	for _, env := range st.batches[0] {
		if v, _ := env.Header("traceparent"); v != "tp-"+env.ID() {
			t.Errorf("%s inserted with traceparent %q", env.ID(), v)
		}
	}

	obs = &recordingObserver{bad: "id-1"}
	c.Observer = obs
	_, err = c.PublishAll(core.ContextWithTx(context.Background(), newFakeTx()), events(t, 3)...)
	wantBatchError(t, err, 1, "id-1", core.ErrInvalidHeader)
	if len(obs.errs) != 3 || obs.errs[0] == nil || obs.errs[1] == nil || obs.errs[2] == nil {
		t.Errorf("outcomes %v; want the error for every event of the batch observed", obs.errs)
	}
	if len(st.batches) != 1 {
		t.Error("a batch was inserted despite the observer's bad header")
	}
}

// onlyInsert hides every method of a store but Insert.
type onlyInsert struct{ core.Inserter }

// memstore implements core.BatchInserter all or nothing; through a
// wrapper that hides it, the client inserts one by one. Both store the
// same rows.
func TestPublishAllOnMemstore(t *testing.T) {
	for name, wrap := range map[string]func(*memstore.Store) core.Inserter{
		"batch":      func(s *memstore.Store) core.Inserter { return s },
		"one by one": func(s *memstore.Store) core.Inserter { return onlyInsert{s} },
	} {
		t.Run(name, func(t *testing.T) {
			st := memstore.New(nil)
			hot := &fakeHotQueue{}
			c, err := publish.New(wrap(st), hot)
			if err != nil {
				t.Fatal(err)
			}
			envs := events(t, 5)
			tx := newFakeTx()
			if _, err := c.PublishAll(core.ContextWithTx(context.Background(), tx), envs...); err != nil {
				t.Fatal(err)
			}
			tx.Commit()
			for _, env := range envs {
				r, ok := st.Get(env.ID())
				if !ok || r.LockedBy != fakeLease.Owner || r.Status != core.StatusNew {
					t.Errorf("%s: stored %v, %+v", env.ID(), ok, r)
				}
			}
			if len(hot.received()) != 5 {
				t.Errorf("hot queue got %d events, want 5", len(hot.received()))
			}
		})
	}
}

// Every Publish and PublishAll is reported to the Observer, also one that
// fails before the insert: no transaction, a nil or finished one, an
// invalid envelope, an ordered type without a key. Each event is reported
// once, with the error returned.
func TestPublishFailingBeforeTheInsertIsObserved(t *testing.T) {
	c, err := publish.New(&batchInserter{}, &fakeHotQueue{})
	if err != nil {
		t.Fatal(err)
	}
	c.SetOrdering(core.Ordering{Types: []string{"Keyed"}})
	good := events(t, 2)
	noKey, err := core.NewEvent("Keyed").PayloadJSONString(`{}`).Build() // no aggregate: no key
	if err != nil {
		t.Fatal(err)
	}
	finished := newFakeTx()
	finished.Commit()
	inTx := func(tx core.Tx) context.Context { return core.ContextWithTx(context.Background(), tx) }
	for _, tc := range []struct {
		name    string
		publish func() error
		want    error
		n       int
	}{
		{"Publish without a transaction", func() error { _, err := c.Publish(context.Background(), good[0]); return err }, core.ErrNoTransaction, 1},
		{"PublishTx with a nil tx", func() error { _, err := c.PublishTx(context.Background(), nil, good[0]); return err }, core.ErrNoTransaction, 1},
		{"Publish on a finished tx", func() error { _, err := c.Publish(inTx(finished), good[0]); return err }, core.ErrNoTransaction, 1},
		{"Publish of the zero Envelope", func() error { _, err := c.Publish(inTx(newFakeTx()), core.Envelope{}); return err }, core.ErrEmptyEventType, 1},
		{"Publish of an ordered type without a key", func() error { _, err := c.Publish(inTx(newFakeTx()), noKey); return err }, core.ErrNoOrderKey, 1},
		{"PublishAll without a transaction", func() error { _, err := c.PublishAll(context.Background(), good...); return err }, core.ErrNoTransaction, 2},
		{"PublishAll with an invalid event", func() error {
			_, err := c.PublishAll(inTx(newFakeTx()), good[0], core.Envelope{})
			return err
		}, core.ErrEmptyEventType, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &recordingObserver{}
			c.Observer = obs
			err := tc.publish()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(obs.seen) != tc.n || len(obs.errs) != tc.n {
				t.Fatalf("observer saw %d publishes, %d outcomes; want %d each", len(obs.seen), len(obs.errs), tc.n)
			}
			for _, e := range obs.errs {
				if !errors.Is(e, tc.want) {
					t.Errorf("outcome %v, want %v", e, tc.want)
				}
			}
		})
	}
}
