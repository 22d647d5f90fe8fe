package dispatcher_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/registry"
)

// While one DONE write is in progress the next events pile up and are
// written together: far fewer statements than events, and every row DONE.
func TestDoneWritesAreCoalesced(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 4, DoneFlushWindow: -1})
	var (
		calls   atomic.Int32
		gate    = make(chan struct{})
		gateOne sync.Once
	)
	h.st.Fail = func(op, _ string) error {
		if op == "done" {
			if calls.Add(1) == 1 {
				<-gate // hold the first write while the others finish
			}
		}
		return nil
	}
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	const events = 200
	envs := make([]core.Envelope, 0, events)
	ids := make([]string, 0, events)
	for range events { // insert first: the held write below holds the store's lock
		e := h.insert("E")
		envs = append(envs, e)
		ids = append(ids, e.ID())
	}
	h.start()
	defer gateOne.Do(func() { close(gate) })
	for _, e := range envs {
		h.mustEnqueueHot(e)
	}
	h.wait("every listener to succeed", func() bool { return h.metrics.Success.Load() == events })
	gateOne.Do(func() { close(gate) })
	for _, id := range ids {
		h.waitStatus(id, core.StatusDone)
	}
	h.waitReleased(ids...)
	// memstore consults Fail once per id it writes; count statements instead.
	if got := h.st.DoneCalls(); got >= events/2 {
		t.Fatalf("%d DONE statements for %d events: writes were not coalesced", got, events)
	} else {
		t.Logf("%d events written DONE in %d statements", events, got)
	}
}

// Close flushes the DONE writes still pending.
func TestCloseFlushesPendingDoneWrites(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 2, DoneFlushWindow: time.Hour, DoneBatchSize: 1000})
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	h.start()
	const events = 20
	ids := make([]string, 0, events)
	for range events {
		e := h.insert("E")
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	h.wait("every listener to succeed", func() bool { return h.metrics.Success.Load() == events })
	// The window (an hour) holds the batch open: nothing is DONE yet.
	if r := h.row(ids[0]); r.Status != core.StatusNew {
		t.Fatalf("row %v before the flush, want NEW", r.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if r := h.row(id); r.Status != core.StatusDone {
			t.Fatalf("row %s %v after Close, want DONE", id, r.Status)
		}
	}
}

// A failed batch releases every event of it for the poller.
func TestFailedDoneBatchReleasesAll(t *testing.T) {
	h := newHarness(t, dispatcher.Config{Workers: 1})
	h.st.Fail = func(op, _ string) error {
		if op == "done" {
			return errors.New("connection reset")
		}
		return nil
	}
	h.reg.RegisterFunc("E", func(context.Context, core.Envelope) error { return nil })
	h.start()
	var ids []string
	for range 5 {
		e := h.insert("E")
		h.mustEnqueueHot(e)
		ids = append(ids, e.ID())
	}
	h.waitReleased(ids...)
	for _, id := range ids {
		if r := h.row(id); r.Status != core.StatusNew {
			t.Fatalf("row %s %v, want NEW for the poller", id, r.Status)
		}
	}
}

func TestDoneBatchSizeValidated(t *testing.T) {
	_, err := dispatcher.New(memstore.New(nil), registry.New(), dispatcher.Config{DoneBatchSize: -1})
	if !errors.Is(err, core.ErrInvalidConfig) {
		t.Fatalf("DoneBatchSize -1: err %v", err)
	}
}
