package poller_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// claimObserver counts the rows the poller reports claimed.
type claimObserver struct {
	core.NopObserver
	rows atomic.Int64
}

func (o *claimObserver) Claimed(_ string, rows int, _ time.Duration, _ error) {
	o.rows.Add(int64(rows))
}

// The oldest-pending gauge counts the rows the dispatcher still holds:
// once every row leased here is held, the claims leave them out and find
// nothing, and the gauge read 0 while that backlog waited for the
// workers (lag alerts never fired). It follows the oldest one still held.
func TestLagCountsTheRowsTheDispatcherHolds(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := memstore.New(clock.Now)
	for _, id := range idsOf("r", 3) {
		insert(t, st, id)
	}
	clock.Advance(time.Hour)
	q := newRoomQueue(10)
	metrics := &testsupport.Metrics{}
	obs := &claimObserver{}
	p, err := poller.NewWithQueue(st, q, poller.Config{Now: clock.Now, Metrics: metrics, Observer: obs, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	lag := func() time.Duration { return time.Duration(metrics.LastLag.Load()) }
	if res := pollOnce(t, p); res.Enqueued != 3 {
		t.Fatalf("PollOnce = %+v, want 3 enqueued", res)
	}
	if got := lag(); got != time.Hour {
		t.Fatalf("OldestLag = %v, want 1h", got)
	}
	clock.Advance(time.Minute)
	pollOnce(t, p) // leaves this node's held rows out: finds nothing
	if got := lag(); got != time.Hour+time.Minute {
		t.Errorf("OldestLag with the backlog held by the dispatcher = %v, want 1h1m", got)
	}
	// r000 delivered: the oldest held is r001, published with it.
	setRow(t, st, "r000", func(r *core.Record) { r.Status, r.DoneAt, r.LockedBy = core.StatusDone, clock.Now(), "" })
	q.letGo("r000")
	clock.Advance(time.Minute)
	pollOnce(t, p)
	if got := lag(); got != time.Hour+2*time.Minute {
		t.Errorf("OldestLag after the oldest was delivered = %v, want 1h2m (r001)", got)
	}
	for _, id := range []string{"r001", "r002"} {
		setRow(t, st, id, func(r *core.Record) { r.Status, r.DoneAt, r.LockedBy = core.StatusDone, clock.Now(), "" })
		q.letGo(id)
	}
	pollOnce(t, p)
	if got := lag(); got != 0 {
		t.Errorf("OldestLag with nothing pending = %v, want 0", got)
	}
	if n := obs.rows.Load(); n != 3 {
		t.Errorf("the Observer saw %d rows claimed, want the 3 taken", n)
	}
}

// A claim that reads again the rows this node's dispatcher holds (it
// cannot tell they are all held) reports only the rows it took: the
// claimed-rows counter counted them again at every poll.
func TestClaimedRowsLeaveOutTheHeldOnes(t *testing.T) {
	e := newPollEnv(10)
	for _, id := range idsOf("r", 3) {
		insert(t, e.st, id)
	}
	e.clock.Advance(time.Hour)
	obs := &claimObserver{}
	p := e.poller(t, poller.Config{Observer: obs})
	pollOnce(t, p)
	insert(t, e.st, "later")
	e.clock.Advance(time.Hour)
	if res := pollOnce(t, p); res.Enqueued != 1 || res.Skipped != 3 {
		t.Fatalf("PollOnce = %+v, want 1 enqueued and the 3 held skipped", res)
	}
	if n := obs.rows.Load(); n != 4 {
		t.Errorf("the Observer saw %d rows claimed, want 4 (3, then 1)", n)
	}
}
