package poller_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
)

type pollEnv struct {
	clock   *testsupport.Clock
	st      *memstore.Store
	q       *fakeQueue
	logs    *testsupport.LogBuffer
	metrics *testsupport.Metrics
}

func newPollEnv(room int) *pollEnv {
	clock := testsupport.NewClock(testsupport.Epoch)
	return &pollEnv{clock: clock, st: memstore.New(clock.Now), q: newFakeQueue(room), logs: &testsupport.LogBuffer{}, metrics: &testsupport.Metrics{}}
}

func (e *pollEnv) poller(t *testing.T, cfg poller.Config) *poller.Poller {
	t.Helper()
	cfg.Now, cfg.Logger, cfg.Metrics = e.clock.Now, e.logs.Logger(), e.metrics
	p, err := poller.NewWithQueue(e.st, e.q, cfg)
	if err != nil {
		t.Fatalf("poller.New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
			t.Errorf("cleanup: Stop = %v", err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", e.logs)
		}
	})
	return p
}

func pollOnce(t *testing.T, p *poller.Poller) poller.Result {
	t.Helper()
	res, err := p.PollOnce(context.Background())
	if err != nil {
		t.Fatalf("PollOnce: %v", err)
	}
	return res
}

func TestPollOnceSelectsDueRows(t *testing.T) {
	e := newPollEnv(100)
	t0 := e.clock.Now()

	insert(t, e.st, "a-new")
	insert(t, e.st, "b-retry")
	setRow(t, e.st, "b-retry", func(r *core.Record) { // RETRY, attempts 2, due now
		r.Status, r.Attempts, r.AvailableAt, r.LastError = core.StatusRetry, 2, t0, "failed"
	})
	insert(t, e.st, "c-done")
	setRow(t, e.st, "c-done", func(r *core.Record) { r.Status, r.DoneAt = core.StatusDone, t0 })
	insert(t, e.st, "d-dead")
	setRow(t, e.st, "d-dead", func(r *core.Record) { r.Status, r.Attempts, r.LastError = core.StatusDead, 1, "gone" })
	insert(t, e.st, "e-later")
	setRow(t, e.st, "e-later", func(r *core.Record) {
		r.Status, r.Attempts, r.AvailableAt, r.LastError = core.StatusRetry, 1, t0.Add(time.Hour), "backoff"
	})
	e.clock.Advance(2 * time.Second)
	insert(t, e.st, "f-young") // created now: left to the hot path

	p := e.poller(t, poller.Config{SkipRecent: time.Second})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 2, Enqueued: 2}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v", res, want)
	}
	got := e.q.entries()
	if len(got) != 2 || got[0].id != "a-new" || got[0].attempts != 0 || got[1].id != "b-retry" || got[1].attempts != 2 {
		t.Fatalf("enqueued %+v, want a-new (attempts 0) then b-retry (attempts 2)", got)
	}
	if got[0].env.Type() != "E" || got[0].env.PayloadString() != `{"id":"a-new"}` {
		t.Errorf("enqueued envelope not decoded from the row: type %q payload %q", got[0].env.Type(), got[0].env.PayloadString())
	}
	if lag := time.Duration(e.metrics.LastLag.Load()); lag != 2*time.Second {
		t.Errorf("OldestLag = %v, want 2s (oldest available_at is 2s old)", lag)
	}
	if e.metrics.DepthCalls.Load() != 1 {
		t.Errorf("QueueDepths reported %d times, want 1", e.metrics.DepthCalls.Load())
	}

	// f-young becomes old enough exactly SkipRecent after it was created;
	// the rows queued before are in flight and skipped.
	e.clock.Advance(time.Second)
	res = pollOnce(t, p)
	if want := (poller.Result{Read: 3, Enqueued: 1, Skipped: 2}); res != want {
		t.Fatalf("second PollOnce = %+v, want %+v", res, want)
	}
	if ids := e.q.ids(); !slices.Equal(ids, []string{"a-new", "b-retry", "f-young"}) {
		t.Fatalf("enqueued %v", ids)
	}

	// The future RETRY row becomes due at its available_at.
	e.clock.Advance(time.Hour - 3*time.Second - time.Nanosecond)
	res = pollOnce(t, p)
	if res.Enqueued != 0 {
		t.Fatalf("a RETRY row was enqueued before its available_at: %+v", res)
	}
	e.clock.Advance(time.Nanosecond)
	res = pollOnce(t, p)
	if res.Enqueued != 1 || e.q.ids()[3] != "e-later" {
		t.Fatalf("PollOnce at available_at = %+v, enqueued %v; want e-later", res, e.q.ids())
	}
	if got := e.q.entries()[3].attempts; got != 1 {
		t.Errorf("e-later attempts %d, want 1", got)
	}
}

