package dispatcher

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/outbox-go/outbox/core"
)

// doneBatcher coalesces the DONE writes of all workers into few
// `UPDATE … WHERE event_id IN (…) AND locked_by = owner` statements, so a
// busy dispatcher does not double the database's write load with one
// commit per event (DESIGN.md flaw 6). Workers hand it succeeded events and
// move on; the events stay held in the tracker until their batch is
// written, so the poller cannot queue them again meanwhile. Only runs that
// still held their event when they settled it reach a batch (outcome calls
// settling before addDone), and a settling event is not taken again even
// past InFlightTTL, so a stale run's DONE never gets in. A crash before
// a flush means the rows are still NEW/RETRY: redelivered, never lost.
//
// A batch is collected when it is full or, once started, when
// DoneFlushWindow has passed; at once when it holds an ordered event that
// waited behind the one before it (see urgentDone). Each store of the
// batch has its events written by a writer of its own (a lane): one
// writer per store at a time, while the next batch builds up (group
// commit), and the stores' writers apart, so a store whose database
// answers slowly or not at all holds up only its own DONE writes. (One
// writer for all stores wrote them one store after another: a tenant
// database answering in a second per packet stopped every other tenant's
// deliveries for seconds at a time, the workers blocked on the batcher.)
// A store takes at most laneBatches batches of DONE writes at a time
// (handed over, waiting, or being written): a worker handing over one
// more waits for room in that store's lane, which slows the delivery of
// its events down to what its database can take, and keeps the wait from
// a delivery to its DONE write within two writes (a deeper queue outlasted
// the Lease of a slow database's events, which another node then delivered
// again).
type doneBatcher struct {
	d    *Dispatcher
	in   chan item
	done chan struct{}
	max  int
	wait time.Duration
	// flushNow asks for every DONE handed over so far to be written at
	// once, without waiting out DoneFlushWindow; the batcher closes the
	// channel it receives once they are (see flushPending).
	flushNow chan chan struct{}

	mu      sync.Mutex
	lanes   map[*origin]*doneLane // the stores with a writer under way
	writers sync.WaitGroup
	// queued counts each store's events handed over and not yet written
	// (or given up), at most laneBatches*max; moved is closed, and
	// replaced, whenever a store's count drops or a lane ends.
	queued map[*origin]int
	moved  chan struct{}
}

// doneLane is a store's writer under way and the events waiting for it.
type doneLane struct {
	pending []item
}

// laneBatches bounds the DONE writes a store takes at a time, in
// batches: the one being written and the next.
const laneBatches = 2

func newDoneBatcher(d *Dispatcher) *doneBatcher {
	return &doneBatcher{
		d:        d,
		in:       make(chan item, 2*d.cfg.DoneBatchSize),
		done:     make(chan struct{}),
		max:      d.cfg.DoneBatchSize,
		wait:     d.cfg.DoneFlushWindow,
		flushNow: make(chan chan struct{}),
		lanes:    make(map[*origin]*doneLane),
		queued:   make(map[*origin]int),
		moved:    make(chan struct{}),
	}
}

// flushPending writes, at once, the DONE of every event handed to the
// batcher so far, and returns once they are written, or when ctx ends
// first, or at once when the batcher is not running.
func (b *doneBatcher) flushPending(ctx context.Context) {
	ack := make(chan struct{})
	select {
	case b.flushNow <- ack:
	case <-b.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ack:
	case <-ctx.Done():
	}
}

// drainNow flushes batch and every item waiting in b.in, in batches of at
// most b.max, and waits for the writes, then closes ack. It reports false
// once b.in is closed.
func (b *doneBatcher) drainNow(batch []item, ack chan struct{}) (open bool) {
	defer close(ack)
	defer b.idle()
	for {
		select {
		case it, ok := <-b.in:
			if !ok {
				if len(batch) > 0 {
					b.flush(batch)
				}
				return false
			}
			batch = append(batch, it)
			if len(batch) == b.max {
				b.flush(batch)
				batch = batch[:0]
			}
		default:
			if len(batch) > 0 {
				b.flush(batch)
			}
			return true
		}
	}
}

// add queues a succeeded event for its DONE write. It blocks while its
// store's lane is full (see admit).
func (b *doneBatcher) add(it item) {
	for {
		room := b.admit(it.src)
		if room == nil {
			break
		}
		<-room
	}
	b.in <- it
}

