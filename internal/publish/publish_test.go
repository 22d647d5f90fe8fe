package publish_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/publish"
)

func newTestClient(t *testing.T, hot handoff.Hot) (*publish.Client, *fakeInserter) {
	t.Helper()
	ins := &fakeInserter{}
	c, err := publish.New(ins, hot)
	if err != nil {
		t.Fatal(err)
	}
	return c, ins
}

func TestNewClientNilStore(t *testing.T) {
	c, err := publish.New(nil, nil)
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	var ce *core.ConfigError
	if !errors.As(err, &ce) || ce.Field != "store" {
		t.Errorf("err = %#v, want *ConfigError for field store", err)
	}
	if c != nil {
		t.Error("NewClient returned a client with an error")
	}
	c, err = publish.New(&fakeInserter{}, nil)
	if err != nil || c == nil {
		t.Fatalf("NewClient with nil hot queue: %v", err)
	}
}

func TestConfigError(t *testing.T) {
	err := error(&core.ConfigError{Field: "Workers", Msg: "must be positive"})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Error("ConfigError does not wrap ErrInvalidConfig")
	}
	if want := core.ErrInvalidConfig.Error() + ": Workers must be positive"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestTxContext(t *testing.T) {
	if _, ok := core.TxFromContext(context.Background()); ok {
		t.Error("empty context carries a tx")
	}
	tx := newFakeTx()
	got, ok := core.TxFromContext(core.ContextWithTx(context.Background(), tx))
	if !ok || got != tx {
		t.Errorf("TxFromContext = %v, %v", got, ok)
	}
	if _, ok := core.TxFromContext(core.ContextWithTx(context.Background(), nil)); ok {
		t.Error("nil tx reported as present")
	}
}

func TestPublishWithoutTransaction(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	id, err := c.Publish(context.Background(), mustBuild(t, ev()))
	if !errors.Is(err, core.ErrNoTransaction) || id != "" {
		t.Fatalf("Publish = %q, %v; want ErrNoTransaction", id, err)
	}
	id, err = c.Publish(core.ContextWithTx(context.Background(), nil), mustBuild(t, ev()))
	if !errors.Is(err, core.ErrNoTransaction) || id != "" {
		t.Fatalf("Publish with nil tx in ctx = %q, %v; want ErrNoTransaction", id, err)
	}
	if ins.count() != 0 || len(hot.received()) != 0 {
		t.Errorf("inserted %d, hot %d; want nothing", ins.count(), len(hot.received()))
	}
}

func TestPublishInactiveTransaction(t *testing.T) {
	c, ins := newTestClient(t, &fakeHotQueue{})
	tx := newFakeTx()
	tx.Commit()
	_, err := c.Publish(core.ContextWithTx(context.Background(), tx), mustBuild(t, ev()))
	if !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("err = %v, want ErrNoTransaction", err)
	}
	if ins.count() != 0 || len(tx.Execs()) != 0 || tx.CommitHooks() != 0 {
		t.Errorf("inactive tx written to: inserts=%d execs=%d hooks=%d", ins.count(), len(tx.Execs()), tx.CommitHooks())
	}
}

func TestPublishTxNil(t *testing.T) {
	c, ins := newTestClient(t, &fakeHotQueue{})
	_, err := c.PublishTx(context.Background(), nil, mustBuild(t, ev()))
	if !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("err = %v, want ErrNoTransaction", err)
	}
	tx := newFakeTx()
	tx.Rollback()
	if _, err := c.PublishTx(context.Background(), tx, mustBuild(t, ev())); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("rolled-back tx: err = %v, want ErrNoTransaction", err)
	}
	if ins.count() != 0 {
		t.Errorf("inserted %d", ins.count())
	}
}

func TestPublishInvalidEnvelope(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	tx := newFakeTx()
	id, err := c.Publish(core.ContextWithTx(context.Background(), tx), core.Envelope{})
	var ve *core.ValidationError
	if !errors.Is(err, core.ErrEmptyEventType) || !errors.As(err, &ve) || ve.Field != "event_type" {
		t.Fatalf("Publish(empty envelope) = %v, want a ValidationError on event_type wrapping ErrEmptyEventType", err)
	}
	if id != "" || ins.count() != 0 || len(tx.Execs()) != 0 || tx.CommitHooks() != 0 {
		t.Errorf("id=%q inserts=%d execs=%d hooks=%d; want nothing", id, ins.count(), len(tx.Execs()), tx.CommitHooks())
	}
}

