package poller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 5 * time.Second

type enqueued struct {
	id         string
	attempts   int
	env        core.Envelope
	leaseUntil time.Time
	seq        int64 // the row's position in its ordering key
	// redelivered: the row told the event was delivered before.
	redelivered bool
	// committed: the time given as the event's commit
	// (core.Delivery.Committed).
	committed time.Time
}

// The fake queue's node: its owner token and lease duration.
const (
	queueOwner = "node-a"
	queueLease = time.Minute
)

// fakeQueue is a bounded cold intake (handoff.Cold) of the node queueOwner. Accepted
// events count as in flight until released, like the dispatcher's tracker.
type fakeQueue struct {
	mu       sync.Mutex
	room     int
	inFlight map[string]bool
	got      []enqueued
	calls    int
	phantom  int // extra room ColdRoom reports while room > 0
	signal   chan struct{}
}

func newFakeQueue(room int) *fakeQueue {
	return &fakeQueue{room: room, inFlight: map[string]bool{}, signal: make(chan struct{}, 1)}
}

func (q *fakeQueue) ClaimLease(now time.Time) core.Lease {
	return core.Lease{Owner: queueOwner, Until: now.Add(queueLease)}
}

func (q *fakeQueue) ClaimMark() uint64 { return 0 }

func (q *fakeQueue) EnqueueCold(env core.Envelope, attempts int, leaseUntil, committed time.Time, _ uint64, seq int64, redelivered bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	if q.inFlight[env.ID()] || q.room <= 0 {
		return false
	}
	q.room--
	q.inFlight[env.ID()] = true
	q.got = append(q.got, enqueued{id: env.ID(), attempts: attempts, env: env, leaseUntil: leaseUntil, seq: seq, redelivered: redelivered, committed: committed})
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

func (q *fakeQueue) ColdRoom() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.room > 0 {
		return q.room + q.phantom
	}
	return q.room
}

// setPhantomRoom makes ColdRoom report n more slots than the queue accepts
// while it is not full, as when other producers fill it concurrently.
func (q *fakeQueue) setPhantomRoom(n int) {
	q.mu.Lock()
	q.phantom = n
	q.mu.Unlock()
}

func (q *fakeQueue) Held() int { return 0 }

func (q *fakeQueue) InFlight(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inFlight[id]
}

func (q *fakeQueue) QueueDepths() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return 0, len(q.got)
}

func (q *fakeQueue) setInFlight(id string) {
	q.mu.Lock()
	q.inFlight[id] = true
	q.mu.Unlock()
}

// letGo drops id from the events held, as the dispatcher does once it
// wrote the event's outcome.
func (q *fakeQueue) letGo(id string) {
	q.mu.Lock()
	delete(q.inFlight, id)
	q.mu.Unlock()
}

func (q *fakeQueue) setRoom(n int) {
	q.mu.Lock()
	q.room = n
	q.mu.Unlock()
}

func (q *fakeQueue) ids() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, len(q.got))
	for i, e := range q.got {
		out[i] = e.id
	}
	return out
}

func (q *fakeQueue) entries() []enqueued {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]enqueued(nil), q.got...)
}

func (q *fakeQueue) callCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls
}

// insert stores an unowned NEW event row with the store's clock (as
// published without a hot queue).
func insert(t testing.TB, st *memstore.Store, id string) core.Envelope {
	t.Helper()
	return insertLeased(t, st, id, core.Lease{})
}

// insertLeased stores a NEW event row owned by lease.
func insertLeased(t testing.TB, st *memstore.Store, id string, lease core.Lease) core.Envelope {
	t.Helper()
	env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{"id":"` + id + `"}`).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := st.Insert(context.Background(), nil, env, lease); err != nil {
		t.Fatalf("Insert: %v", err)
	}
	return env
}

// setRow changes a stored row in place (test setup of statuses, attempts
// and leases without going through the fenced writes).
func setRow(t testing.TB, st *memstore.Store, id string, change func(r *core.Record)) {
	t.Helper()
	r := row(t, st, id)
	change(&r)
	st.Put(r)
}

// record is a decodable stored row.
func record(id string, status core.Status, availableAt, createdAt time.Time) core.Record {
	return core.Record{
		ID: id, Type: "E", OccurredAt: createdAt, Payload: []byte(`{}`), PayloadKind: core.PayloadJSON,
		Status: status, AvailableAt: availableAt, CreatedAt: createdAt,
	}
}

func row(t testing.TB, st *memstore.Store, id string) core.Record {
	t.Helper()
	r, ok := st.Get(id)
	if !ok {
		t.Fatalf("row %s not found", id)
	}
	return r
}

func stopCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func idsOf(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// waitFor re-checks cond on every signal of wake (may be nil) and on a
// short ticker until it holds, and fails the test at waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool, wake <-chan struct{}) {
	t.Helper()
	testsupport.WaitFor(t, waitTimeout, what, cond, wake)
}