// admit reserves room for one more event of store o in its lane and
// returns nil, or, when the lane is full, returns a channel closed once
// some room was made: the caller admits again then.
func (b *doneBatcher) admit(o *origin) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queued[o] >= laneBatches*b.max {
		return b.moved
	}
	b.queued[o]++
	return nil
}

// written gives back the room of n events of store o, written or given
// up.
func (b *doneBatcher) written(o *origin, n int) {
	b.mu.Lock()
	if b.queued[o] -= n; b.queued[o] <= 0 {
		delete(b.queued, o)
	}
	b.signal()
	b.mu.Unlock()
}

// signal wakes whoever waits for room or for the lanes to end (see moved);
// b.mu is held.
func (b *doneBatcher) signal() {
	close(b.moved)
	b.moved = make(chan struct{})
}

// run flushes batches until in is closed and drained, and their writes
// are done.
func (b *doneBatcher) run() {
	defer close(b.done)
	defer b.writers.Wait()
	batch := make([]item, 0, b.max)
	var timer *time.Timer
	for {
		var it item
		select {
		case in, ok := <-b.in:
			if !ok {
				return
			}
			it = in
		case ack := <-b.flushNow:
			if !b.drainNow(batch[:0], ack) {
				return
			}
			continue
		}
		batch = append(batch[:0], it)
		urgent := urgentDone(it)
		open := true
		var ack chan struct{} // a flushNow that came while the batch filled
		if b.wait > 0 {
			if timer == nil {
				timer = time.NewTimer(b.wait)
			} else {
				timer.Reset(b.wait)
			}
		}
	collect:
		for len(batch) < b.max {
			select {
			case it, ok := <-b.in:
				if !ok {
					open = false
					break collect
				}
				batch = append(batch, it)
				urgent = urgent || urgentDone(it)
				continue
			default:
			}
			if b.wait <= 0 || urgent {
				break
			}
			select {
			case it, ok := <-b.in:
				if !ok {
					open = false
					break collect
				}
				batch = append(batch, it)
				urgent = urgent || urgentDone(it)
			case <-timer.C:
				break collect
			case ack = <-b.flushNow:
				break collect
			}
		}
		if timer != nil && !timer.Stop() {
			select { // drain a fired timer so Reset starts clean
			case <-timer.C:
			default:
			}
		}
		if ack != nil {
			open = b.drainNow(batch, ack) && open
		} else {
			b.flush(batch)
		}
		if !open {
			return
		}
	}
}

// urgentDone reports whether the DONE write of it should not wait out
// DoneFlushWindow: an ordered event that did not come straight from its
// commit (it waited behind the event before it, or was retried), so later
// events of its key likely wait for it, and each of them would wait out a
// window too. Events of keys with nothing pending come by the hot path and
// keep the coalescing.
func urgentDone(it item) bool {
	return it.source != SourceHot && it.env.OrderKey() != ""
}

// flush hands one batch to the lanes of the stores its events came from
// (one in a single-store dispatcher), keeping each store's order; batch
// may be reused once it returns.
func (b *doneBatcher) flush(batch []item) {
	first := batch[0].src
	for _, it := range batch[1:] {
		if it.src != first {
			b.flushByStore(batch)
			return
		}
	}
	b.toLane(first, slices.Clone(batch))
}

// flushByStore splits a batch by store, keeping each store's order.
func (b *doneBatcher) flushByStore(batch []item) {
	var order []*origin
	groups := make(map[*origin][]item)
	for _, it := range batch {
		if _, ok := groups[it.src]; !ok {
			order = append(order, it.src)
		}
		groups[it.src] = append(groups[it.src], it)
	}
	for _, o := range order {
		b.toLane(o, groups[o])
	}
}

// toLane gives events of store o to its lane: to a new writer when the
// store has none under way, else to the events waiting for it (never more
// than the room admit gave).
func (b *doneBatcher) toLane(o *origin, events []item) {
	b.mu.Lock()
	if l := b.lanes[o]; l != nil {
		l.pending = append(l.pending, events...)
		b.mu.Unlock()
		return
	}
	l := &doneLane{}
	b.lanes[o] = l
	b.mu.Unlock()
	b.writers.Add(1)
	go b.writeLane(o, l, events)
}