func TestPublishInsertError(t *testing.T) {
	for _, cause := range []error{errors.New("connection reset"), fmt.Errorf("store: %w", core.ErrDuplicateEvent)} {
		hot := &fakeHotQueue{}
		c, ins := newTestClient(t, hot)
		ins.err = cause
		tx := newFakeTx()
		env := mustBuild(t, ev())
		id, err := c.Publish(core.ContextWithTx(context.Background(), tx), env)
		if !errors.Is(err, cause) {
			t.Fatalf("err = %v, does not wrap %v", err, cause)
		}
		if errors.Is(cause, core.ErrDuplicateEvent) && !errors.Is(err, core.ErrDuplicateEvent) {
			t.Errorf("err = %v, lost ErrDuplicateEvent", err)
		}
		if id != "" || tx.CommitHooks() != 0 {
			t.Errorf("id=%q hooks=%d after insert failure", id, tx.CommitHooks())
		}
		tx.Commit()
		if len(hot.received()) != 0 {
			t.Error("failed insert reached the hot queue")
		}
	}
}

func TestPublishSuccess(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	tx := newFakeTx()
	env := mustBuild(t, core.NewEvent("USER_CREATED").AggregateType("User").AggregateID("1").PayloadJSONString(`{"a":1}`))

	id, err := c.Publish(core.ContextWithTx(context.Background(), tx), env)
	if err != nil {
		t.Fatal(err)
	}
	if id != env.ID() {
		t.Errorf("id = %q, want %q", id, env.ID())
	}
	if ins.count() != 1 || ins.envs[0].ID() != env.ID() {
		t.Fatalf("inserts = %d", ins.count())
	}
	if ins.exs[0] != core.Execer(tx) {
		t.Errorf("inserted on %T, not on the caller's transaction", ins.exs[0])
	}
	if len(tx.Execs()) != 1 {
		t.Errorf("execs on tx = %d, want 1", len(tx.Execs()))
	}
	if n := tx.CommitHooks(); n != 1 {
		t.Fatalf("after-commit hooks = %d, want exactly 1", n)
	}
	if len(hot.received()) != 0 {
		t.Fatal("hot queue received the event before commit")
	}
	tx.Commit()
	got := hot.received()
	if len(got) != 1 {
		t.Fatalf("hot queue received %d events after commit, want 1", len(got))
	}
	if got[0].ID() != env.ID() || got[0].Type() != env.Type() || !bytes.Equal(got[0].Payload(), env.Payload()) {
		t.Errorf("hot queue got a different envelope: %s %s, want %s %s", got[0].ID(), got[0].Type(), env.ID(), env.Type())
	}
}

func TestPublishRollbackNeverReachesHotQueue(t *testing.T) {
	hot := &fakeHotQueue{}
	c, _ := newTestClient(t, hot)
	tx := newFakeTx()
	if _, err := c.Publish(core.ContextWithTx(context.Background(), tx), mustBuild(t, ev())); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if len(hot.received()) != 0 {
		t.Error("rolled-back event reached the hot queue")
	}
}

func TestPublishFullHotQueueIsNotAnError(t *testing.T) {
	hot := &fakeHotQueue{reject: true}
	c, _ := newTestClient(t, hot)
	tx := newFakeTx()
	id, err := c.Publish(core.ContextWithTx(context.Background(), tx), mustBuild(t, ev()))
	if err != nil || id == "" {
		t.Fatalf("Publish = %q, %v", id, err)
	}
	tx.Commit() // the hook must swallow the rejection
	if len(hot.received()) != 1 {
		t.Errorf("hot queue offered %d events, want 1", len(hot.received()))
	}
}

func TestPublishNilHotQueue(t *testing.T) {
	c, ins := newTestClient(t, nil)
	tx := newFakeTx()
	env := mustBuild(t, ev())
	id, err := c.Publish(core.ContextWithTx(context.Background(), tx), env)
	if err != nil || id != env.ID() {
		t.Fatalf("Publish = %q, %v", id, err)
	}
	if ins.count() != 1 {
		t.Errorf("inserts = %d", ins.count())
	}
	if n := tx.CommitHooks(); n > 1 {
		t.Errorf("after-commit hooks = %d", n)
	}
	tx.Commit() // whatever hook exists must not panic
}

func TestPublishTxExplicit(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	tx := newFakeTx()
	env := mustBuild(t, ev())
	// The explicit tx wins; ctx need not carry one.
	id, err := c.PublishTx(context.Background(), tx, env)
	if err != nil || id != env.ID() || ins.count() != 1 || tx.CommitHooks() != 1 {
		t.Fatalf("PublishTx = %q, %v; inserts=%d hooks=%d", id, err, ins.count(), tx.CommitHooks())
	}
}

