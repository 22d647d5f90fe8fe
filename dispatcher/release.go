package dispatcher

import (
	"context"
	"log/slog"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/outbox-go/outbox/core"
)

// maxReleaseExcept bounds how many in-flight ids a lease release may
// exclude (each is one placeholder of the statement). Beyond it the
// release is skipped: the leases expire as they would without it.
const maxReleaseExcept = 4096

// heldIDs returns the ids of o's events still held in the tracker.
func (d *Dispatcher) heldIDs(o *origin) []string {
	var ids []string
	d.tracker.Each(func(key string) {
		if id, ok := o.eventID(key); ok {
			ids = append(ids, id)
		}
	})
	return ids
}

// heldPastTTL reports whether one of o's events has been held for
// InFlightTTL or longer (handoff.TTLReporter): it may be taken again, so
// o's poller must read this node's rows. Without InFlightTTL it is false
// and costs nothing.
func (d *Dispatcher) heldPastTTL(o *origin) bool {
	return d.tracker.AnyExpired(func(key string) bool {
		_, ok := o.eventID(key)
		return ok
	})
}

// eventID returns the event id of key, a tracker key, and whether key is
// one of o's (see origin.key).
func (o *origin) eventID(key string) (string, bool) {
	if o.id == "" {
		return key, !strings.Contains(key, "\x00")
	}
	return strings.CutPrefix(key, o.id+"\x00")
}

// origins returns the store given to New (if any) and the stores added
// and not removed.
func (d *Dispatcher) origins() []*origin {
	var os []*origin
	if d.def != nil {
		os = append(os, d.def)
	}
	return append(os, d.stores.Members()...)
}

// releaseLeases hands back the leases this dispatcher's owner holds on
// the NEW/RETRY rows of every store, except the events it still holds (a
// listener still running, a DONE write still pending): so another node,
// or this process restarted with a new owner token, delivers the events
// it did not deliver at once instead of after Lease. ctx bounds the
// release; when ctx is done already, StatusTimeout from now does, for
// every store together: the stores are released several at a time, so
// databases that do not answer hold Close up once, not once each.
func (d *Dispatcher) releaseLeases(ctx context.Context) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), d.cfg.StatusTimeout)
		defer cancel()
	}
	d.releaseLeasesWithin(ctx)
}

// releaseLeasesWithin is releaseLeases within ctx, even a done one: then
// nothing is released now (one WARN says so; the release after the last
// worker exits tries again, else the leases expire after Lease).
func (d *Dispatcher) releaseLeasesWithin(ctx context.Context) {
	if ctx.Err() != nil {
		d.log.Warn("no time left to release this node's leases of undelivered events (the DONE writes used StatusTimeout up); tried again once the last worker exits, else they expire after Lease",
			slog.String("owner", d.cfg.Owner))
		return
	}
	var g errgroup.Group
	g.SetLimit(maxParallelReleases)
	for _, o := range d.origins() {
		g.Go(func() error {
			d.releaseWithin(ctx, o)
			return nil
		})
	}
	_ = g.Wait()
}

// maxParallelReleases bounds the stores whose leases releaseLeases hands
// back at the same time.
const maxParallelReleases = 8

// releaseLate releases the leases of o's rows, as Close does, for an
// event whose transaction committed after Close (or o's removal) began:
// its row, leased to this node when it was inserted, was not yet visible
// to Close's release, and no worker of this dispatcher will deliver it.
// It runs on the committing goroutine, bounded by StatusTimeout.
func (d *Dispatcher) releaseLate(o *origin) {
	d.releaseOrigin(context.Background(), o)
}

// releaseOrigin releases the leases of o's rows (see releaseLeases). A
// store that does not implement core.LeaseReleaser leaves them to expire.
// ctx bounds it; when ctx is done already, StatusTimeout does.
func (d *Dispatcher) releaseOrigin(ctx context.Context, o *origin) {
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	d.releaseWithin(ctx, o)
}

// releaseWithin is releaseOrigin within ctx and StatusTimeout, whichever
// ends first (a done ctx: at once).
func (d *Dispatcher) releaseWithin(ctx context.Context, o *origin) {
	rel, ok := o.store.(core.LeaseReleaser)
	if !ok {
		return
	}
	except := d.heldIDs(o)
	if len(except) > maxReleaseExcept {
		o.log.Warn("too many events still in flight to release this node's leases; they expire after Lease",
			slog.Int("in_flight", len(except)))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StatusTimeout)
	defer cancel()
	n, err := rel.ReleaseLeases(ctx, d.cfg.Owner, except)
	switch {
	case err != nil:
		// Rate-limited: a Close cut short releases twice (what no worker
		// holds, then the rest), and late commits each release.
		o.logs.release.Hit(o.log, slog.LevelWarn, "cannot release this node's leases of undelivered events; they are delivered after their lease expires",
			slog.String("owner", d.cfg.Owner), slog.String("error", err.Error()))
	case n > 0 || len(except) > 0:
		o.log.Info("released this node's leases of undelivered events; any node delivers them now",
			slog.Int64("events", n), slog.Int("kept_in_flight", len(except)), slog.String("owner", d.cfg.Owner))
	}
}