// writeLane writes events of store o, then the events waiting in its
// lane, a batch at a time, until none waits.
func (b *doneBatcher) writeLane(o *origin, l *doneLane, events []item) {
	defer b.writers.Done()
	for {
		for len(events) > 0 {
			n := min(len(events), b.max)
			b.flushStore(o, events[:n])
			b.written(o, n)
			events = events[n:]
		}
		b.mu.Lock()
		events, l.pending = l.pending, nil
		if len(events) == 0 {
			delete(b.lanes, o)
			b.signal()
		}
		b.mu.Unlock()
		if len(events) == 0 {
			return
		}
	}
}

// idle waits until no lane has a writer under way.
func (b *doneBatcher) idle() {
	b.mu.Lock()
	for len(b.lanes) > 0 {
		moved := b.moved
		b.mu.Unlock()
		<-moved
		b.mu.Lock()
	}
	b.mu.Unlock()
}

// flushStore writes the DONE status of events of store o and settles
// them. A batch that mixes ordered events with others writes each kind
// in its own statement: on MySQL/MariaDB a transaction publishing the
// event after an ordered one holds a shared lock on its row until it
// ends, and the others must not wait for it (nor, past StatusTimeout, be
// released with it and delivered again).
func (b *doneBatcher) flushStore(o *origin, batch []item) {
	ordered := 0
	for _, it := range batch {
		if it.env.OrderKey() != "" {
			ordered++
		}
	}
	if ordered == 0 || ordered == len(batch) {
		b.writeDone(o, batch) // one kind: no copy
		return
	}
	plain, keyed := make([]item, 0, len(batch)-ordered), make([]item, 0, ordered)
	for _, it := range batch {
		if it.env.OrderKey() != "" {
			keyed = append(keyed, it)
		} else {
			plain = append(plain, it)
		}
	}
	b.writeDone(o, plain)
	b.writeDone(o, keyed)
}

// writeDone writes the DONE status of events of store o in one statement
// and settles them.
func (b *doneBatcher) writeDone(o *origin, batch []item) {
	d := b.d
	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.env.ID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StatusTimeout)
	start := time.Now()
	n, err := o.store.MarkDone(ctx, d.cfg.Owner, ids)
	// retried: a try failed, and may have committed all the same (its
	// answer lost with the connection), so the tries after it find its
	// rows DONE already and count fewer.
	retried := err != nil
	// Up to three more tries (after 10, 20 and 40 ms) within the same
	// timeout: a batch killed with its connection would otherwise be
	// delivered again whole. The write is
	// idempotent (status <> DONE), so a retry after an unseen commit only
	// counts fewer changed rows.
	for wait := 10 * time.Millisecond; err != nil && wait <= 40*time.Millisecond; wait *= 2 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
			var m int64
			m, err = o.store.MarkDone(ctx, d.cfg.Owner, ids)
			n += m
		}
		if ctx.Err() != nil {
			break
		}
	}
	cancel()
	if obs := d.cfg.Observer; obs != nil {
		obs.DoneWritten(o.id, len(ids), time.Since(start), err)
	}
	switch {
	case err != nil:
		o.logs.status.Hit(o.log, slog.LevelError, "status write failed; the poller will deliver these events again",
			slog.String("status", "done"), slog.Int("events", len(ids)), slog.String("event_id", ids[0]),
			slog.String("error", err.Error()))
		for _, it := range batch {
			d.release(it)
		}
	case n < int64(len(ids)):
		// Some rows were fenced off (DONE already, or another node owns
		// them now). Which ones is unknown: release all, so events owned
		// by us again later can be claimed again. After a failed try,
		// most likely that try committed them, its answer lost: not a
		// lease lost. (Were it one, the poller of the node that owns
		// them now has them.)
		msg := "status write fenced off for some events: DONE already or another node owns them now"
		if retried {
			msg = "status write retried after an error changed fewer rows: the failed try probably committed them before its answer was lost (or another node owns them now)"
		} else {
			o.metrics.LeaseLost(len(ids) - int(n))
		}
		o.logs.lease.Hit(o.log, slog.LevelWarn, msg,
			slog.String("status", "done"), slog.Int("events", len(ids)), slog.Int64("changed", n),
			slog.String("event_id", ids[0]), slog.String("owner", d.cfg.Owner))
		for _, it := range batch {
			d.release(it)
		}
	default:
		for _, it := range batch {
			d.finish(it)
		}
	}
	if err == nil {
		b.wakeWaiters(o, batch)
	}
}