func TestPollOnceNegativeSkipRecentTakesFreshRows(t *testing.T) {
	e := newPollEnv(10)
	insert(t, e.st, "fresh")
	p := e.poller(t, poller.Config{SkipRecent: -1})
	if res := pollOnce(t, p); res.Enqueued != 1 {
		t.Fatalf("PollOnce with SkipRecent < 0 = %+v, want the fresh row enqueued", res)
	}
	// Default SkipRecent (1 s) leaves it alone.
	e2 := newPollEnv(10)
	insert(t, e2.st, "fresh")
	p2 := e2.poller(t, poller.Config{})
	if res := pollOnce(t, p2); res.Read != 0 {
		t.Fatalf("PollOnce with the default SkipRecent = %+v, want nothing read", res)
	}
	e2.clock.Advance(poller.DefaultSkipRecent)
	if res := pollOnce(t, p2); res.Enqueued != 1 {
		t.Fatalf("PollOnce after DefaultSkipRecent = %+v, want 1 enqueued", res)
	}
}

func TestPollOnceSkipsInFlight(t *testing.T) {
	e := newPollEnv(10)
	for _, id := range []string{"a", "b", "c"} {
		insert(t, e.st, id)
	}
	e.clock.Advance(time.Hour)
	e.q.setInFlight("b")
	p := e.poller(t, poller.Config{})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 3, Enqueued: 2, Skipped: 1}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v", res, want)
	}
	if ids := e.q.ids(); !slices.Equal(ids, []string{"a", "c"}) {
		t.Fatalf("enqueued %v, want [a c]", ids)
	}
	if n := e.q.callCount(); n != 2 {
		t.Errorf("EnqueueCold called %d times, want 2 (in-flight rows are not offered)", n)
	}
}

func TestPollOnceStopsWhenQueueFull(t *testing.T) {
	// The claim is limited to the room the queue reports, but other
	// producers (in-process retries) may take that room while the cycle
	// runs: the queue reports 5 free slots and accepts only 2.
	e := newPollEnv(2)
	e.q.setPhantomRoom(3)
	ids := idsOf("r", 5)
	for _, id := range ids {
		insert(t, e.st, id)
	}
	e.clock.Advance(time.Hour)
	p := e.poller(t, poller.Config{})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 5, Enqueued: 2, Skipped: 3}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v", res, want)
	}
	if got := e.q.ids(); !slices.Equal(got, ids[:2]) {
		t.Fatalf("enqueued %v, want %v", got, ids[:2])
	}
	if n := e.q.callCount(); n != 3 {
		t.Errorf("EnqueueCold called %d times, want 3 (stop at the first refusal of a full queue)", n)
	}
	for _, id := range ids {
		if r := row(t, e.st, id); r.Status != core.StatusNew {
			t.Errorf("row %s: %v, want NEW", id, r.Status)
		}
	}
}

