// Package notify runs the listener that wakes a poller when a database
// announces committed events (a dialect implementing jdbcstore.Notifier:
// PostgreSQL's LISTEN/NOTIFY). outbox.New runs one for its store; a
// tenant.Outbox runs one per database of its set, each waking the poll of
// its own store. Polling stays the backstop: the listener only makes events
// published without a hot path (on a plain *sql.Tx, or by another node)
// arrive within milliseconds of their commit instead of after
// Poller.Interval.
package notify

import (
	"context"
	"log/slog"
	"sync"

	"github.com/outbox-go/outbox/jdbcstore"
)

// Listener listens for the announcements of one store and calls its wake
// function for each. The zero value is not usable: create one with [New].
// A nil *Listener is valid and does nothing, so callers need not check
// whether the database announces anything. Safe for concurrent use.
type Listener struct {
	notifier jdbcstore.Notifier
	store    *jdbcstore.Store
	wake     func()
	log      *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc // nil when not running
	done   chan struct{}
}

// New returns the listener of store's announcements, calling wake (which
// must not block) for each, or nil when store's dialect announces
// nothing. log receives the listener's incidents, with the component
// "outbox.notify".
func New(store *jdbcstore.Store, wake func(), log *slog.Logger) *Listener {
	n, ok := store.Dialect().(jdbcstore.Notifier)
	if !ok || wake == nil {
		return nil
	}
	return &Listener{notifier: n, store: store, wake: wake,
		log: log.With(slog.String("component", "outbox.notify"))}
}

// Start runs the listener in the background, on a connection of the
// store's pool held until Stop. It does nothing on nil or when the
// listener runs already.
func (l *Listener) Start() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.cancel, l.done = cancel, done
	go func() {
		defer close(done)
		l.notifier.Listen(ctx, l.store.DB(), l.store.Table(), l.log, l.wake)
	}()
}

// Stop ends the listener and waits until it returned its connection, or
// for ctx. Safe on nil, on a listener never started and more than once; a
// stopped listener may be started again.
func (l *Listener) Stop(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
