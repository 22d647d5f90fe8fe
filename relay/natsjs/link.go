package natsjs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// linkCheck is how often the relay looks at its connection besides the
// status events: nats.go does not deliver every one (a listener whose
// buffer holds an event when the next comes is dropped as if closed).
const linkCheck = 250 * time.Millisecond

// link is one spell of the connection being up: its ctx ends, with cause
// nats.ErrDisconnected, when the connection drops. A publish awaiting its
// ack stops waiting then: a request's reply cannot come on a dropped
// connection, and nats.go fails no pending request on a disconnect (it
// waited for its whole AckTimeout, every worker held meanwhile).
type link struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func newLink() *link {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &link{ctx: ctx, cancel: cancel}
}

// dropped reports whether the connection dropped during l.
func (l *link) dropped() bool { return l != nil && l.ctx.Err() != nil }

// links follows a connection's drops: each ends the current link and
// begins the next.
type links struct {
	cur  atomic.Pointer[link]
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// watchLinks follows nc's drops, from its status events and a look every
// linkCheck (its reconnects, whether it is connected), until stopLinks or
// nc's close. Without a connection (nil nc) there is no link.
func (r *Relay) watchLinks(nc *nats.Conn) {
	if nc == nil {
		return
	}
	l := &r.links
	l.cur.Store(newLink())
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	events := nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	go func() {
		defer close(l.done)
		defer nc.RemoveStatusListener(events)
		tick := time.NewTicker(linkCheck)
		defer tick.Stop()
		// seen is the reconnect count at the last look. A look that finds
		// it moved with no drop known since the look before (no status
		// event, not down at that look: a drop and its reconnect both
		// missed within linkCheck) ends the link; after a known drop it
		// does not: the link begun then is the new connection's.
		seen, known := nc.Stats().Reconnects, false
		drop := func() { l.cur.Swap(newLink()).cancel(nats.ErrDisconnected) }
		for {
			select {
			case <-l.stop:
				return
			case <-events:
				drop()
				known = true
			case <-tick.C:
				n, down := nc.Stats().Reconnects, !nc.IsConnected()
				if down || (n != seen && !known) {
					drop()
				}
				seen, known = n, down
			}
			if nc.IsClosed() {
				return // for good: nats.go never reopens a closed connection
			}
		}
	}()
}

// stopLinks ends watchLinks and waits for it; later calls do nothing.
func (r *Relay) stopLinks() {
	l := &r.links
	if l.stop == nil {
		return
	}
	l.once.Do(func() { close(l.stop) })
	<-l.done
}
