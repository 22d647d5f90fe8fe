package outbox

import (
	"context"
	"log/slog"
	"sync"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
)

// notifyListener wakes the poller when the database announces committed
// events (a dialect implementing jdbcstore.Notifier: PostgreSQL's
// LISTEN/NOTIFY), so events published without a hot path (on a plain
// *sql.Tx, or by another node) are delivered within milliseconds of their
// commit instead of after Poller.Interval. Polling stays the backstop.
type notifyListener struct {
	notifier jdbcstore.Notifier
	store    *jdbcstore.Store
	wake     func()
	log      *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc // nil when not running
	done   chan struct{}
}

// newNotifyListener returns the listener of store's announcements for the
// poller p, or nil when the dialect makes none or no poller runs.
func newNotifyListener(store *jdbcstore.Store, p *poller.Poller, log *slog.Logger) *notifyListener {
	n, ok := store.Dialect().(jdbcstore.Notifier)
	if !ok || p == nil {
		return nil
	}
	return &notifyListener{notifier: n, store: store, wake: p.Wake,
		log: log.With(slog.String("component", "outbox.notify"))}
}

// start runs the listener in the background; it does nothing on nil or
// when it runs already.
func (l *notifyListener) start() {
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

// stop ends the listener and waits for it to return its connection, or
// for ctx. Safe on nil, on a listener never started and more than once.
func (l *notifyListener) stop(ctx context.Context) error {
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
