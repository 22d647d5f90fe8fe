package natsjs

import (
	"context"

	"github.com/nats-io/nats.go"
)

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

// watchLinks follows nc's drops until stopLinks or nc's close: each ends
// the current link and begins the next. Without a connection (nil nc)
// there is no link.
func (r *Relay) watchLinks(nc *nats.Conn) {
	if nc == nil {
		return
	}
	r.link.Store(newLink())
	r.linkNC, r.linkCh = nc, nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	r.linkDone = make(chan struct{})
	go func() {
		defer close(r.linkDone)
		for st := range r.linkCh {
			r.link.Swap(newLink()).cancel(nats.ErrDisconnected)
			if st == nats.CLOSED {
				return // for good: nats.go never reopens a closed connection
			}
		}
	}()
}

// stopLinks ends watchLinks and waits for it.
func (r *Relay) stopLinks() {
	if r.linkCh == nil {
		return
	}
	r.linkNC.RemoveStatusListener(r.linkCh) // closes it
	<-r.linkDone
}
