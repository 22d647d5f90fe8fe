package tenant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/ctxerr"
	"github.com/outbox-go/outbox/internal/engine"
)

// RefreshResult tells what applying a set of databases changed. Store ids
// are sorted.
type RefreshResult struct {
	Added     []string // new databases, now served
	Removed   []string // databases no longer in the set, drained and closed
	Replaced  []string // databases whose Driver or DSN changed: closed and opened again, now served
	Unchanged int      // databases left alone
	// Failed names the new or changed databases that could not be opened
	// or set up (see the error): they are not served (a changed one's old
	// connection was closed first), nor named in Added or Replaced, and
	// the next apply tries them again.
	Failed []string
}

// member is one database of a set and what was built on it.
type member[T any] struct {
	d   Database
	db  *sqlx.DB
	val T
}

// set keeps one member per database and applies new sets of databases:
// the part the outbox and the inbox share. attach builds a member on a
// freshly opened database and starts using it; detach stops using it and
// waits for its work in flight (bounded by ctx); the database is closed
// after detach.
type set[T any] struct {
	what   string // "outbox" or "inbox", for logs
	open   OpenFunc
	route  func(key string) string
	attach func(ctx context.Context, d Database, db *sqlx.DB) (T, error)
	detach func(ctx context.Context, id string, val T) error
	refuse func(ctx context.Context, id string, val any) error // see setOptions
	drain  time.Duration                                       // bound of one detach
	log    *slog.Logger

	// applying holds one token: one apply (or close) at a time, and a
	// caller waiting for its turn gives up when its ctx ends.
	applying chan struct{}
	started  bool // the first set applied (New returned): under applying
	mu       sync.RWMutex
	members  map[string]*member[T]
	closed   bool

	// closing ends when the set is being closed: an apply under way
	// (opening a database that does not answer, say) gives up at once
	// instead of holding up Close.
	closing       context.Context
	cancelClosing context.CancelFunc

	closeOnce sync.Once
	dbsClosed chan struct{} // closed once closeAfter closed every database
	closeErr  error         // what closing them returned: set before dbsClosed is closed

	refresher *engine.Runner
}

// setOptions are the settings Config and InboxConfig share.
type setOptions struct {
	what      string
	databases []Database
	discover  Discovery
	open      OpenFunc
	route     func(key string) string
	drain     time.Duration
	refresh   time.Duration // RefreshInterval: negative means never
	log       *slog.Logger
	// refuse returns the error of a removal of database id (whose member
	// is val) asked with ctx of id's own work, a listener, a handler or a
	// transaction (which the removal would wait for), nil otherwise; nil:
	// none is refused up front.
	refuse func(ctx context.Context, id string, val any) error
}

// validate records the problems of the shared settings in p, named by
// their field in Config and InboxConfig.
func (o setOptions) validate(p *cfgpath.Collector) {
	switch {
	case o.discover != nil:
		// Databases is ignored: the discovery names the set.
	case o.databases == nil:
		p.Field("Databases", "must be set, or Discover")
	default:
		if _, err := validateSet(o.databases); err != nil {
			p.Add("", err)
		}
	}
	p.Duration("DrainTimeout", o.drain)
	if o.refresh > 0 { // negative: only Refresh discovers
		p.Duration("RefreshInterval", o.refresh)
	}
}

// drainDefault is the default DrainTimeout: the configured lease, or the
// default lease when that is zero too.
func drainDefault(drain, lease, defaultLease time.Duration) time.Duration {
	switch {
	case drain != 0:
		return drain
	case lease != 0:
		return lease
	}
	return defaultLease
}

// newSet builds a set and applies its first list of databases: the
// discovery's when there is one, else the static one. Any error closes
// what was opened.
func newSet[T any](ctx context.Context, o setOptions,
	attach func(ctx context.Context, d Database, db *sqlx.DB) (T, error),
	detach func(ctx context.Context, id string, val T) error,
) (*set[T], error) {
	if o.open == nil {
		o.open = Open
	}
	s := &set[T]{what: o.what, refresher: engine.NewRunner("tenant refresh"), open: o.open, route: o.route, attach: attach, detach: detach, refuse: o.refuse,
		drain: o.drain, log: o.log, members: map[string]*member[T]{}, dbsClosed: make(chan struct{}), applying: make(chan struct{}, 1)}
	s.closing, s.cancelClosing = context.WithCancel(context.Background())
	dbs := o.databases
	if o.discover != nil {
		found, err := callSafely("Discover", func() ([]Database, error) { return o.discover(ctx) })
		if err != nil {
			return nil, fmt.Errorf("outbox: discover databases: %w", err)
		}
		dbs = found
	}
	if _, err := s.apply(ctx, dbs); err != nil {
		return nil, errors.Join(err, s.closeAll())
	}
	s.started = true // no other goroutine knows s yet
	return s, nil
}

