package poller_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
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
