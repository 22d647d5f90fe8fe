package inbox

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// A claim that ended beside the loop (a slow one) starts its messages on
// the workers idle then and gives the others back at once, with the
// attempts it charged: none waits for a worker under a lease that may
// not cover its handler. Its inbox is held no more once it settled.
func TestDetachedClaimGivesBackWhatNoIdleWorkerTakes(t *testing.T) {
	ctx := context.Background()
	logs := &testsupport.LogBuffer{}
	in, d, m, handled := detachedSetup(t, filepath.Join(t.TempDir(), "inbox.db"), logs)
	recs, err := in.Claim(ctx, d.cfg.Owner, d.cfg.Lease, 3)
	if err != nil || len(recs) != 3 {
		t.Fatalf("claim = %d, %v", len(recs), err)
	}
	d.slots <- struct{}{} // one of the two workers is busy: one is idle
	m.claiming.Store(true)
	d.finishDetached(ctx, m, recs, nil, 3, 0, time.Second)
	d.wg.Wait()
	if got := <-handled; got != "a" {
		t.Errorf("handled %q, want the first message claimed", got)
	}
	if len(handled) != 0 {
		t.Errorf("%d more messages handled, want none: one worker was idle", len(handled))
	}
	for _, id := range []string{"b", "c"} {
		r, err := in.Get(ctx, "s", id)
		if err != nil {
			t.Fatal(err)
		}
		if r.LockedBy != "" || r.Attempt != 0 || r.Status != StatusProcessing {
			t.Errorf("%s: locked by %q, attempt %d, status %v; want it given back (no lease, no attempt charged)", id, r.LockedBy, r.Attempt, r.Status)
		}
	}
	if len(d.slots) != 1 {
		t.Errorf("%d busy workers after the handler, want the other one only", len(d.slots))
	}
	if m.claiming.Load() || m.work.Held() != 0 {
		t.Errorf("claiming %v, held %d after the claim settled; want false, 0", m.claiming.Load(), m.work.Held())
	}
	if n := logs.Count("a slow claim ended with more messages than idle workers"); n != 1 {
		t.Errorf("%d INFO lines about the messages given back, want 1:\n%s", n, logs)
	}
	// After a hard stop every message it got is given back.
	<-d.slots
	if !m.work.Hold() {
		t.Fatal("no hold")
	}
	recs, err = in.Claim(ctx, d.cfg.Owner, d.cfg.Lease, 3)
	if err != nil || len(recs) != 2 {
		t.Fatalf("claim = %d, %v", len(recs), err)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	d.finishDetached(stopped, m, recs, nil, 3, 0, time.Second)
	d.wg.Wait()
	if len(handled) != 0 || len(d.slots) != 0 || m.work.Held() != 0 {
		t.Errorf("after a hard stop: %d handled, %d busy workers, held %d; want none", len(handled), len(d.slots), m.work.Held())
	}
	if r, err := in.Get(ctx, "s", "b"); err != nil || r.LockedBy != "" || r.Attempt != 0 {
		t.Errorf("after a hard stop: %+v, %v; want it given back", r, err)
	}
	// A failed detached claim is logged and skips the inbox's next turns.
	if !m.work.Hold() {
		t.Fatal("no hold")
	}
	d.finishDetached(ctx, m, nil, errors.New("boom"), 3, 0, time.Second)
	if !m.skip.Failed() || m.work.Held() != 0 {
		t.Errorf("after a failed detached claim: failed %v, held %d", m.skip.Failed(), m.work.Held())
	}
}

// The messages a slow claim keeps start before the others are given back:
// that release, a statement on the database that was slow (here: waiting
// for a write lock), went first, and took from their lease up to
// StatusTimeout.
func TestDetachedClaimStartsItsMessagesBeforeItGivesBackTheRest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inbox.db")
	in, d, m, started := detachedSetup(t, path, &testsupport.LogBuffer{})
	recs, err := in.Claim(ctx, d.cfg.Owner, d.cfg.Lease, 3)
	if err != nil || len(recs) != 3 {
		t.Fatalf("claim = %d, %v", len(recs), err)
	}
	d.slots <- struct{}{} // the worker the claim kept
	d.slots <- struct{}{} // the other one is busy
	lock, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	holder, err := lock.Beginx() // the write lock: the release of b and c waits for it
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		d.finishDetached(ctx, m, recs, nil, 3, 1, time.Second)
	}()
	select {
	case id := <-started:
		if id != "a" {
			t.Errorf("started %q, want the first message", id)
		}
	case <-released:
		t.Error("the release of the others ended before the kept message started")
	case <-time.After(20 * time.Second):
		t.Fatal("the kept message did not start while the release of the others waited")
	}
	_ = holder.Rollback()
	<-released
	d.wg.Wait()
	if len(started) != 0 {
		t.Errorf("%d more messages started, want none: no other worker was idle", len(started))
	}
}