// wakeWaiters hands the ordered events of batch, now DONE, to the poller
// of store o, so that the event after each is claimed at once: such an
// event was inserted unowned (or its predecessor came from a claim), so
// only a poller delivers it. With a store that claims by position
// (core.SuccessorClaimer) the poller claims just those events: at the
// positions the claims read, and for the events of the hot path at those
// the store finds an event waiting after (WaitingAfter). With another,
// the store is asked whether an event of their keys waits
// (core.KeyWaiters), and only then is the poller woken for a full claim.
// A store that cannot tell, or fails to answer, has the poller woken for
// a full claim whenever such an event finished.
func (b *doneBatcher) wakeWaiters(o *origin, batch []item) {
	if o.freed.Load() == nil {
		return
	}
	var (
		after []core.OrderPos // the events' positions, where known
		ids   []string        // the other events (hot path), with a SuccessorClaimer
		keys  []string        // their keys, without one
		seen  map[string]int  // key -> its index in after (-1: in keys)
	)
	for _, it := range batch {
		k := it.env.OrderKey()
		if k == "" {
			continue
		}
		if seen == nil {
			seen = make(map[string]int)
		}
		i, dup := seen[k]
		switch {
		case o.successors == nil:
			if !dup {
				seen[k] = -1
				keys = append(keys, k)
			}
		case it.seq == 0:
			ids = append(ids, it.env.ID()) // the store keeps the latest of a key
		case !dup:
			seen[k] = len(after)
			after = append(after, core.OrderPos{Key: k, Seq: it.seq})
		case it.seq > after[i].Seq:
			after[i].Seq = it.seq // the later of two finished events of the key
		}
	}
	if len(ids) > 0 || len(keys) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), b.d.cfg.StatusTimeout)
		defer cancel()
		if len(ids) > 0 {
			waiting, err := o.successors.WaitingAfter(ctx, b.d.cfg.Now(), ids)
			if err != nil {
				o.keyFreed(nil) // cannot tell: a full claim finds them
			}
			after = append(after, waiting...)
		}
		if len(keys) > 0 && keysWaiting(ctx, o.store, keys) {
			o.keyFreed(nil) // the next event of a key is claimable now
		}
	}
	if len(after) > 0 {
		o.keyFreed(after)
	}
}

// keysWaiting reports whether an event of keys may wait for a poller:
// true unless store (a core.KeyWaiters) answers no.
func keysWaiting(ctx context.Context, store core.StatusWriter, keys []string) bool {
	kw, ok := store.(core.KeyWaiters)
	if !ok {
		return true
	}
	waiting, err := kw.Waiting(ctx, keys)
	return err != nil || waiting
}

// addDone hands a succeeded event to the batcher for its DONE write. A
// hot event waits for room in the batcher. A cold or retried one does
// too, but while it waits (the database writes DONE slower than the
// workers deliver, as when a backlog drains) its worker delivers the hot
// events that come meanwhile: a committed event never waits for a worker
// behind a backlog's DONE writes. Those deliveries wait for the batcher
// themselves, one level deep. addDone reports false when one of them hung
// and a replacement worker took over (see process): the calling worker
// must exit.
func (d *Dispatcher) addDone(it item) bool {
	b := d.batcher
	if it.source == SourceHot {
		b.add(it)
		return true
	}
	admitted, added := b.admit(it.src) == nil, false
	if admitted {
		select {
		case b.in <- it:
			return true
		default:
		}
	}
	hand := func() { // it, whose room is reserved or not, to the batcher
		if admitted {
			b.in <- it
		} else {
			b.add(it)
		}
		added = true
	}
	defer func() {
		if !added { // a hot event's listener ended this goroutine (runtime.Goexit)
			hand()
		}
	}()
	for {
		var (
			room <-chan struct{} // while its lane is full
			in   chan item       // once admitted
		)
		if !admitted {
			room = b.admit(it.src)
			admitted = room == nil
		}
		if admitted {
			in = b.in
		}
		select {
		case in <- it:
			added = true
			return true
		case <-room: // admit again
		case h := <-d.hot:
			d.hotWaiting.Add(-1)
			if !d.process(h) {
				hand()
				return false
			}
		}
	}
}