// A transaction without hooks (a plain *sql.Tx) gets an unowned insert
// and no hot hand-off: the poller delivers it once it committed.
func TestPublishTxPlainTransaction(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	plain := &plainTx{tx: newFakeTx()} // an Execer, not a core.Tx
	env := mustBuild(t, ev())
	id, err := c.PublishTx(context.Background(), plain, env)
	if err != nil || id != env.ID() || ins.count() != 1 {
		t.Fatalf("PublishTx = %q, %v; inserts=%d", id, err, ins.count())
	}
	if l := ins.leases[0]; !l.IsZero() {
		t.Errorf("plain tx: lease %+v, want unowned", l)
	}
	if len(plain.tx.Execs()) != 1 || len(hot.received()) != 0 || plain.tx.CommitHooks() != 0 {
		t.Errorf("plain tx: execs=%d hot=%d hooks=%d, want 1, 0, 0", len(plain.tx.Execs()), len(hot.received()), plain.tx.CommitHooks())
	}
	var nilTx *plainTx
	if _, err := c.PublishTx(context.Background(), nilTx, env); !errors.Is(err, core.ErrNoTransaction) {
		t.Errorf("nil plain tx: %v, want ErrNoTransaction", err)
	}
}

// plainTx runs statements and nothing else, as a *sql.Tx does.
type plainTx struct{ tx *fakeTx }

func (p *plainTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return p.tx.ExecContext(ctx, q, args...)
}

func TestPublishRecordEnvelope(t *testing.T) {
	c, ins := newTestClient(t, nil)
	rec := core.Record{ID: "evt-r", Type: "E", Payload: []byte(`{}`)}
	env, err := rec.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishTx(context.Background(), newFakeTx(), env); err != nil || ins.count() != 1 {
		t.Fatalf("PublishTx = %v, inserts = %d", err, ins.count())
	}
}

func TestPublishConcurrent(t *testing.T) {
	hot := &fakeHotQueue{}
	c, ins := newTestClient(t, hot)
	const goroutines, perG = 8, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range perG {
				tx := newFakeTx()
				env, err := core.JSONEvent("E", `{}`)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Publish(core.ContextWithTx(context.Background(), tx), env); err != nil {
					t.Error(err)
					return
				}
				tx.Commit()
			}
		})
	}
	wg.Wait()
	if ins.count() != goroutines*perG || len(hot.received()) != goroutines*perG {
		t.Errorf("inserts=%d hot=%d, want %d", ins.count(), len(hot.received()), goroutines*perG)
	}
}

// The hot queue's lease is inserted with the row and handed back on commit,
// so the publishing node owns its event from the insert on.
func TestPublishLeasesToHotQueue(t *testing.T) {
	ins, hot := &fakeInserter{}, &fakeHotQueue{}
	c, err := publish.New(ins, hot)
	if err != nil {
		t.Fatal(err)
	}
	tx := newFakeTx()
	env, err := core.JSONEvent("T", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishTx(context.Background(), tx, env); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if len(ins.leases) != 1 || ins.leases[0] != fakeLease {
		t.Fatalf("inserted with %v, want %v", ins.leases, fakeLease)
	}
	if len(hot.leases) != 1 || hot.leases[0] != fakeLease {
		t.Fatalf("enqueued with %v, want %v", hot.leases, fakeLease)
	}
}

// Without a hot queue the row is inserted unowned.
func TestPublishWithoutHotQueueIsUnowned(t *testing.T) {
	ins := &fakeInserter{}
	c, err := publish.New(ins, nil)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := core.JSONEvent("T", `{}`)
	if _, err := c.PublishTx(context.Background(), newFakeTx(), env); err != nil {
		t.Fatal(err)
	}
	if len(ins.leases) != 1 || !ins.leases[0].IsZero() {
		t.Fatalf("leases %v, want one zero lease", ins.leases)
	}
}

// nilDoneObserver returns no done function from Publish.
type nilDoneObserver struct{ core.NopObserver }

func (nilDoneObserver) Publish(context.Context, core.Envelope) (map[string]string, func(error)) {
	return nil, nil
}

// An Observer whose Publish returns no done function is not called back,
// as a Deliver returning no end is not: Publish, PublishAll and a refused
// Publish (no transaction) went on to call nil and panicked into the
// publishing call.
func TestObserverWithoutDoneIsNotCalledBack(t *testing.T) {
	c, err := publish.New(&fakeInserter{}, &fakeHotQueue{})
	if err != nil {
		t.Fatal(err)
	}
	c.Observer = nilDoneObserver{}
	ctx := core.ContextWithTx(context.Background(), newFakeTx())
	if _, err := c.Publish(ctx, mustBuild(t, ev())); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishAll(ctx, mustBuild(t, ev()), mustBuild(t, ev())); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(context.Background(), mustBuild(t, ev())); !errors.Is(err, core.ErrNoTransaction) {
		t.Fatalf("Publish without a transaction = %v, want ErrNoTransaction", err)
	}
}
