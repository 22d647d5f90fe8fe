package dashboard

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/outbox-go/outbox/jdbcstore"
)

// blockedShown is how many blocked keys the overview lists.
const blockedShown = 10

// overviewData is what the overview shows of one database.
type overviewData struct {
	Stats    jdbcstore.Stats
	Activity []jdbcstore.ActivityBucket
	Blocked  []jdbcstore.BlockedKey
	ReadAt   time.Time
	Took     time.Duration
	// Failed is the failure of the last read, at FailedAt, when it came
	// after the read of these figures.
	Failed   error
	FailedAt time.Time
}

// source is one database with its cached overview figures.
type source struct {
	name  string
	store Store
	inbox Inbox  // nil when none
	table string // the outbox table's name when the Store tells it (a *jdbcstore.Store does), else ""
	log   *slog.Logger
	// timeout bounds each read of the figures (Config.QueryTimeout).
	timeout time.Duration

	mu       sync.Mutex
	cached   overviewData
	cachedOK bool
	inflight *flight
	gen      uint64 // bumped by invalidate: reads started before it are not cached
	// failed is the last read's failure, and failedAt its time, while
	// no read succeeded since: the page shows it over older figures.
	failed   error
	failedAt time.Time
}

// flight is one read of the overview figures that concurrent page loads
// wait on.
type flight struct {
	gen  uint64 // the source's gen when the read started
	done chan struct{}
	data overviewData
	err  error
}

// newSource returns the database with its calls limited by sl and its
// reads of the overview figures by timeout; log receives their failures.
func newSource(name string, st Store, in Inbox, sl slots, timeout time.Duration, log *slog.Logger) *source {
	s := &source{name: name, store: limitedStore{st: st, s: sl}, log: log, timeout: timeout}
	if t, ok := st.(interface{ Table() string }); ok {
		s.table = t.Table()
	}
	if in != nil {
		s.inbox = limitedInbox{in: in, s: sl}
	}
	return s
}

// statsDuty spaces the reads of the overview figures by their own
// length: a read that took T is not repeated for statsDuty × T, so
// however large the table, the figures take at most 1/statsDuty of one
// connection's time. On a table of a million rows a count of the finished
// rows takes 100–300 ms on MariaDB: read every 5 s, it cost a busy
// application's dispatcher ~6% of its throughput on two cores.
const statsDuty = 50

// due reports whether figures d are old enough to be read again at now:
// older than maxAge, and than statsDuty times the read that made them.
func due(now time.Time, d overviewData, maxAge time.Duration) bool {
	return now.Sub(d.ReadAt) > max(maxAge, statsDuty*d.Took)
}

// overview returns the figures of the database. Figures not yet due for
// a new read (see due) are returned as they are; older ones too, while
// one read refreshes them in the background, with the failure of the
// last read, if any, and its time; without figures (or with a negative
// maxAge) the caller waits for a read. Concurrent callers share one read,
// unless it started before the last mutation. Every failed read is
// logged.
func (s *source) overview(ctx context.Context, now func() time.Time, maxAge time.Duration) (overviewData, error) {
	s.mu.Lock()
	if s.cachedOK && maxAge >= 0 {
		d := s.cached
		d.Failed, d.FailedAt = s.failed, s.failedAt
		if due(now(), d, maxAge) && s.inflight == nil {
			s.startRead(ctx, now)
		}
		s.mu.Unlock()
		return d, nil
	}
	f := s.inflight
	if f == nil || f.gen != s.gen {
		f = s.startRead(ctx, now)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.data, f.err
	case <-ctx.Done():
		return overviewData{}, ctx.Err()
	}
}

// startRead starts a read of the figures; s.mu is held.
func (s *source) startRead(ctx context.Context, now func() time.Time) *flight {
	f := &flight{gen: s.gen, done: make(chan struct{})}
	s.inflight = f
	// The read is not tied to the request that started it: a canceled
	// page load must not fail the others waiting on it.
	go s.read(context.WithoutCancel(ctx), now, f)
	return f
}

// read reads the figures into f, within the source's timeout.
func (s *source) read(ctx context.Context, now func() time.Time, f *flight) {
	ctx, cancel := withQueryTimeout(ctx, s.timeout)
	defer cancel()
	start := now()
	d, err := readOverview(ctx, s.store)
	err = timedOut(ctx, s.timeout, err)
	d.ReadAt = now()
	d.Took = d.ReadAt.Sub(start)
	s.mu.Lock()
	f.data, f.err = d, err
	if err == nil {
		s.failed, s.failedAt = nil, time.Time{}
	} else {
		s.failed, s.failedAt = err, d.ReadAt
	}
	if err == nil && f.gen == s.gen {
		s.cached, s.cachedOK = d, true
	}
	if s.inflight == f {
		s.inflight = nil
	}
	s.mu.Unlock()
	close(f.done)
	// Logged once the failure shows, and a new read may start.
	if err != nil && s.log != nil {
		s.log.ErrorContext(ctx, "outbox dashboard: reading the overview failed", storeArgs(s.name, "error", err)...)
	}
}

func readOverview(ctx context.Context, st Store) (overviewData, error) {
	var d overviewData
	var err error
	// The overview lists typesShown types: one more tells there are more.
	if d.Stats, err = st.StatsWith(ctx, jdbcstore.StatsOptions{MaxDeadTypes: typesShown + 1}); err != nil {
		return d, err
	}
	if d.Activity, err = st.Activity(ctx, DefaultActivityBuckets, DefaultActivityWidth); err != nil {
		return d, err
	}
	if d.Stats.BlockedKeys > 0 {
		if d.Blocked, err = st.BlockedKeys(ctx, blockedShown); err != nil {
			return d, err
		}
	}
	return d, nil
}

// invalidate drops the cached figures after a mutation and starts
// reading them again, so the next overview usually finds them ready. A
// read under way started before the mutation: its figures are given to
// the page loads already waiting on it, never cached.
func (s *source) invalidate(ctx context.Context, now func() time.Time) {
	s.mu.Lock()
	s.cachedOK = false
	s.gen++
	s.startRead(ctx, now)
	s.mu.Unlock()
}

// storeArgs returns args after the log attribute naming the database
// name: store, as the outbox's own lines name a database of a tenant set;
// none for the dashboard's only database ("").
func storeArgs(name string, args ...any) []any {
	if name == "" {
		return args
	}
	return append([]any{"store", name}, args...)
}