// failedNote is what becomes of a database of the set that cannot be
// opened or set up, for the log line: the first set fails New, a later
// one leaves it out.
func (s *set[T]) failedNote() string {
	if s.started {
		return "it is left out until the next refresh"
	}
	return "New fails"
}

// get returns the member a routing key maps to.
func (s *set[T]) get(key string) (T, error) {
	var zero T
	if key == "" {
		return zero, ErrInvalidKey
	}
	id := key
	if s.route != nil {
		id = s.route(key)
	}
	s.mu.RLock()
	m, ok := s.members[id]
	closed := s.closed
	s.mu.RUnlock()
	switch {
	case closed:
		// Both: the key maps to nothing any more, because of Close.
		return zero, fmt.Errorf("%w: the tenant %s set was closed (%w)", &UnknownKeyError{Key: key, StoreID: id}, s.what, core.ErrClosed)
	case !ok:
		return zero, &UnknownKeyError{Key: key, StoreID: id}
	}
	return m.val, nil
}

// vals returns the members of the set, in no order.
func (s *set[T]) vals() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]T, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, m.val)
	}
	return out
}

// isClosed reports whether the set was closed.
func (s *set[T]) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// ids returns the store ids of the set, sorted.
func (s *set[T]) ids() []string {
	s.mu.RLock()
	ids := make([]string, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	sort.Strings(ids)
	return ids
}

// apply makes the set equal to dbs: it detaches and closes the databases
// that left (or changed), then opens and attaches the new (or changed)
// ones. An invalid list changes nothing. A database that cannot be opened
// or attached is left out (and tried again at the next apply); the others
// are applied anyway and the errors are joined.
func (s *set[T]) apply(ctx context.Context, dbs []Database) (RefreshResult, error) {
	var res RefreshResult
	want, err := validateSet(dbs)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.closing, func() { cancel(fmt.Errorf("the tenant %s set is being closed: %w", s.what, core.ErrClosed)) })()
	select {
	case s.applying <- struct{}{}:
		defer func() { <-s.applying }()
	case <-ctx.Done():
		return res, fmt.Errorf("outbox: apply the set of databases: wait for the apply under way: %w", ctxerr.Of(ctx))
	}
	if err := ctx.Err(); err != nil {
		// Ended while another apply ran (a handler's own ctx its removal
		// cancelled, say): change nothing.
		return res, fmt.Errorf("outbox: apply the set of databases: %w", ctxerr.Of(ctx))
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return res, core.ErrClosed
	}
	current := make(map[string]Database, len(s.members))
	for id, m := range s.members {
		current[id] = m.d
	}
	s.mu.RUnlock()

	wanted := make(map[string]bool, len(want))
	var add []Database
	for _, d := range want {
		wanted[d.ID] = true
		old, ok := current[d.ID]
		switch {
		case !ok:
			add = append(add, d)
			res.Added = append(res.Added, d.ID)
		case old != d:
			add = append(add, d)
			res.Replaced = append(res.Replaced, d.ID)
		default:
			res.Unchanged++
		}
	}
	var errs []error
	for id := range current {
		if !wanted[id] {
			res.Removed = append(res.Removed, id)
		}
	}
	sort.Strings(res.Removed)
	kept := make(map[string]bool)
	for _, id := range append(append([]string(nil), res.Removed...), res.Replaced...) {
		if err := s.remove(ctx, id); err != nil {
			errs = append(errs, err)
			var ke *keptError
			if errors.As(err, &ke) {
				kept[id] = true
			}
		}
	}
	if len(kept) > 0 {
		// Still served as before: neither removed nor replaced.
		isKept := func(id string) bool { return kept[id] }
		res.Removed = slices.DeleteFunc(res.Removed, isKept)
		res.Replaced = slices.DeleteFunc(res.Replaced, isKept)
		add = slices.DeleteFunc(add, func(d Database) bool { return kept[d.ID] })
		res.Unchanged += len(kept)
	}
	failed := make(map[string]bool)
	for _, d := range add {
		if err := s.add(ctx, d); err != nil {
			res.Failed = append(res.Failed, d.ID)
			failed[d.ID] = true
			errs = append(errs, err)
		}
	}
	if len(failed) > 0 {
		// Added and Replaced name what is served now.
		notServed := func(id string) bool { return failed[id] }
		res.Added = slices.DeleteFunc(res.Added, notServed)
		res.Replaced = slices.DeleteFunc(res.Replaced, notServed)
	}
	// The first set that failed fails New, which closes what it opened:
	// nothing changed.
	if len(res.Added)+len(res.Removed)+len(res.Replaced)+len(res.Failed) > 0 && (s.started || len(errs) == 0) {
		s.log.Info("tenant: set of databases changed", slog.String("part", s.what),
			slog.Any("added", res.Added), slog.Any("removed", res.Removed), slog.Any("replaced", res.Replaced),
			slog.Any("failed", res.Failed), slog.Int("unchanged", res.Unchanged))
	}
	if s.closing.Err() != nil && len(errs) > 0 {
		errs = append(errs, ctxerr.Of(ctx)) // the set is being closed: say so
	}
	return res, errors.Join(errs...)
}