// The claim never takes more rows than the cold queue has room for, so no
// row is leased to this node without being queued.
func TestPollOnceClaimsNoMoreThanColdRoom(t *testing.T) {
	e := newPollEnv(2)
	ids := idsOf("r", 5)
	for _, id := range ids {
		insert(t, e.st, id)
	}
	e.clock.Advance(time.Hour)
	p := e.poller(t, poller.Config{})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 2, Enqueued: 2}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v (Limit = min(BatchSize, ColdRoom) = 2)", res, want)
	}
	if got := e.q.ids(); !slices.Equal(got, ids[:2]) {
		t.Fatalf("enqueued %v, want %v", got, ids[:2])
	}
	for i, id := range ids {
		r := row(t, e.st, id)
		if r.Status != core.StatusNew {
			t.Errorf("row %s: %v, want NEW", id, r.Status)
		}
		if owned := r.LockedBy != ""; owned != (i < 2) {
			t.Errorf("row %s: locked_by %q; want only the 2 queued rows leased", id, r.LockedBy)
		}
	}
}

func TestPollOnceFullQueueSkipsStoreQuery(t *testing.T) {
	e := newPollEnv(0)
	var queried atomic.Int32
	e.st.Fail = func(op, _ string) error {
		if op == "claim" {
			queried.Add(1)
			return errors.New("the store must not be queried")
		}
		return nil
	}
	insert(t, e.st, "a")
	e.clock.Advance(time.Hour)
	p := e.poller(t, poller.Config{})
	res, err := p.PollOnce(context.Background())
	if err != nil {
		t.Fatalf("PollOnce with a full queue = %v (it queried the store)", err)
	}
	if want := (poller.Result{Full: true}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v", res, want)
	}
	if queried.Load() != 0 {
		t.Fatal("ClaimDue was called although the cold queue had no room")
	}
	if e.metrics.DepthCalls.Load() != 1 {
		t.Errorf("QueueDepths not reported on a skipped cycle")
	}
}

func TestPollOnceBatchSizeAndOrder(t *testing.T) {
	e := newPollEnv(100)
	t0 := e.clock.Now()
	s := time.Second
	// Order is available_at, then created_at, then id.
	e.st.Put(record("z-late", core.StatusNew, t0.Add(3*s), t0))
	e.st.Put(record("y-created-later", core.StatusRetry, t0.Add(s), t0.Add(2*s)))
	e.st.Put(record("c-tie", core.StatusNew, t0.Add(s), t0.Add(s)))
	e.st.Put(record("a-tie", core.StatusNew, t0.Add(s), t0.Add(s)))
	e.st.Put(record("x-first", core.StatusRetry, t0, t0.Add(2*s)))
	e.clock.Advance(time.Hour)

	p := e.poller(t, poller.Config{BatchSize: 3})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 3, Enqueued: 3}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v (BatchSize 3)", res, want)
	}
	if got, want := e.q.ids(), []string{"x-first", "a-tie", "c-tie"}; !slices.Equal(got, want) {
		t.Fatalf("first batch %v, want %v", got, want)
	}
	// The three oldest are in flight: the next cycle claims them again (this
	// node owns them; the store does not know they are in flight) and skips
	// them; the limit still applies.
	res = pollOnce(t, p)
	if want := (poller.Result{Read: 3, Skipped: 3}); res != want {
		t.Fatalf("second PollOnce = %+v, want %+v", res, want)
	}
	p2 := e.poller(t, poller.Config{BatchSize: 10})
	res = pollOnce(t, p2)
	if want := (poller.Result{Read: 5, Enqueued: 2, Skipped: 3}); res != want {
		t.Fatalf("PollOnce with BatchSize 10 = %+v, want %+v", res, want)
	}
	if got, want := e.q.ids()[3:], []string{"y-created-later", "z-late"}; !slices.Equal(got, want) {
		t.Fatalf("rest enqueued %v, want %v", got, want)
	}
}

