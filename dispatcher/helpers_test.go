package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/registry"
	"github.com/outbox-go/outbox/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait of this package: generous for a loaded
// 2-core machine running -race, and still a clear failure when something
// never happens.
const waitTimeout = 5 * time.Second

// gate blocks listeners until opened. It is opened at the latest by the
// test's cleanup, which runs before the dispatcher's Close cleanup when the
// gate is created after the harness.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// calls counts listener invocations per event id and in order.
type calls struct {
	mu    sync.Mutex
	order []string
	n     map[string]int
}

func (c *calls) add(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.order = append(c.order, id)
	c.n[id]++
	return c.n[id]
}

func (c *calls) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *calls) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

func (c *calls) seq() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// harness is a dispatcher over a memstore with a registry, a captured log
// and fake metrics.
type harness struct {
	t       *testing.T
	st      *memstore.Store
	reg     *registry.Registry
	d       *dispatcher.Dispatcher
	logs    *testsupport.LogBuffer
	metrics *testsupport.Metrics
	now     func() time.Time // the dispatcher's clock
	seq     atomic.Int64
}

// newHarness builds a dispatcher (not started). cfg's Logger and Metrics
// are replaced by the harness's. The store clock is cfg.Now when set. The
// dispatcher is closed by the test's cleanup.
func newHarness(t *testing.T, cfg dispatcher.Config) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, nil)
}

// newHarnessWith is newHarness with the dispatcher's Metrics wrap(the
// harness's counters) when wrap is not nil.
func newHarnessWith(t *testing.T, cfg dispatcher.Config, wrap func(*testsupport.Metrics) core.Metrics) *harness {
	t.Helper()
	h := &harness{t: t, reg: registry.New(), logs: &testsupport.LogBuffer{}, metrics: &testsupport.Metrics{}, now: cfg.Now}
	if h.now == nil {
		h.now = time.Now
	}
	h.st = memstore.New(cfg.Now)
	h.st.Changed = make(chan struct{}, 1)
	cfg.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Metrics = h.metrics
	if wrap != nil {
		cfg.Metrics = wrap(h.metrics)
	}
	d, err := dispatcher.New(h.st, h.reg, cfg)
	if err != nil {
		t.Fatalf("dispatcher.New: %v", err)
	}
	h.d = d
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("cleanup: Close = %v", err)
		}
		if t.Failed() {
			t.Logf("metrics: %v\nlog:\n%s", h.metrics, h.logs)
		}
	})
	return h
}

func (h *harness) start() {
	h.t.Helper()
	if err := h.d.Start(context.Background()); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
}

// env builds an envelope with a readable unique id.
func (h *harness) env(eventType string, mods ...func(*core.Builder)) core.Envelope {
	h.t.Helper()
	id := fmt.Sprintf("%s-%03d", eventType, h.seq.Add(1))
	b := core.NewEvent(eventType).ID(id).PayloadJSONString(`{"n":1}`)
	for _, m := range mods {
		m(b)
	}
	env, err := b.Build()
	if err != nil {
		h.t.Fatalf("Build: %v", err)
	}
	return env
}

// insert builds an envelope and stores it as a NEW row leased to the
// dispatcher (its HotLease), as the publishing client does when it publishes.
func (h *harness) insert(eventType string, mods ...func(*core.Builder)) core.Envelope {
	h.t.Helper()
	env := h.env(eventType, mods...)
	h.insertEnv(env, h.d.HotLease(env))
	return env
}

// insertEnv stores env as a NEW row with lease.
func (h *harness) insertEnv(env core.Envelope, lease core.Lease) {
	h.t.Helper()
	if err := h.st.Insert(context.Background(), nil, env, lease); err != nil {
		h.t.Fatalf("Insert: %v", err)
	}
}

// markRetry records a failed attempt of a row this dispatcher owns, as an
// earlier delivery would have, due now.
func (h *harness) markRetry(id, msg string) {
	h.t.Helper()
	now := h.now()
	ok, err := h.st.MarkRetry(context.Background(), h.d.Owner(), id, now, h.d.ClaimLease(now).Until, msg)
	if err != nil || !ok {
		h.t.Fatalf("MarkRetry(%s) = %v, %v; want true, nil", id, ok, err)
	}
}

// enqueueHot offers env as the publishing client does after commit: with the
// dispatcher's HotLease.
func (h *harness) enqueueHot(env core.Envelope) bool {
	return h.d.EnqueueHot(env, h.d.HotLease(env))
}

// enqueueCold offers env as the poller does after claiming it for the
// dispatcher: leased until ClaimLease(now).Until.
func (h *harness) enqueueCold(env core.Envelope, attempts int) bool {
	return h.d.EnqueueCold(env, attempts, h.d.ClaimLease(h.now()).Until)
}

func (h *harness) row(id string) core.Record {
	h.t.Helper()
	r, ok := h.st.Get(id)
	if !ok {
		h.t.Fatalf("row %s not found", id)
	}
	return r
}

func (h *harness) wait(what string, cond func() bool) {
	h.t.Helper()
	testsupport.WaitFor(h.t, waitTimeout, what, cond, h.st.Changed)
}

func (h *harness) waitStatus(id string, st core.Status) {
	h.t.Helper()
	h.wait(fmt.Sprintf("row %s to become %v", id, st), func() bool {
		r, ok := h.st.Get(id)
		return ok && r.Status == st
	})
}

func (h *harness) waitReleased(ids ...string) {
	h.t.Helper()
	h.wait(fmt.Sprintf("events %v to leave the in-flight set", ids), func() bool {
		for _, id := range ids {
			if h.d.InFlight(id) {
				return false
			}
		}
		return true
	})
}

func (h *harness) mustEnqueueHot(env core.Envelope) {
	h.t.Helper()
	if !h.enqueueHot(env) {
		h.t.Fatalf("EnqueueHot(%s) = false, want true", env.ID())
	}
}

func (h *harness) mustEnqueueCold(env core.Envelope, attempts int) {
	h.t.Helper()
	if !h.enqueueCold(env, attempts) {
		h.t.Fatalf("EnqueueCold(%s) = false, want true", env.ID())
	}
}

// fixedDelay is a retry policy returning d for every attempt.
func fixedDelay(d time.Duration) retry.Policy {
	return retry.PolicyFunc(func(int) time.Duration { return d })
}

// recv waits for a value on ch or fails at the deadline.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return testsupport.Recv(t, waitTimeout, ch, what)
}

// failFirst returns a listener whose first call fails and whose later
// calls succeed; calls counts them.
func failFirst(calls *atomic.Int32) func(context.Context, core.Envelope) error {
	return func(context.Context, core.Envelope) error {
		if calls.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}
}
