package cleanup_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/sqlitetest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunOnceRemovesOnlyRowsPastRetention(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testsupport.NewClock(t0)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := jdbcstore.New(db, jdbcstore.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(ctx); err != nil {
		t.Fatal(err)
	}
	owner := core.Lease{Owner: "n", Until: t0.Add(1000 * time.Hour)}
	add := func(id string, status core.Status) {
		env, _ := core.NewEvent("T").ID(id).PayloadJSONString(`{}`).Build()
		if err := st.Insert(ctx, db, env, owner); err != nil {
			t.Fatal(err)
		}
		switch status {
		case core.StatusDone:
			_, err = st.MarkDone(ctx, "n", []string{id})
		case core.StatusDead:
			_, err = st.MarkDead(ctx, "n", id, "x")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	add("done-old", core.StatusDone)
	add("dead-old", core.StatusDead)
	add("new-old", core.StatusNew)
	clk.Set(t0.Add(8 * 24 * time.Hour))
	add("done-recent", core.StatusDone)
	clk.Set(t0.Add(9 * 24 * time.Hour)) // done-old is 9 days old, dead-old 9 days (< 30)

	var logs bytes.Buffer
	m := &testsupport.Metrics{}
	c, err := cleanup.New(st, cleanup.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.RunOnce(ctx)
	if err != nil || res.Done != 1 || res.Dead != 0 {
		t.Fatalf("RunOnce = %+v %v, want 1 DONE removed", res, err)
	}
	for _, id := range []string{"dead-old", "new-old", "done-recent"} {
		if _, err := st.Get(ctx, id); err != nil {
			t.Errorf("%s was removed: %v", id, err)
		}
	}
	if !strings.Contains(logs.String(), "purged rows past retention") || !strings.Contains(logs.String(), "done=1") {
		t.Errorf("log: %s", logs.String())
	}
	if m.PurgedDone.Load() != 1 || m.PurgedDead.Load() != 0 {
		t.Errorf("metrics done=%d dead=%d", m.PurgedDone.Load(), m.PurgedDead.Load())
	}
	clk.Set(t0.Add(31 * 24 * time.Hour))
	if res, err := c.RunOnce(ctx); err != nil || res.Dead != 1 || res.Done != 1 {
		t.Fatalf("after 31 days: %+v %v, want the DEAD and the recent DONE row removed", res, err)
	}
	if _, err := st.Get(ctx, "new-old"); err != nil {
		t.Fatalf("a NEW row was purged: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	st := &jdbcstore.Store{}
	for name, cfg := range map[string]cleanup.Config{
		"negative interval":      {Interval: -time.Second},
		"dead shorter than done": {DoneRetention: 48 * time.Hour, DeadRetention: 24 * time.Hour},
		"negative batch":         {BatchSize: -1},
		"negative retention":     {DoneRetention: -time.Hour},
		"batch too big":          {BatchSize: jdbcstore.MaxPurgeBatch + 1},
		"negative pause factor":  {PauseFactor: -1},
		"NaN pause factor":       {PauseFactor: math.NaN()},
		"pause factor too big":   {PauseFactor: jdbcstore.MaxPauseFactor + 1},
		"pause factor, no pause": {PauseFactor: 2, NoPause: true},
		"negative max rate":      {MaxRate: -1},
		"NaN max rate":           {MaxRate: math.NaN()},
		"infinite max rate":      {MaxRate: math.Inf(1)},
		"nil metrics value":      {Metrics: (*nopMetricsPtr)(nil)},
	} {
		if _, err := cleanup.New(st, cfg); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if _, err := cleanup.New(nil, cleanup.Config{}); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("nil purger: %v", err)
	}
}

func TestRunOncePassesTheSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  cleanup.Config
		want jdbcstore.PurgeOptions
	}{
		"defaults": {cleanup.Config{}, jdbcstore.PurgeOptions{DoneOlderThan: cleanup.DefaultDoneRetention,
			DeadOlderThan: cleanup.DefaultDeadRetention, BatchSize: cleanup.DefaultBatchSize, PauseFactor: cleanup.DefaultPauseFactor}},
		"no pause": {cleanup.Config{NoPause: true, BatchSize: 2000}, jdbcstore.PurgeOptions{DoneOlderThan: cleanup.DefaultDoneRetention,
			DeadOlderThan: cleanup.DefaultDeadRetention, BatchSize: 2000}},
		// DEAD rows kept at least as long as DONE ones (a longer
		// DoneRetention alone failed: DeadRetention shorter).
		"long done retention": {cleanup.Config{DoneRetention: 60 * 24 * time.Hour}, jdbcstore.PurgeOptions{DoneOlderThan: 60 * 24 * time.Hour,
			DeadOlderThan: 60 * 24 * time.Hour, BatchSize: cleanup.DefaultBatchSize, PauseFactor: cleanup.DefaultPauseFactor}},
		"pause factor": {cleanup.Config{PauseFactor: 4, MaxRate: 5000}, jdbcstore.PurgeOptions{DoneOlderThan: cleanup.DefaultDoneRetention,
			DeadOlderThan: cleanup.DefaultDeadRetention, BatchSize: cleanup.DefaultBatchSize, PauseFactor: 4, MaxRate: 5000}},
	} {
		var got jdbcstore.PurgeOptions
		c, err := cleanup.New(recordingPurger{&got}, tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := c.RunOnce(t.Context()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != tc.want {
			t.Errorf("%s: Purge got %+v, want %+v", name, got, tc.want)
		}
	}
}

// recordingPurger keeps the options of the last run.
type recordingPurger struct{ got *jdbcstore.PurgeOptions }

func (r recordingPurger) Purge(_ context.Context, o jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error) {
	*r.got = o
	return jdbcstore.PurgeResult{}, nil
}

// fakePurger signals each run.
type fakePurger struct{ runs chan struct{} }

func (f fakePurger) Purge(context.Context, jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error) {
	select {
	case f.runs <- struct{}{}:
	default:
	}
	return jdbcstore.PurgeResult{}, nil
}

func TestStartRunsEveryIntervalAndStops(t *testing.T) {
	f := fakePurger{runs: make(chan struct{}, 1)}
	c, err := cleanup.New(f, cleanup.Config{Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err == nil {
		t.Fatal("second Start accepted")
	}
	for range 2 {
		select {
		case <-f.runs:
		case <-time.After(10 * time.Second):
			t.Fatal("no purge run")
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}
}

func TestCloseInterruptsAPurgeInProgress(t *testing.T) {
	entered := make(chan struct{})
	f := blockingPurger{entered: entered}
	c, err := cleanup.New(f, cleanup.Config{Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no purge started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close during a purge = %v, want nil (the purge honours its ctx)", err)
	}
}

// blockingPurger blocks in Purge until its ctx ends.
type blockingPurger struct{ entered chan struct{} }

func (b blockingPurger) Purge(ctx context.Context, _ jdbcstore.PurgeOptions) (jdbcstore.PurgeResult, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return jdbcstore.PurgeResult{}, ctx.Err()
}

// A cleaner started with the default Interval (1 h) purges soon after
// Start, not an hour later: a service redeployed more often than Interval
// still purges. The random fraction 0 places the first run at Start.
func TestFirstRunSoonAfterStart(t *testing.T) {
	f := fakePurger{runs: make(chan struct{}, 1)}
	c, err := cleanup.New(f, cleanup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cleanup.SetRand(c, func() float64 { return 0 })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background()) //nolint:errcheck
	select {
	case <-f.runs:
	case <-time.After(10 * time.Second):
		t.Fatal("no purge within 10 s of Start (Interval 1 h)")
	}
}

// The first run comes at a random point of the first minute (of the
// first Interval when shorter); the later ones every Interval, ±10% at
// random, so that nodes started together do not purge in lockstep.
func TestRunsAreSpread(t *testing.T) {
	for _, tc := range []struct {
		interval    time.Duration
		r           float64
		first, next time.Duration
	}{
		{time.Hour, 0, 0, 54 * time.Minute},
		{time.Hour, 0.5, 30 * time.Second, time.Hour},
		{time.Hour, 0.75, 45 * time.Second, 63 * time.Minute},
		{10 * time.Second, 0.5, 5 * time.Second, 10 * time.Second},
		{10 * time.Second, 0, 0, 9 * time.Second},
	} {
		c, err := cleanup.New(fakePurger{}, cleanup.Config{Interval: tc.interval})
		if err != nil {
			t.Fatal(err)
		}
		cleanup.SetRand(c, func() float64 { return tc.r })
		if first, next := cleanup.Delays(c); first != tc.first || next != tc.next {
			t.Errorf("Interval %s, random %g: first run after %s, next after %s; want %s, %s", tc.interval, tc.r, first, next, tc.first, tc.next)
		}
	}
	// Every fraction below 1 keeps the first run within the minute and
	// the next within ±10%.
	c, err := cleanup.New(fakePurger{}, cleanup.Config{Interval: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cleanup.SetRand(c, func() float64 { return math.Nextafter(1, 0) })
	if first, next := cleanup.Delays(c); first >= time.Minute || next >= 132*time.Minute || next < 131*time.Minute {
		t.Errorf("random just below 1: first %s (want < 1m), next %s (want just below 2h12m)", first, next)
	}
	// The longest Interval, lengthened, stays the longest wait: it wrapped
	// negative, and the next run came at once.
	c, err = cleanup.New(fakePurger{}, cleanup.Config{Interval: math.MaxInt64})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []float64{0.75, math.Nextafter(1, 0)} {
		cleanup.SetRand(c, func() float64 { return r })
		if _, next := cleanup.Delays(c); next != math.MaxInt64 {
			t.Errorf("Interval MaxInt64, random %g: next after %v, want the largest Duration", r, next)
		}
	}
	cleanup.SetRand(c, func() float64 { return 0 })
	if _, next := cleanup.Delays(c); next <= 0 || next == math.MaxInt64 {
		t.Errorf("Interval MaxInt64, random 0: next after %v, want 90%% of it", next)
	}
}

// nopMetricsPtr is a Metrics whose nil value TestConfigValidation gives.
type nopMetricsPtr struct{ core.NopMetrics }

// A nil context is refused by Start, RunOnce and Close with
// core.ErrNilContext before anything runs (they panicked): the cleaner
// stays usable, and a Close(nil) does not close it.
func TestNilContextIsRefused(t *testing.T) {
	st, _ := sqlitetest.OpenStore(t, jdbcstore.Config{})
	c, err := cleanup.New(st, cleanup.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, core.ErrNilContext) {
			t.Errorf("%s(nil ctx) = %v, want core.ErrNilContext", name, err)
		}
	}
	check("Close before Start", c.Close(nilCtx))
	check("Start", c.Start(nilCtx))
	_, err = c.RunOnce(nilCtx)
	check("RunOnce", err)
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("Start after the refusals = %v (a refused call changed the cleaner)", err)
	}
	check("Close while running", c.Close(nilCtx))
	if _, err := c.RunOnce(t.Context()); err != nil {
		t.Fatalf("RunOnce after the refusals: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Start(ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}
}

// New refuses a nil store of a pointer type as it refuses a nil one (it
// was taken, and the first purge panicked).
func TestNewRefusesANilStore(t *testing.T) {
	for name, p := range map[string]cleanup.Purger{"nil": nil, "nil *jdbcstore.Store": (*jdbcstore.Store)(nil)} {
		c, err := cleanup.New(p, cleanup.Config{})
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "purger" || c != nil {
			t.Errorf("New(%s) = %v, %v; want a ConfigError on purger", name, c, err)
		}
	}
}