func TestPollOnceUndecodableRowsAreMarkedDead(t *testing.T) {
	e := newPollEnv(10)
	t0 := e.clock.Now()
	bad := record("bad-headers", core.StatusNew, t0, t0)
	bad.HeadersJSON = "{bad"
	e.st.Put(bad)
	broken := record("bad-column", core.StatusRetry, t0, t0)
	broken.Attempts = 4
	broken.DecodeErr = errors.New("corrupt bytes payload")
	e.st.Put(broken)
	e.st.Put(record("good", core.StatusNew, t0, t0))
	e.clock.Advance(time.Hour)

	p := e.poller(t, poller.Config{})
	res := pollOnce(t, p)
	if want := (poller.Result{Read: 3, Enqueued: 1, Dead: 2}); res != want {
		t.Fatalf("PollOnce = %+v, want %+v", res, want)
	}
	if ids := e.q.ids(); !slices.Equal(ids, []string{"good"}) {
		t.Fatalf("enqueued %v, want only the decodable row", ids)
	}
	for id, reason := range map[string]string{"bad-headers": "malformed headers", "bad-column": "corrupt bytes payload"} {
		r := row(t, e.st, id)
		if r.Status != core.StatusDead {
			t.Errorf("row %s: %v, want DEAD", id, r.Status)
		}
		if !strings.Contains(r.LastError, reason) || !strings.Contains(r.LastError, core.ErrDecode.Error()) {
			t.Errorf("row %s last_error %q, want the decode reason %q", id, r.LastError, reason)
		}
		if l := e.logs.Lines("level=ERROR", "undecodable", "event_id="+id); len(l) != 1 {
			t.Errorf("%d ERROR lines for %s, want 1:\n%s", len(l), id, e.logs)
		}
	}
	if r := row(t, e.st, "bad-column"); r.Attempts != 5 {
		t.Errorf("bad-column attempts %d, want 5 (MarkDead increments)", r.Attempts)
	}
	if n := e.metrics.Dead.Load(); n != 2 {
		t.Errorf("DispatchDead = %d, want 2", n)
	}
	// DEAD rows are not read again.
	if res := pollOnce(t, p); res.Read != 1 || res.Dead != 0 {
		t.Errorf("second PollOnce = %+v, want only the in-flight good row", res)
	}
}

func TestPollOnceMarkDeadFailureIsLogged(t *testing.T) {
	e := newPollEnv(10)
	e.st.Fail = func(op, _ string) error {
		if op == "dead" {
			return errors.New("write refused")
		}
		return nil
	}
	t0 := e.clock.Now()
	bad := record("bad", core.StatusNew, t0, t0)
	bad.HeadersJSON = `["not","an","object"]`
	e.st.Put(bad)
	e.clock.Advance(time.Hour)
	p := e.poller(t, poller.Config{})
	if _, err := p.PollOnce(context.Background()); err != nil {
		t.Fatalf("PollOnce = %v; a failed MarkDead must not fail the cycle", err)
	}
	if l := e.logs.Lines("level=ERROR", "event_id=bad", "write refused"); len(l) != 1 {
		t.Errorf("want one ERROR line naming the event and the write error:\n%s", e.logs)
	}
	if r := row(t, e.st, "bad"); r.Status != core.StatusNew {
		t.Errorf("row %v, want NEW (the write failed)", r.Status)
	}
}

func TestPollOnceReturnsStoreError(t *testing.T) {
	e := newPollEnv(10)
	errDown := errors.New("store down")
	e.st.Fail = func(op, _ string) error {
		if op == "claim" {
			return errDown
		}
		return nil
	}
	p := e.poller(t, poller.Config{})
	res, err := p.PollOnce(context.Background())
	if !errors.Is(err, errDown) {
		t.Fatalf("PollOnce = %+v, %v; want the store's error", res, err)
	}
	if res.Read+res.Enqueued != 0 {
		t.Errorf("Result on error = %+v", res)
	}
}