// setupTimeout bounds the opening and the setup of one database in an
// apply: one that does not answer is left out (Failed, tried again at the
// next apply) instead of holding up the rest of the set for ever.
const setupTimeout = 30 * time.Second

// add opens d, attaches it and makes it routable, within setupTimeout.
func (s *set[T]) add(ctx context.Context, d Database) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	db, err := callSafely("OpenFunc", func() (*sqlx.DB, error) { return s.open(ctx, d) })
	if err == nil && db == nil {
		err = fmt.Errorf("outbox: open database %q: the OpenFunc returned neither a database nor an error", d.ID)
	}
	if err != nil {
		s.log.Error("tenant: cannot open database; "+s.failedNote(), slog.String("part", s.what),
			slog.String("store", d.ID), slog.String("error", err.Error()))
		return err
	}
	val, err := s.attach(ctx, d, db)
	if err != nil {
		_ = db.Close()
		s.log.Error("tenant: cannot set up database; "+s.failedNote(), slog.String("part", s.what),
			slog.String("store", d.ID), slog.String("error", err.Error()))
		return fmt.Errorf("outbox: set up database %q: %w", d.ID, err)
	}
	s.mu.Lock()
	if s.closed {
		// Close gave up waiting for this apply: the set is closed, and
		// the database goes with it.
		s.mu.Unlock()
		// ctx, the apply's, was ended by Close: the detach gets a ctx of
		// its own, so that what it attached lets go of the database first.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.drain)
		err := errors.Join(s.detach(dctx, d.ID, val), db.Close())
		cancel()
		return errors.Join(fmt.Errorf("outbox: set up database %q: the tenant %s set was closed meanwhile: %w", d.ID, s.what, core.ErrClosed), err)
	}
	s.members[d.ID] = &member[T]{d: d, db: db, val: val}
	s.mu.Unlock()
	return nil
}

// keptError is the error of a removal asked from a listener, handler or
// transaction of the very database removed (setOptions.refuse): nothing is removed
// (the detach would have waited for the caller), so the database stays in
// the set, open and routed to.
type keptError struct {
	id  string
	err error
}

func (e *keptError) Error() string {
	return fmt.Sprintf("outbox: database %q not removed: asked from its own work (a listener, a handler or a transaction of it), it stays in the set (remove it from another goroutine): %v", e.id, e.err)
}

func (e *keptError) Unwrap() error { return e.err }

// remove stops routing to id, detaches it (its work in flight finishes,
// bounded by drain) and closes its database.
func (s *set[T]) remove(ctx context.Context, id string) error {
	s.mu.Lock()
	m, ok := s.members[id]
	if ok && s.refuse != nil {
		// Asked from a listener, handler or transaction of this very database: it
		// stays, and is routed to all along (the detach would wait for
		// the caller; deleted first, the database was unknown to For until
		// the detach refused).
		if err := s.refuse(ctx, id, m.val); err != nil {
			s.mu.Unlock()
			return &keptError{id: id, err: err}
		}
	}
	delete(s.members, id)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, s.drain)
	err := s.detach(dctx, id, m.val)
	cancel()
	if err != nil {
		s.log.Warn("tenant: database removed before its work in flight finished; that work is delivered again when the database returns",
			slog.String("part", s.what), slog.String("store", id), slog.String("error", err.Error()))
	}
	if cerr := m.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("outbox: close database %q: %w", id, cerr))
	}
	return err
}

// closeAll marks the set closed and closes every database, without
// detaching (nothing uses them: New failed).
func (s *set[T]) closeAll() error {
	ms, _ := s.takeAll(context.Background())
	return closeMembers(ms)
}

