package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
)

// The default: an event without a listener is DONE, counted, and warned
// about once per type.
func TestUnhandledDoneIsCounted(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2})
	h.start()
	var ids []string
	for range 3 {
		e := h.insert("Ghost")
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	for _, id := range ids {
		h.waitStatus(id, core.StatusDone)
	}
	if got := h.metrics.UnhandledCount("Ghost"); got != 3 {
		t.Errorf("Unhandled(Ghost) signals = %d, want 3", got)
	}
	if got := len(h.logs.Lines("level=WARN", "no listener", "event_type=Ghost", "marked DONE")); got != 1 {
		t.Errorf("%d WARN lines, want 1", got)
	}
}

// UnhandledLeave puts the event off without charging an attempt: it stays
// NEW, its lease is released and it is not due before UnhandledDelay, so
// no poller takes it again at once; once due, a listener registered in the
// meantime gets it.
func TestUnhandledLeavePostponesWithoutAttempt(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	const delay = 3 * time.Minute
	h := newHarness(t, dispatcher.Config{Workers: 1, Now: clk.Now, Unhandled: dispatcher.UnhandledLeave, UnhandledDelay: delay})
	h.start()
	e := h.insert("Later")
	h.mustEnqueueHot(e)
	h.wait("the event to be put off", func() bool { r, _ := h.st.Get(e.ID()); return r.LastError != "" })
	h.waitReleased(e.ID())
	r := h.row(e.ID())
	if r.Status != core.StatusNew || r.Attempts != 0 || r.LockedBy != "" ||
		r.AvailableAt.Before(clk.Now().Add(delay)) || r.AvailableAt.After(clk.Now().Add(delay*5/4)) {
		t.Fatalf("put-off row: %v attempts %d locked_by %q available_at %v; want NEW 0 unowned, due UnhandledDelay (%v) to a quarter more later",
			r.Status, r.Attempts, r.LockedBy, r.AvailableAt, delay)
	}
	if !strings.Contains(r.LastError, `no listener registered for event type "Later"`) {
		t.Errorf("last_error %q", r.LastError)
	}
	claim := func() []core.Record {
		t.Helper()
		recs, err := h.st.ClaimDue(context.Background(), core.ClaimRequest{
			Owner: h.d.Owner(), Now: clk.Now(), LeaseUntil: h.d.ClaimLease(clk.Now()).Until, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	if recs := claim(); len(recs) != 0 {
		t.Fatalf("a poll right after claimed %d events, want 0 (not due)", len(recs))
	}
	got := make(chan string, 1)
	h.reg.RegisterFunc("Later", func(_ context.Context, env core.Envelope) error { got <- env.ID(); return nil })
	clk.Advance(delay * 5 / 4)
	recs := claim()
	if len(recs) != 1 {
		t.Fatalf("a poll once due claimed %d events, want 1", len(recs))
	}
	env, err := recs[0].Envelope()
	if err != nil {
		t.Fatal(err)
	}
	h.mustEnqueueCold(env, recs[0].Attempts)
	if id := recv(t, got, "the late listener"); id != e.ID() {
		t.Fatalf("listener got %s", id)
	}
	h.waitStatus(e.ID(), core.StatusDone)
	if n := h.metrics.Failure.Load() + h.metrics.Dead.Load(); n != 0 {
		t.Errorf("failure+dead signals = %d, want 0", n)
	}
	if got := h.metrics.UnhandledCount("Later"); got != 1 {
		t.Errorf("Unhandled(Later) = %d, want 1", got)
	}
	if got := len(h.logs.Lines("level=WARN", "no listener", "event_type=Later", "left pending")); got != 1 {
		t.Errorf("%d WARN lines, want 1:\n%s", got, h.logs)
	}
}

// statusOnly hides every method of a store but core.StatusWriter's: a
// store that cannot postpone.
type statusOnly struct{ core.StatusWriter }

// With a store that cannot postpone, UnhandledLeave only releases the
// event: the row is untouched, for the poller.
func TestUnhandledLeaveWithoutPostponer(t *testing.T) {
	st := memstore.New(nil)
	d, err := dispatcher.New(statusOnly{st}, registry.New(), dispatcher.Config{Workers: 1, Unhandled: dispatcher.UnhandledLeave})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	env := publishHot(t, d, st, core.NewEvent("Later").ID("l-1").PayloadJSONString(`{}`))
	testsupport.WaitFor(t, waitTimeout, "the event to be released", func() bool { return !d.InFlight(env.ID()) }, nil)
	r, _ := st.Get(env.ID())
	if r.Status != core.StatusNew || r.Attempts != 0 || r.LockedBy != d.Owner() || r.LastError != "" {
		t.Errorf("row: %v attempts %d locked_by %q last_error %q; want it untouched", r.Status, r.Attempts, r.LockedBy, r.LastError)
	}
}

// UnhandledDead marks the event DEAD with the reason.
func TestUnhandledDead(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1, Unhandled: dispatcher.UnhandledDead})
	h.start()
	e := h.insert("Ghost")
	h.mustEnqueueHot(e)
	h.waitStatus(e.ID(), core.StatusDead)
	h.waitReleased(e.ID())
	if r := h.row(e.ID()); r.LastError != `no listener registered for event type "Ghost"` {
		t.Errorf("last_error %q", r.LastError)
	}
	if h.metrics.Dead.Load() != 1 || h.metrics.UnhandledCount("Ghost") != 1 || h.metrics.Success.Load() != 0 {
		t.Errorf("metrics: %v unhandled %d", h.metrics, h.metrics.UnhandledCount("Ghost"))
	}
	if got := len(h.logs.Lines("level=WARN", "no listener", "event_type=Ghost", "marked DEAD")); got != 1 {
		t.Errorf("%d WARN lines, want 1", got)
	}
}

// The WARN is once per type for the first 1000 types; further types share
// a rate-limited WARN, so neither the log nor the memory grows with them.
func TestNoListenerWarningsAreBounded(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2, ColdCapacity: 2000})
	h.start()
	const types = 1010
	var ids []string
	for i := range types {
		e := h.insert(fmt.Sprintf("T%04d", i))
		h.mustEnqueueCold(e, 0)
		ids = append(ids, e.ID())
	}
	for _, id := range ids {
		h.waitStatus(id, core.StatusDone)
	}
	named := len(h.logs.Lines("level=WARN", "no listener")) - len(h.logs.Lines("level=WARN", "no listener", "rate-limited"))
	if named < 1000 || named > 1002 { // workers may race past the bound by one each
		t.Errorf("%d one-per-type WARN lines, want 1000 (+ at most one per worker)", named)
	}
	if n := len(h.logs.Lines("level=WARN", "no listener", "rate-limited")); n < 1 {
		t.Errorf("no rate-limited WARN for the types beyond the bound")
	}
}

