package poller_test

import (
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// Wake makes a resting poller poll at once (also when called before
// Start); the woken claim ignores SkipRecent, so a row just committed is
// taken; other polls keep it.
func TestWakePollsAtOnceWithoutSkipRecent(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := &spyStore{Store: memstore.New(clock.Now)}
	q := newFakeQueue(10)
	p, err := poller.NewWithQueue(st, q, poller.Config{Interval: time.Hour, SkipRecent: time.Minute, Now: clock.Now,
		Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	p.Wake() // before Start: the first poll happens at once
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, 5*time.Second)) })
	claims := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.claims)
	}
	testsupport.WaitFor(t, 10*time.Second, "the poll of the early wake-up", func() bool { return claims() == 1 })

	insert(t, st.Store, "fresh") // created now: SkipRecent would hide it
	p.Wake()
	testsupport.WaitFor(t, 10*time.Second, "the woken poll's enqueue", func() bool { return len(q.ids()) == 1 })
	if req := st.lastClaim(t); req.SkipRecent != 0 {
		t.Errorf("woken claim: SkipRecent = %v, want 0", req.SkipRecent)
	}
	if got := q.ids(); got[0] != "fresh" {
		t.Errorf("enqueued %v, want [fresh]", got)
	}
	before := claims()
	// A later poll of the same poller that is not woken keeps SkipRecent;
	// PollOnce is such a poll.
	if _, err := p.PollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if req := st.lastClaim(t); req.SkipRecent != time.Minute {
		t.Errorf("PollOnce claim: SkipRecent = %v, want 1m", req.SkipRecent)
	}
	if claims() != before+1 {
		t.Errorf("claims = %d, want %d", claims(), before+1)
	}
}