// closeAfter marks the set closed and closes every database once idle
// returns, called with a ctx that never ends: idle waits until nothing
// uses the databases any more (the dispatcher's last worker wrote its
// outcome and handed back its leases). It waits for that until ctx
// ends, then returns nil and the databases are closed in the background.
// A later call waits again, and returns what closing them returned once
// they are closed.
func (s *set[T]) closeAfter(ctx context.Context, idle func(context.Context) error) error {
	var applying bool
	s.closeOnce.Do(func() {
		var ms map[string]*member[T]
		ms, applying = s.takeAll(ctx)
		go func() {
			defer close(s.dbsClosed)
			_ = idle(context.Background()) // its error is ctx's, which never comes
			s.closeErr = closeMembers(ms)
		}()
	})
	if applying {
		// An apply under way did not give up within ctx (an OpenFunc
		// that ignores its ctx): it closes what it opens itself.
		return fmt.Errorf("outbox: close the tenant %s set: an apply of the set of databases is still under way: %w", s.what, ctx.Err())
	}
	select {
	case <-s.dbsClosed:
		return s.closeErr
	case <-ctx.Done():
		select { // both ready: the databases closed
		case <-s.dbsClosed:
			return s.closeErr
		default:
			return nil // the caller reports ctx's error
		}
	}
}

// takeAll marks the set closed and returns its members, which it no
// longer routes to. It waits for an apply under way to give up (it is
// told to) until ctx ends; then applying reports that it still runs: the
// databases it opens from then on it closes itself (see add).
func (s *set[T]) takeAll(ctx context.Context) (ms map[string]*member[T], applying bool) {
	s.cancelClosing() // an apply under way gives up
	select {
	case s.applying <- struct{}{}: // none under way: also for a done ctx
	default:
		select {
		case s.applying <- struct{}{}:
		case <-ctx.Done():
			applying = true
		}
	}
	if !applying {
		defer func() { <-s.applying }()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ms = s.members
	s.members = map[string]*member[T]{}
	s.closed = true
	return ms, applying
}

// closeMembers closes the databases of ms.
func closeMembers[T any](ms map[string]*member[T]) error {
	var errs []error
	for id, m := range ms {
		if err := m.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("outbox: close database %q: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// startRefresh calls discover every interval and applies its result until
// stopRefresh. A discovery error keeps the current set.
func (s *set[T]) startRefresh(discover Discovery, interval time.Duration) {
	if discover == nil || interval <= 0 {
		return
	}
	bound := discoverTimeout // read once, before the refresh goroutine runs
	// Started once, from Start (which fails when called again); an
	// error here means the set was closed already.
	_ = s.refresher.Start(context.Background(), func(ctx context.Context, stop <-chan struct{}) {
		ctx, cancel := engine.UntilStop(ctx, stop) // a refresh may stop anywhere
		defer cancel()
		s.refresher.Pace(ctx, stop, interval, func(ctx context.Context, _ bool) time.Duration {
			if _, err := s.refresh(ctx, discover, bound); err != nil && ctx.Err() == nil {
				s.log.Error("tenant: refresh of the set of databases failed; will try again", slog.String("part", s.what),
					slog.String("error", err.Error()))
			}
			return interval
		})
	})
}

// discoverTimeout bounds a periodic discovery: one whose backend never
// answers would otherwise stop the refreshes for good, silently. A
// variable for tests.
var discoverTimeout = setupTimeout

// refresh runs discover, within bound when it is not 0, and applies its
// result; without discover it returns an error wrapping
// core.ErrInvalidConfig.
func (s *set[T]) refresh(ctx context.Context, discover Discovery, bound time.Duration) (RefreshResult, error) {
	if discover == nil {
		return RefreshResult{}, &core.ConfigError{Field: "Discover", Msg: "is not set: nothing to refresh"}
	}
	// Closing the set ends a discovery under way, as it ends an apply.
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.closing, func() { cancel(fmt.Errorf("the tenant %s set is being closed: %w", s.what, core.ErrClosed)) })()
	if bound > 0 {
		var stop context.CancelFunc
		dctx, stop = context.WithTimeoutCause(dctx, bound, fmt.Errorf("the Discover function did not return within %v: %w", bound, context.DeadlineExceeded))
		defer stop()
	}
	dbs, err := callSafely("Discover", func() ([]Database, error) { return discover(dctx) })
	if err != nil {
		if cause := context.Cause(dctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		return RefreshResult{}, fmt.Errorf("outbox: discover databases: %w", err)
	}
	return s.apply(ctx, dbs)
}

// callSafely calls f, a function of the user's named name (Discover, an
// OpenFunc), turning a panic into an error: a bug in it must not end the
// process from the refresh goroutine (the set is kept, as after a failed
// discovery; a database that cannot be opened is left out).
func callSafely[R any](name string, f func() (R, error)) (r R, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the %s function panicked: %v", name, p)
		}
	}()
	return f()
}

// stopRefresh ends the refresh loop, cancelling a refresh in progress, and
// waits for it or ctx.
func (s *set[T]) stopRefresh(ctx context.Context) error { return s.refresher.Close(ctx) }