func TestBackgroundErrorsLoggedOncePerIncident(t *testing.T) {
	e := newPollEnv(10)
	var failing atomic.Bool
	var failed atomic.Int32
	e.st.Fail = func(op, _ string) error {
		if op == "claim" && failing.Load() {
			failed.Add(1)
			return errors.New("connection refused")
		}
		return nil
	}
	failing.Store(true)
	p := e.poller(t, poller.Config{Interval: 10 * time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}

	for incident := 1; incident <= 2; incident++ {
		failing.Store(true)
		from := failed.Load()
		waitFor(t, "five failing cycles", func() bool { return failed.Load() >= from+5 }, nil)
		if n := len(e.logs.Lines("level=ERROR", "poll cycle failed")); n != incident {
			t.Fatalf("incident %d: %d ERROR lines after 5+ failing cycles, want %d (once per incident)", incident, n, incident)
		}
		if l := e.logs.Lines("level=ERROR", "poll cycle failed"); !strings.Contains(l[0], "connection refused") {
			t.Errorf("ERROR line lacks the cause: %s", l[0])
		}
		failing.Store(false)
		waitFor(t, "\"poller recovered\"", func() bool {
			return len(e.logs.Lines("level=INFO", "poller recovered")) == incident
		}, nil)
	}
	if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if n := len(e.logs.Lines("level=ERROR")); n != 2 {
		t.Errorf("%d ERROR lines in total, want 2", n)
	}
}

func TestStartStopLifecycle(t *testing.T) {
	e := newPollEnv(100)
	p := e.poller(t, poller.Config{Interval: 10 * time.Millisecond})
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close on a never-started poller = %v, want nil", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("second Close on a never-started poller = %v, want nil", err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}
	p = e.poller(t, poller.Config{Interval: 10 * time.Millisecond})
	for _, id := range idsOf("r", 3) {
		insert(t, e.st, id)
	}
	e.clock.Advance(time.Hour)

	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("Start = %v", err)
	}
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("second Start = nil, want an error")
	}
	waitFor(t, "the background cycles to enqueue the rows", func() bool { return len(e.q.ids()) == 3 }, e.q.signal)
	if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}
	// Closed: new rows are not picked up. A PollOnce proves they were due.
	insert(t, e.st, "after-stop")
	e.clock.Advance(time.Hour)
	if res := pollOnce(t, p); res.Enqueued != 1 {
		t.Fatalf("PollOnce after Close = %+v", res)
	}
}

func TestStartContextCancelDoesNotStopLoop(t *testing.T) {
	e := newPollEnv(100)
	p := e.poller(t, poller.Config{Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // Start's ctx only scopes the call; Close ends the loop
	e.clock.Advance(time.Hour)
	insert(t, e.st, "late")
	e.clock.Advance(time.Hour)
	waitFor(t, "a cycle after Start's ctx was cancelled", func() bool { return len(e.q.ids()) == 1 }, e.q.signal)
}

func TestCloseIsRetryableWhileACycleBlocks(t *testing.T) {
	e := newPollEnv(100)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var once sync.Once
	e.st.Fail = func(op, _ string) error {
		if op == "claim" {
			once.Do(func() {
				entered <- struct{}{}
				<-release // a store call that ignores its context
			})
		}
		return nil
	}
	p := e.poller(t, poller.Config{Interval: 10 * time.Millisecond})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("no cycle started")
	}
	if err := p.Close(stopCtx(t, 20*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close while a cycle blocks = %v, want context.DeadlineExceeded", err)
	}
	close(release)
	if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
		t.Fatalf("second Close = %v, want nil once the cycle returned", err)
	}
}

func TestConfigValidation(t *testing.T) {
	st, q := memstore.New(nil), newFakeQueue(1)
	bad := []struct {
		field string
		cfg   poller.Config
	}{
		{"Interval", poller.Config{Interval: -time.Second}},
		{"BacklogInterval", poller.Config{BacklogInterval: -time.Millisecond}},
		{"BatchSize", poller.Config{BatchSize: -1}},
		{"BatchSize", poller.Config{BatchSize: poller.MaxBatchSize + 1}},
		{"QueryTimeout", poller.Config{QueryTimeout: -time.Second}},
		{"ReapBatch", poller.Config{ReapBatch: -1}},
		{"ReapBatch", poller.Config{ReapBatch: math.MaxInt}},
	}
	for _, tc := range bad {
		field, cfg := tc.field, tc.cfg
		t.Run(field, func(t *testing.T) {
			p, err := poller.NewWithQueue(st, q, cfg)
			if !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("New with invalid %s = %v, %v; want an error wrapping core.ErrInvalidConfig", field, p, err)
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error %q does not name %s", err, field)
			}
		})
	}
	if _, err := poller.NewWithQueue(nil, q, poller.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil store) = %v", err)
	}
	// A nil *T store passed, then killed the process at the first poll.
	if _, err := poller.NewWithQueue((*memstore.Store)(nil), q, poller.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil *memstore.Store) = %v", err)
	}
	if _, err := poller.NewWithQueue(st, nil, poller.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("New(nil queue) = %v", err)
	}
	if _, err := poller.NewWithQueue(st, q, poller.Config{}); err != nil {
		t.Errorf("New with defaults = %v", err)
	}
	// A negative Interval is reported alone: the default BacklogInterval,
	// capped at Interval, used to be reported negative too.
	if got := cfgpath.Fields((poller.Config{Interval: -time.Second}).Validate()); !slices.Equal(got, []string{"Interval"}) {
		t.Errorf("problems of a negative Interval: %q, want [Interval]", got)
	}
	if poller.DefaultInterval != 5*time.Second || poller.DefaultSkipRecent != time.Second || poller.DefaultBatchSize != 200 {
		t.Errorf("defaults changed")
	}
}

