package acceptance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
)

// testCloseReleasesLeases: a Close that cannot deliver everything hands
// back its leases, so the next owner (a restarted process with a new
// owner token, or another node) delivers the rest at once instead of
// after Lease (2 min here, far beyond the test's deadline).
func testCloseReleasesLeases(t *testing.T, h Harness) {
	db := h.Open(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := outbox.Config{Logger: logger, DisablePoller: true}
	cfg.Dispatcher.Workers = 1
	cfg.Dispatcher.HotCapacity = 2
	ob1, err := outbox.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 8)
	ob1.RegisterFunc("Slow", func(ctx context.Context, env core.Envelope) error {
		started <- env.ID()
		<-ctx.Done() // blocked until Close gives up
		return ctx.Err()
	})
	if err := ob1.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f1 := &fixture{ob: ob1, db: db}
	var ids []string
	for i := range 6 {
		env := mustEvent(t, core.NewEvent("Slow").PayloadJSONString(fmt.Sprintf(`{"n":%d}`, i)))
		if err := f1.publish(t, nil, env); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.ID())
		if i == 0 { // one running, two queued, three dropped (row only)
			select {
			case <-started:
			case <-time.After(waitTimeout):
				t.Fatal("the first listener did not start")
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := ob1.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded (a listener was running)", err)
	}
	// Right after Close: every row but the running one is NEW and
	// unleased (the running one is released once its worker exits).
	for _, id := range ids[1:] {
		rec := f1.status(t, id)
		if rec.Status != core.StatusNew || rec.LockedBy != "" || !rec.LockedUntil.IsZero() {
			t.Fatalf("%s right after Close: %v locked_by %q locked_until %v, want NEW with no lease",
				id, rec.Status, rec.LockedBy, rec.LockedUntil)
		}
	}

	cfg2 := outbox.Config{Logger: logger}
	cfg2.Poller.SkipRecent = -1
	cfg2.Poller.Interval = 20 * time.Millisecond
	ob2, err := outbox.New(context.Background(), db, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	ob2.RegisterFunc("Slow", func(context.Context, core.Envelope) error { return nil })
	if err := ob2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := ob2.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	f2 := &fixture{ob: ob2, db: db}
	for _, id := range ids {
		f2.waitStatus(t, id, core.StatusDone)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel2()
	if err := ob1.Close(ctx2); err != nil {
		t.Fatalf("second Close of the first outbox = %v", err)
	}
}