// detachedSetup opens an inbox on the SQLite file path with messages a, b
// and c of topic t, and a dispatcher of 2 workers (not started) whose
// handler sends each message id it gets on the returned channel; the
// member is held, as pick holds the inbox of a claim.
func detachedSetup(t *testing.T, path string, logs *testsupport.LogBuffer) (*Inbox, *Dispatcher, *member, chan string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	in, err := New(ctx, db, Config{Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := in.NewDispatcher(DispatcherConfig{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan string, 3)
	if err := d.HandleFunc("t", func(_ context.Context, r Record) error { handled <- r.MessageID; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := in.Enqueue(ctx, Message{Source: "s", MessageID: id, Topic: "t", Payload: []byte{}}); err != nil {
			t.Fatal(err)
		}
	}
	m, ok := d.members.Get("")
	if !ok || !m.work.Hold() { // pick's hold, which finishDetached gives back
		t.Fatal("no member")
	}
	return in, d, m, handled
}

// A claim that ended beside the loop and gave messages back does not count
// as one that found its inbox drained, though it got fewer than it asked
// for: those messages are claimable at once. Counted so, an empty claim of
// the other inbox then let the loop rest for PollInterval with them
// waiting (a tenant test waited out its 30 s for one, PollInterval an hour).
func TestDetachedClaimThatGaveMessagesBackKeepsTheLoopAwake(t *testing.T) {
	ctx := context.Background()
	logs := &testsupport.LogBuffer{}
	d, err := NewMultiDispatcher(DispatcherConfig{Workers: 2, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ins := map[string]*Inbox{}
	for _, id := range []string{"a", "b"} {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), id+".db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if ins[id], err = New(ctx, db, Config{Logger: logs.Logger()}); err != nil {
			t.Fatal(err)
		}
		if err := d.AddInbox(id, ins[id]); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"m1", "m2"} {
		if err := ins["a"].Enqueue(ctx, Message{Source: "s", MessageID: id, Topic: "t", Payload: []byte{}}); err != nil {
			t.Fatal(err)
		}
	}
	m, ok := d.members.Get("a")
	if !ok || !m.work.Hold() { // pick's hold, which finishDetached gives back
		t.Fatal("no member")
	}
	recs, err := ins["a"].Claim(ctx, d.cfg.Owner, d.cfg.Lease, 4)
	if err != nil || len(recs) != 2 {
		t.Fatalf("claim = %d, %v", len(recs), err)
	}
	d.slots <- struct{}{} // both workers busy: the claim gives both back
	d.slots <- struct{}{}
	m.claiming.Store(true)
	d.finishDetached(ctx, m, recs, nil, 4, 0, time.Second)
	if n := logs.Count("a slow claim ended with more messages than idle workers"); n != 1 {
		t.Fatalf("%d lines about messages given back, want 1:\n%s", n, logs)
	}
	d.cycleMu.Lock()
	rest, _ := d.rotation.Done("b", 0, false, d.members.IDs())
	d.cycleMu.Unlock()
	if rest {
		t.Error("the loop may rest after an empty claim of b, with a's messages given back and claimable")
	}
}