// dispatcherSetup is a real dispatcher over st with a listener that counts
// deliveries per id.
type delivered struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *delivered) add(id string) {
	d.mu.Lock()
	d.n[id]++
	d.mu.Unlock()
}

func (d *delivered) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[id]
}

func newDispatcher(t *testing.T, st *memstore.Store, cfg dispatcher.Config, logs *testsupport.LogBuffer) (*dispatcher.Dispatcher, *delivered) {
	t.Helper()
	got := &delivered{n: map[string]int{}}
	reg := registry.New()
	reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		got.add(env.ID())
		return nil
	})
	cfg.Logger = logs.Logger()
	d, err := dispatcher.New(st, reg, cfg)
	if err != nil {
		t.Fatalf("dispatcher.New: %v", err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatalf("dispatcher.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(stopCtx(t, waitTimeout)); err != nil {
			t.Errorf("dispatcher.Close = %v", err)
		}
	})
	return d, got
}

func TestEndToEndPollerDeliversEveryRow(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	st := memstore.New(clock.Now)
	st.Changed = make(chan struct{}, 1)
	logs := &testsupport.LogBuffer{}
	// A small cold queue so the 50 rows take several cycles (backlog path).
	d, got := newDispatcher(t, st, dispatcher.Config{Workers: 2, ColdCapacity: 8}, logs)

	ids := idsOf("e2e-", 50)
	for _, id := range ids {
		insert(t, st, id)
	}
	clock.Advance(2 * time.Second) // older than SkipRecent

	p, err := poller.New(st, d, poller.Config{Interval: 10 * time.Millisecond, BatchSize: 20, Now: clock.Now, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
			t.Errorf("poller.Stop = %v", err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	waitFor(t, "all 50 rows DONE", func() bool { return st.Count(core.StatusDone) == len(ids) }, st.Changed)
	for _, id := range ids {
		if n := got.count(id); n != 1 {
			t.Errorf("event %s delivered %d times, want 1", id, n)
		}
	}
}

func TestEndToEndDroppedHotEventsReachDone(t *testing.T) {
	st := memstore.New(nil)
	st.Changed = make(chan struct{}, 1)
	logs := &testsupport.LogBuffer{}
	gate := make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(openGate)

	got := &delivered{n: map[string]int{}}
	reg := registry.New()
	reg.RegisterFunc("E", func(_ context.Context, env core.Envelope) error {
		<-gate
		got.add(env.ID())
		return nil
	})
	d, err := dispatcher.New(st, reg, dispatcher.Config{Workers: 1, HotCapacity: 1, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(stopCtx(t, waitTimeout)); err != nil {
			t.Errorf("dispatcher.Close = %v", err)
		}
	})

	// Published through this dispatcher: leased to it from the insert on.
	// The poller re-takes the dropped ones at once although their lease is
	// live, because this node owns them.
	ids := idsOf("hot-", 20)
	dropped := 0
	for _, id := range ids {
		env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		lease := handoff.Of(d, "").HotLease(env)
		if err := st.Insert(context.Background(), nil, env, lease); err != nil {
			t.Fatal(err)
		}
		if !handoff.Of(d, "").EnqueueHot(env, lease) {
			dropped++
		}
	}
	if dropped < len(ids)-2 {
		t.Fatalf("only %d of %d hot events dropped with one blocked worker and HotCapacity 1", dropped, len(ids))
	}
	openGate()

	p, err := poller.New(st, d, poller.Config{Interval: 10 * time.Millisecond, SkipRecent: -1, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(stopCtx(t, waitTimeout)); err != nil {
			t.Errorf("poller.Stop = %v", err)
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	waitFor(t, "every dropped hot event to reach DONE through the poller", func() bool {
		return st.Count(core.StatusDone) == len(ids)
	}, st.Changed)
	for _, id := range ids {
		if got.count(id) < 1 {
			t.Errorf("event %s never delivered", id)
		}
	}
}

func TestWakePollsAtOnce(t *testing.T) {
	e := newPollEnv(100)
	p := e.poller(t, poller.Config{Interval: time.Hour, BacklogInterval: time.Hour})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(stopCtx(t, waitTimeout)) })
	insert(t, e.st, "woken")
	e.clock.Advance(time.Hour) // due and past SkipRecent; the loop still waits its hour
	p.Wake()
	waitFor(t, "the poll Wake started", func() bool { return len(e.q.ids()) == 1 }, e.q.signal)
}

// A claimed row tells the dispatcher whether its event was delivered
// before (core.Delivery.Redelivered): a charged attempt, or a put-off
// that charged none but recorded why (core.Postponer). A row never tried
// tells nothing.
func TestPollOnceTellsRedeliveriesFromTheRow(t *testing.T) {
	e := newPollEnv(100)
	t0 := e.clock.Now()
	insert(t, e.st, "a-fresh")
	insert(t, e.st, "b-put-off")
	setRow(t, e.st, "b-put-off", func(r *core.Record) { // as Postpone leaves it
		r.AvailableAt, r.LastError = t0.Add(time.Second), "listener 1 of 1: broker unreachable"
	})
	insert(t, e.st, "c-retry")
	setRow(t, e.st, "c-retry", func(r *core.Record) {
		r.Status, r.Attempts, r.LastError = core.StatusRetry, 1, "failed"
	})
	e.clock.Advance(2 * time.Second)
	p := e.poller(t, poller.Config{SkipRecent: time.Second})
	if res := pollOnce(t, p); res.Enqueued != 3 {
		t.Fatalf("PollOnce = %+v, want 3 enqueued", res)
	}
	want := map[string]bool{"a-fresh": false, "b-put-off": true, "c-retry": true}
	for _, got := range e.q.entries() {
		if got.redelivered != want[got.id] {
			t.Errorf("%s enqueued redelivered %v, want %v", got.id, got.redelivered, want[got.id])
		}
	}
}

// The cold queue is shared by every store of a dispatcher (and holds its
// retries): full, it says nothing of this store's backlog. Once the
// dispatcher let the oldest row of the last claim go (delivered), a poll
// skipped for a full queue leaves the gauge as it was instead of ageing a
// row no longer pending.
func TestPollOnceFullQueueDoesNotAgeADeliveredRow(t *testing.T) {
	e := newPollEnv(100)
	insert(t, e.st, "a")
	e.clock.Advance(time.Second)
	p := e.poller(t, poller.Config{})
	if res := pollOnce(t, p); res.Enqueued != 1 {
		t.Fatalf("PollOnce = %+v, want 1 enqueued", res)
	}
	setRow(t, e.st, "a", func(r *core.Record) { r.Status, r.DoneAt, r.LockedBy = core.StatusDone, e.clock.Now(), "" })
	e.q.letGo("a")
	e.q.setRoom(0) // other stores' events fill the queue
	e.clock.Advance(time.Hour)
	if res := pollOnce(t, p); !res.Full {
		t.Fatalf("PollOnce = %+v, want Full", res)
	}
	if lag := time.Duration(e.metrics.LastLag.Load()); lag != time.Second {
		t.Errorf("OldestLag with a full queue and nothing pending = %v, want the last claim's 1s", lag)
	}
}

// A claimed event never tried counts from the time its row became due
// when that is later than its insert: a delayed event's NotBefore (an
// envelope read back from the store does not carry it) or a replay. A
// redelivery keeps its insert time.
func TestPollOnceCommittedOfADelayedEventIsItsDueTime(t *testing.T) {
	e := newPollEnv(100)
	t0 := e.clock.Now()
	insert(t, e.st, "a-fresh")
	insert(t, e.st, "b-delayed")
	setRow(t, e.st, "b-delayed", func(r *core.Record) { r.AvailableAt = t0.Add(10 * time.Second) })
	insert(t, e.st, "c-put-off")
	setRow(t, e.st, "c-put-off", func(r *core.Record) {
		r.AvailableAt, r.LastError = t0.Add(5*time.Second), "listener 1 of 1: broker unreachable"
	})
	e.clock.Advance(20 * time.Second)
	p := e.poller(t, poller.Config{SkipRecent: time.Second})
	if res := pollOnce(t, p); res.Enqueued != 3 {
		t.Fatalf("PollOnce = %+v, want 3 enqueued", res)
	}
	want := map[string]time.Time{"a-fresh": t0, "b-delayed": t0.Add(10 * time.Second), "c-put-off": t0}
	for _, got := range e.q.entries() {
		if !got.committed.Equal(want[got.id]) {
			t.Errorf("%s enqueued with committed %v, want %v", got.id, got.committed, want[got.id])
		}
	}
}

// A full cold queue skips the claim, the poll's only query, but not the
// oldest-pending gauge: the backlog the last claim found keeps ageing
// until a claim measures it again.
func TestPollOnceFullQueueStillReportsTheBacklogAge(t *testing.T) {
	e := newPollEnv(2)
	var claims atomic.Int32
	e.st.Fail = func(op, _ string) error {
		if op == "claim" {
			claims.Add(1)
		}
		return nil
	}
	for _, id := range idsOf("r", 5) {
		insert(t, e.st, id)
	}
	e.clock.Advance(time.Hour)
	p := e.poller(t, poller.Config{})
	if res := pollOnce(t, p); res.Enqueued != 2 {
		t.Fatalf("PollOnce = %+v, want 2 enqueued", res)
	}
	if lag := time.Duration(e.metrics.LastLag.Load()); lag != time.Hour {
		t.Fatalf("OldestLag = %v, want 1h", lag)
	}
	e.clock.Advance(time.Minute)
	if res := pollOnce(t, p); !res.Full {
		t.Fatalf("PollOnce = %+v, want Full", res)
	}
	if lag := time.Duration(e.metrics.LastLag.Load()); lag != time.Hour+time.Minute {
		t.Errorf("OldestLag with a full queue = %v, want 1h1m (the backlog a minute older)", lag)
	}
	if n := claims.Load(); n != 1 {
		t.Errorf("%d claims, want 1: a full queue must not query the store", n)
	}
	// r000 and r001 delivered, room again: a claim measures the backlog
	// afresh, from r002, as old.
	for _, id := range []string{"r000", "r001"} {
		setRow(t, e.st, id, func(r *core.Record) { r.Status, r.DoneAt, r.LockedBy = core.StatusDone, e.clock.Now(), "" })
	}
	e.q.setRoom(2)
	e.clock.Advance(time.Minute)
	if res := pollOnce(t, p); res.Enqueued != 2 {
		t.Fatalf("PollOnce = %+v, want 2 enqueued", res)
	}
	if lag := time.Duration(e.metrics.LastLag.Load()); lag != time.Hour+2*time.Minute {
		t.Errorf("OldestLag after a claim = %v, want 1h2m", lag)
	}
}
