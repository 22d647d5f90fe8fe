package publish_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// fakeTx is an in-memory core.Tx (see testsupport.Tx).
type fakeTx = testsupport.Tx

func newFakeTx() *fakeTx { return testsupport.NewTx() }

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
	skips  int // SkipHot calls
}

func (q *fakeHotQueue) SkipHot() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.skips++
}

// fakeLease is the lease fakeHotQueue grants.
var fakeLease = core.Lease{Owner: "node-1", Until: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}

func (q *fakeHotQueue) HotLease(core.Envelope) core.Lease { return fakeLease }

var _ handoff.Hot = (*fakeHotQueue)(nil)

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

func mustBuild(t testing.TB, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return env
}

func ev() *core.Builder { return core.NewEvent("UserCreated").PayloadJSONString(`{}`) }
