// Package relaytest holds what the tests of the broker relays (the
// relay/natsjs and relay/rabbitmq modules) share: an outbox over SQLite
// with a listener for every event, and a publisher that commits events
// until stopped.
package relaytest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// Outbox opens an outbox over SQLite in a temporary directory with cfg,
// registers l for every event, starts it and closes it in t's Cleanup.
func Outbox(t testing.TB, cfg outbox.Config, l core.Listener) *outbox.Outbox {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "ob.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ob, err := outbox.New(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ob.RegisterAll(l)
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ob.Close(ctx); err != nil {
			t.Errorf("close outbox: %v", err)
		}
	})
	return ob
}

// Publish commits env through ob in a transaction of its own.
func Publish(t testing.TB, ob *outbox.Outbox, env core.Envelope) {
	t.Helper()
	err := ob.InTx(context.Background(), func(ctx context.Context) error {
		_, err := ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		t.Fatalf("publish %s: %v", env.ID(), err)
	}
}

// Publisher commits an event of type "Tick" through an outbox at a steady
// pace, each in a transaction of its own, until stopped.
type Publisher struct {
	mu        sync.Mutex
	committed []string
	stop      func()
}

// StartPublisher starts committing an event every `every` through ob. It
// is stopped by Stop or, at the latest, by t's Cleanup; a failed publish
// fails t and stops it.
func StartPublisher(t testing.TB, ob *outbox.Outbox, every time.Duration) *Publisher {
	p := &Publisher{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			env, err := core.NewEvent("Tick").PayloadJSONString(fmt.Sprintf(`{"i":%d}`, i)).Build()
			if err != nil {
				t.Error(err)
				return
			}
			err = ob.InTx(context.Background(), func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err })
			if err != nil {
				t.Error(err)
				return
			}
			p.mu.Lock()
			p.committed = append(p.committed, env.ID())
			p.mu.Unlock()
		}
	}()
	p.stop = sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(p.stop)
	return p
}

// Count returns how many events were committed so far.
func (p *Publisher) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.committed)
}

// Stop stops publishing and returns the ids of every committed event, in
// commit order.
func (p *Publisher) Stop() []string {
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.committed...)
}

// Counts returns ob's rows per status.
func Counts(t testing.TB, ob *outbox.Outbox) map[core.Status]int {
	t.Helper()
	c, err := ob.CountByStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BenchThroughput commits b.N events through ob, 100 per transaction so
// the commit rate does not bound it, waits until every one is DONE and
// reports events/s from the first commit. ob's hot queue should hold
// b.N events, so none waits for the poller.
func BenchThroughput(b *testing.B, ob *outbox.Outbox) {
	b.Helper()
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += 100 {
		if err := PublishInOneTx(ctx, ob, "Bench", `{"n":1}`, min(100, b.N-i)); err != nil {
			b.Fatal(err)
		}
	}
	testsupport.WaitFor(b, 5*time.Minute, "every event DONE", func() bool { return Counts(b, ob)[core.StatusDone] == b.N })
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchDirect calls l.OnEvent for b.N events from workers goroutines,
// each awaiting its own call (the relay alone, without an outbox), and
// reports events/s.
func BenchDirect(b *testing.B, l core.Listener, workers int) {
	b.Helper()
	next := make(chan core.Envelope, b.N)
	for range b.N {
		env, err := core.NewEvent("Bench").PayloadJSONString(`{"n":1}`).Build()
		if err != nil {
			b.Fatal(err)
		}
		next <- env
	}
	close(next)
	b.ResetTimer()
	start := time.Now()
	done := make(chan error, workers)
	for range workers {
		go func() {
			for e := range next {
				if err := l.OnEvent(context.Background(), e); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// PublishInOneTx publishes n events of type typ with the JSON payload
// payload in one transaction of ob.
func PublishInOneTx(ctx context.Context, ob *outbox.Outbox, typ, payload string, n int) error {
	return ob.InTx(ctx, func(ctx context.Context) error {
		for range n {
			env, err := core.NewEvent(typ).PayloadJSONString(payload).Build()
			if err != nil {
				return err
			}
			if _, err := ob.Publish(ctx, env); err != nil {
				return err
			}
		}
		return nil
	})
}