func TestUnhandledConfig(t *testing.T) {
	st, reg := memstore.New(nil), registry.New()
	for field, cfg := range map[string]dispatcher.Config{
		"Unhandled":      {Unhandled: dispatcher.UnhandledDead + 1},
		"UnhandledDelay": {UnhandledDelay: -time.Second},
	} {
		_, err := dispatcher.New(st, reg, cfg)
		var ce *core.ConfigError
		if !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("invalid %s: err %v, want a *core.ConfigError for %s", field, err, field)
		}
	}
	for p, want := range map[dispatcher.UnhandledPolicy]string{
		dispatcher.UnhandledDone: "done", dispatcher.UnhandledLeave: "leave", dispatcher.UnhandledDead: "dead", 9: "UnhandledPolicy(9)",
	} {
		if got := p.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", p, got, want)
		}
	}
}

// Each event left for a listener is due again UnhandledDelay to a quarter
// more later, at random: with a fixed delay, the node that left it, polling
// at a fixed Interval, came before the node with the listener every round
// once it did so once, and took the event again, for as long as both ran.
func TestUnhandledLeaveJittersTheDelay(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	const delay = time.Minute
	h := newHarness(t, dispatcher.Config{Workers: 1, Now: clk.Now, Unhandled: dispatcher.UnhandledLeave, UnhandledDelay: delay})
	h.start()
	due := map[time.Time]bool{}
	for range 8 {
		e := h.insert("Later")
		h.mustEnqueueHot(e)
		h.wait("the event to be put off", func() bool { r, _ := h.st.Get(e.ID()); return r.LastError != "" })
		r := h.row(e.ID())
		if r.AvailableAt.Before(clk.Now().Add(delay)) || r.AvailableAt.After(clk.Now().Add(delay*5/4)) {
			t.Fatalf("due %v after it was left, want %v to a quarter more", r.AvailableAt.Sub(clk.Now()), delay)
		}
		due[r.AvailableAt] = true
	}
	if len(due) < 2 {
		t.Errorf("8 events left at the same moment are all due at %v: no jitter", due)
	}
}

// An UnhandledDelay near the largest duration ("never", in effect) puts
// the event off that far, not into the past: the quarter added at random
// saturates instead of wrapping around (with math.MaxInt64 the event came
// due 264 years ago, and was taken again at every poll).
func TestUnhandledLeaveWithTheLargestDelay(t *testing.T) {
	clk := testsupport.NewClock(testsupport.Epoch)
	h := newHarness(t, dispatcher.Config{Workers: 1, Now: clk.Now, Unhandled: dispatcher.UnhandledLeave, UnhandledDelay: math.MaxInt64})
	h.start()
	for range 4 { // the wrap depended on the random quarter
		e := h.insert("Later")
		h.mustEnqueueHot(e)
		h.wait("the event to be put off", func() bool { r, _ := h.st.Get(e.ID()); return r.LastError != "" })
		if r := h.row(e.ID()); !r.AvailableAt.After(clk.Now().Add(200 * 365 * 24 * time.Hour)) {
			t.Fatalf("due %v after it was left, want about 292 years", r.AvailableAt.Sub(clk.Now()))
		}
	}
}
