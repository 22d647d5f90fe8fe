package dispatcher_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// sized sets a JSON payload of exactly n bytes (n >= 2): a string.
func sized(n int) func(*core.Builder) {
	return func(b *core.Builder) { b.PayloadJSONString(`"` + strings.Repeat("a", n-2) + `"`) }
}

// Every path an event takes out of memory gives its payload bytes back
// exactly once: DONE, RETRY then DONE (in-process timer), DEAD, a delayed
// event, a duplicate offer, a full hot queue, and events discarded by
// Close.
func TestHeldBytesReturnToZeroOnEveryPath(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2, HotCapacity: 4, MaxAttempts: 2, Retry: fixedDelay(time.Millisecond)})
	var flaky atomic.Int64
	h.reg.RegisterFunc("Ok", func(context.Context, core.Envelope) error { return nil })
	h.reg.RegisterFunc("Flaky", func(context.Context, core.Envelope) error {
		if flaky.Add(1) == 1 {
			return errors.New("once")
		}
		return nil
	})
	h.reg.RegisterFunc("Bad", func(context.Context, core.Envelope) error { return errors.New("always") })
	h.start()
	ok, cold := h.insert("Ok", sized(1000)), h.insert("Ok", sized(3000))
	fl, bad := h.insert("Flaky", sized(500)), h.insert("Bad", sized(700))
	delayed := h.insert("Ok", sized(200), func(b *core.Builder) { b.Delay(5 * time.Millisecond) })
	h.mustEnqueueHot(ok)
	h.mustEnqueueHot(ok) // held or finished: not counted twice
	h.mustEnqueueCold(cold, 0)
	h.mustEnqueueHot(fl)
	h.mustEnqueueHot(bad)
	h.mustEnqueueHot(delayed)
	for _, id := range []string{ok.ID(), cold.ID(), fl.ID(), delayed.ID()} {
		h.waitStatus(id, core.StatusDone)
	}
	h.waitStatus(bad.ID(), core.StatusDead)
	h.wait("held bytes to return to 0", func() bool { return h.d.HeldBytes() == 0 })
	if h.d.Held() != 0 {
		t.Fatalf("Held = %d after every outcome, want 0", h.d.Held())
	}

	// A blocked worker pool: the hot queue fills, the rest is dropped,
	// and Close discards what is queued.
	g := newGate(t)
	started := make(chan struct{}, 8)
	h.reg.RegisterFunc("Block", func(ctx context.Context, _ core.Envelope) error {
		started <- struct{}{}
		select {
		case <-g.ch:
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	var offered int
	for i := range 10 {
		e := h.insert("Block", sized(100))
		if h.enqueueHot(e) {
			offered++
		}
		if i < 2 {
			recv(t, started, "a worker to start")
		}
	}
	if offered != 6 { // 2 running + 4 queued
		t.Fatalf("%d offers taken, want 6", offered)
	}
	if got := h.d.HeldBytes(); got != 600 {
		t.Fatalf("HeldBytes = %d, want 600 (6 events of 100 bytes)", got)
	}
	if err := h.d.Close(closeCtx(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if err := h.d.Close(closeCtx(t, waitTimeout)); err != nil {
		t.Fatal(err)
	}
	if got := h.d.HeldBytes(); got != 0 {
		t.Fatalf("HeldBytes after Close = %d, want 0", got)
	}
}

// Beyond MaxHeldBytes an event takes the poller path: EnqueueHot drops it
// (HotDropped, a WARN naming the budget), EnqueueCold refuses it and
// ColdRoom reports no room once the budget is used up.
func TestHotDropBeyondByteBudget(t *testing.T) {
	h, g, started := blockingHarness(t, 1000)
	h.start()
	e1, e2, e3 := h.insert("Block", sized(600)), h.insert("Block", sized(600)), h.insert("Block", sized(400))
	h.mustEnqueueHot(e1)
	recv(t, started, "the listener to start")
	if h.enqueueHot(e2) {
		t.Fatal("EnqueueHot beyond the byte budget = true, want false")
	}
	if n := h.metrics.Dropped.Load(); n != 1 {
		t.Fatalf("HotDropped = %d, want 1", n)
	}
	if got := h.logs.Lines("level=WARN", "MaxHeldBytes", e2.ID()); len(got) != 1 {
		t.Fatalf("want one WARN naming MaxHeldBytes and the event, log:\n%s", h.logs)
	}
	if room := h.d.ColdRoom(); room != 0 {
		t.Fatalf("ColdRoom = %d with 400 bytes left for events of 600, want 0", room)
	}
	h.mustEnqueueHot(e3) // 600 + 400 = 1000: fits exactly
	if room := h.d.ColdRoom(); room != 0 {
		t.Fatalf("ColdRoom = %d with the budget used up, want 0", room)
	}
	if h.enqueueCold(e2, 0) {
		t.Fatal("EnqueueCold beyond the byte budget = true, want false")
	}
	if r := h.row(e2.ID()); r.Status != core.StatusNew {
		t.Fatalf("dropped row %v, want NEW for the poller", r.Status)
	}
	g.open()
	h.waitStatus(e3.ID(), core.StatusDone)
	h.wait("held bytes to return to 0", func() bool { return h.d.HeldBytes() == 0 })
	h.mustEnqueueCold(e2, 0) // the poller's retake
	h.waitStatus(e2.ID(), core.StatusDone)
}

// ColdRoom, the most rows the poller claims, counts the events that fit
// in MaxHeldBytes: before any size is known, events of the largest size
// an event may have (at least one: the first claim used to take a whole
// batch, whose rows beyond the budget stayed leased to this node); then
// events of the size measured, none once not even one fits though some
// budget is left; and one while nothing is held, however large.
func TestColdRoomCountsWhatFitsTheByteBudget(t *testing.T) {
	const largest = core.MaxPayloadBytes + core.MaxHeadersBytes
	if got := newHarness(t, dispatcher.Config{MaxHeldBytes: 3*largest + 10}).d.ColdRoom(); got != 3 {
		t.Fatalf("ColdRoom = %d before any size is known with room for 3 of the largest events, want 3", got)
	}
	h := newHarness(t, dispatcher.Config{MaxHeldBytes: 1000}) // not started: events stay queued
	if got := h.d.ColdRoom(); got != 1 {
		t.Fatalf("ColdRoom = %d before any size is known, want 1", got)
	}
	h.mustEnqueueCold(h.insert("E", sized(400)), 0)
	if got := h.d.ColdRoom(); got != 1 {
		t.Fatalf("ColdRoom = %d with 600 bytes left for events of 400, want 1", got)
	}
	h.mustEnqueueCold(h.insert("E", sized(400)), 0)
	if got := h.d.ColdRoom(); got != 0 {
		t.Fatalf("ColdRoom = %d with 200 bytes left for events of 400, want 0", got)
	}

	big := newHarness(t, dispatcher.Config{MaxHeldBytes: 1000})
	big.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	big.start()
	e := big.insert("E", sized(5000))
	big.mustEnqueueHot(e)
	big.waitStatus(e.ID(), core.StatusDone)
	big.wait("held bytes to return to 0", func() bool { return big.d.HeldBytes() == 0 })
	if got := big.d.ColdRoom(); got != 1 {
		t.Fatalf("ColdRoom = %d with nothing held and events larger than the budget, want 1", got)
	}
}

// Headers count against the budget as payloads do: an event with a small
// payload and 600 bytes of headers does not fit beside one of 600 bytes.
func TestHeadersCountAgainstTheByteBudget(t *testing.T) {
	h, g, started := blockingHarness(t, 1000)
	h.start()
	e1 := h.insert("Block", sized(600))
	e2 := h.insert("Block", sized(10), func(b *core.Builder) { b.Header("note", strings.Repeat("h", 596)) })
	h.mustEnqueueHot(e1)
	recv(t, started, "the listener to start")
	if h.enqueueHot(e2) {
		t.Fatal("EnqueueHot of an event whose headers exceed the budget left = true, want false")
	}
	retakeAfter(h, g, e1, e2)
}

// An event larger than the whole budget is taken when nothing else is
// held, so it is delivered; while something is held it waits.
func TestEventLargerThanBudgetIsDelivered(t *testing.T) {
	h, g, started := blockingHarness(t, 100)
	h.reg.RegisterFunc("Big", func(context.Context, core.Envelope) error { return nil })
	h.start()
	small, big := h.insert("Block", sized(10)), h.insert("Big", sized(1000))
	h.mustEnqueueHot(small)
	recv(t, started, "the listener to start")
	if h.enqueueHot(big) {
		t.Fatal("an event larger than the budget was taken while another is held")
	}
	retakeAfter(h, g, small, big)
}

// blockingHarness is a harness of one worker and a MaxHeldBytes budget
// whose "Block" listener signals started and waits for g to open.
func blockingHarness(t *testing.T, maxHeld int64) (*harness, *gate, chan struct{}) {
	t.Helper()
	h := newHarness(t, dispatcher.Config{Workers: 1, MaxHeldBytes: maxHeld})
	g := newGate(t)
	started := make(chan struct{}, 4)
	h.reg.RegisterFunc("Block", func(context.Context, core.Envelope) error {
		started <- struct{}{}
		<-g.ch
		return nil
	})
	return h, g, started
}

// retakeAfter lets held (blocked behind g) finish, then has dropped, left
// to the poller for the budget, taken again as a claim would and
// delivered; the held bytes return to 0 after each.
func retakeAfter(h *harness, g *gate, held, dropped core.Envelope) {
	h.t.Helper()
	g.open()
	h.waitStatus(held.ID(), core.StatusDone)
	h.wait("held bytes to return to 0", func() bool { return h.d.HeldBytes() == 0 })
	h.mustEnqueueCold(dropped, 0)
	h.waitStatus(dropped.ID(), core.StatusDone)
	h.wait("held bytes to return to 0", func() bool { return h.d.HeldBytes() == 0 })
}

func TestMaxHeldBytesDefault(t *testing.T) {
	if dispatcher.DefaultMaxHeldBytes != 64<<20 {
		t.Fatalf("DefaultMaxHeldBytes = %d", dispatcher.DefaultMaxHeldBytes)
	}
}

// Events waiting on a timer (delayed far ahead, or retried with a long
// backoff) hold at most half of MaxHeldBytes: the rest is left to the
// poller, as beyond RetryCapacity, and an ordinary event is still
// delivered at once and the poller still claims. They took the whole
// budget, and the node delivered nothing until their timers fired (a
// day here).
func TestTimersHoldAtMostHalfTheByteBudget(t *testing.T) {
	h := newHarness(t, dispatcher.Config{MaxHeldBytes: 10_000})
	h.reg.RegisterFunc("Now", func(context.Context, core.Envelope) error { return nil })
	h.start()
	var scheduled int
	for range 20 {
		if h.enqueueHot(h.insert("Later", sized(1000), func(b *core.Builder) { b.Delay(24 * time.Hour) })) {
			scheduled++
		}
	}
	if scheduled != 5 {
		t.Fatalf("%d delayed events of 1000 bytes held on timers, want 5 (half of the 10,000-byte budget)", scheduled)
	}
	if got := h.d.ColdRoom(); got < 1 {
		t.Fatalf("ColdRoom = %d with the timers holding half the budget, want at least 1", got)
	}
	now := h.insert("Now", sized(1000))
	h.mustEnqueueHot(now)
	h.waitStatus(now.ID(), core.StatusDone)

	// One event larger than the whole budget may wait on a timer when
	// none does; then any one event is still taken beside it.
	big := newHarness(t, dispatcher.Config{MaxHeldBytes: 1000})
	big.reg.RegisterFunc("Now", func(context.Context, core.Envelope) error { return nil })
	big.start()
	big.mustEnqueueHot(big.insert("Later", sized(5000), func(b *core.Builder) { b.Delay(24 * time.Hour) }))
	if got := big.d.ColdRoom(); got != 1 {
		t.Fatalf("ColdRoom = %d with only a timer's event held, want 1", got)
	}
	e := big.insert("Now", sized(2000))
	big.mustEnqueueHot(e)
	big.waitStatus(e.ID(), core.StatusDone)
}
