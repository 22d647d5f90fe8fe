package tenant

import (
	"context"
	"fmt"
	"sync"

	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/internal/notify"
)

// listeners are the notification listeners of the databases of an
// outbox's set that announce commits (PostgreSQL's LISTEN/NOTIFY, see
// jdbcstore.Notifier). Each wakes the poll of its own store, so an event
// committed without a hot path in database X is claimed from X within
// milliseconds, whatever store the Selector would read next. A listener
// runs while its database is in the set and the outbox runs: it starts
// when the database joins a started outbox (or at Start) and stops when
// the database leaves the set (before its pool is closed) or at Close.
// The zero value is ready to use.
type listeners struct {
	mu      sync.Mutex
	byID    map[string]*notify.Listener
	running bool // between start and stop
	stopped bool // stop was called: no listener starts any more
}

// add takes over the listener of store id (nil for a database that
// announces nothing) and starts it when the outbox runs.
func (ls *listeners) add(id string, l *notify.Listener) {
	if l == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stopped {
		return
	}
	if ls.byID == nil {
		ls.byID = map[string]*notify.Listener{}
	}
	ls.byID[id] = l
	if ls.running {
		l.Start()
	}
}

// remove stops the listener of store id and waits until it returned its
// connection (bounded by ctx).
func (ls *listeners) remove(ctx context.Context, id string) error {
	ls.mu.Lock()
	l := ls.byID[id]
	delete(ls.byID, id)
	ls.mu.Unlock()
	if err := l.Stop(ctx); err != nil {
		return fmt.Errorf("outbox: stop the notification listener of %q: %w", id, err)
	}
	return nil
}

// start starts every listener, and those added later.
func (ls *listeners) start() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stopped {
		return
	}
	ls.running = true
	for _, l := range ls.byID {
		l.Start()
	}
}

// stop stops every listener for good and waits until each returned its
// connection (bounded by ctx): when ctx ends first, it returns ctx's
// error, as is.
func (ls *listeners) stop(ctx context.Context) error {
	ls.mu.Lock()
	all := ls.byID
	ls.byID, ls.running, ls.stopped = nil, false, true
	ls.mu.Unlock()
	var errs []error
	for id, l := range all {
		switch err := l.Stop(ctx); {
		case err == nil:
		case err == ctx.Err():
			errs = append(errs, err) // once, by engine.CloseErr
		default:
			errs = append(errs, fmt.Errorf("outbox: stop the notification listener of %q: %w", id, err))
		}
	}
	return engine.CloseErr(ctx, errs...)
}
