package core_test

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/outbox-go/outbox/core"
)

// fakeResult is the sql.Result of fakeTx.ExecContext.
type fakeResult struct{}

func (fakeResult) LastInsertId() (int64, error) { return 0, nil }
func (fakeResult) RowsAffected() (int64, error) { return 1, nil }

type execCall struct {
	query string
	args  []any
}

// fakeTx is an in-memory core.Tx. Commit runs the after-commit hooks,
// Rollback the after-rollback hooks; both deactivate it.
type fakeTx struct {
	mu            sync.Mutex
	active        bool
	execs         []execCall
	afterCommit   []func()
	afterRollback []func()
}

var _ core.Tx = (*fakeTx)(nil)

func newFakeTx() *fakeTx { return &fakeTx{active: true} }

func (tx *fakeTx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.execs = append(tx.execs, execCall{query: query, args: args})
	return fakeResult{}, nil
}

func (tx *fakeTx) Active() bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.active
}

func (tx *fakeTx) AfterCommit(fn func()) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.afterCommit = append(tx.afterCommit, fn)
}

func (tx *fakeTx) AfterRollback(fn func()) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.afterRollback = append(tx.afterRollback, fn)
}

func (tx *fakeTx) commitHooks() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return len(tx.afterCommit)
}

func (tx *fakeTx) execCount() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return len(tx.execs)
}

// Commit deactivates the transaction and runs its after-commit hooks.
func (tx *fakeTx) Commit() {
	tx.mu.Lock()
	tx.active = false
	hooks := tx.afterCommit
	tx.afterCommit, tx.afterRollback = nil, nil
	tx.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// Rollback deactivates the transaction and runs its after-rollback hooks.
func (tx *fakeTx) Rollback() {
	tx.mu.Lock()
	tx.active = false
	hooks := tx.afterRollback
	tx.afterCommit, tx.afterRollback = nil, nil
	tx.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// fakeInserter records inserts and writes one statement on the execer.
type fakeInserter struct {
	mu     sync.Mutex
	err    error // returned by Insert when set
	envs   []core.Envelope
	exs    []core.Execer
	leases []core.Lease
}

var _ core.Inserter = (*fakeInserter)(nil)

func (f *fakeInserter) Insert(ctx context.Context, ex core.Execer, env core.Envelope, lease core.Lease) error {
	f.mu.Lock()
	f.envs = append(f.envs, env)
	f.leases = append(f.leases, lease)
	f.exs = append(f.exs, ex)
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = ex.ExecContext(ctx, "INSERT INTO outbox_event (event_id) VALUES (?)", env.ID())
	return err
}

func (f *fakeInserter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.envs)
}

// fakeHotQueue records the envelopes handed to it.
type fakeHotQueue struct {
	mu     sync.Mutex
	reject bool // EnqueueHot returns false (queue full)
	envs   []core.Envelope
	leases []core.Lease
}

// fakeLease is the lease fakeHotQueue grants.
var fakeLease = core.Lease{Owner: "node-1", Until: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}

func (q *fakeHotQueue) HotLease(core.Envelope) core.Lease { return fakeLease }

var _ core.HotQueue = (*fakeHotQueue)(nil)

func (q *fakeHotQueue) EnqueueHot(env core.Envelope, lease core.Lease) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.envs = append(q.envs, env)
	q.leases = append(q.leases, lease)
	return !q.reject
}

func (q *fakeHotQueue) received() []core.Envelope {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]core.Envelope(nil), q.envs...)
}
