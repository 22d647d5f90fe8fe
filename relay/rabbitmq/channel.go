package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// pubChannel is one AMQP channel in confirm mode with its bookkeeping: the
// publishes awaiting their confirm, by delivery tag, the returns of the
// mandatory ones, correlated by message id, and the error the channel was
// closed with.
//
// One goroutine, watch, receives the channel's returns, its confirms
// (NotifyPublish, one per delivery tag even when the broker acknowledges
// several at once) and its close, and completes the waiting publishes.
// Correlating a return with its publish relies on two facts. RabbitMQ
// sends a mandatory message's basic.return before its basic.ack (its
// publisher confirms documentation: "If the message is also published as
// mandatory, the basic.return is sent to the client before basic.ack").
// And amqp091-go handles both, in that order, on its one reader goroutine,
// handing each to the channels given to NotifyReturn and NotifyPublish.
// The returns channel is unbuffered, so the reader moves on to the ack only
// once watch took the return; watch records it before it takes anything
// else, so when it takes the confirm, the return (if any) is recorded.
type pubChannel struct {
	ch *amqp.Channel

	pubMu   sync.Mutex // orders publishes with their delivery tags
	nextTag uint64     // the delivery tag of the next publish, under pubMu

	mu      sync.Mutex
	waiting map[uint64]*waiter // by delivery tag
	byID    map[string]*waiter // the mandatory ones, by message id
	dead    bool               // closed: watch failed every waiter

	closed   chan struct{} // closed once the channel is closed
	closeErr *amqp.Error   // why; set before closed is closed, nil for a close of ours
	done     chan struct{} // closed when watch returns
}

// waiter is one publish awaiting its confirm. watch sets its fields, then
// closes done.
type waiter struct {
	id   string
	done chan struct{}
	ack  bool         // basic.ack (false: basic.nack, or the channel closed)
	gone bool         // the channel closed first
	ret  *amqp.Return // the broker returned the message
}

// confirmBuffer is the capacity of a channel's confirm notifications: the
// client's reader goroutine hands confirms over without waiting while
// watch is busy with earlier ones.
const confirmBuffer = 64

// openChannel opens a channel on conn and puts it in confirm mode.
func openChannel(conn *amqp.Connection) (*pubChannel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	pc := &pubChannel{
		ch:      ch,
		nextTag: 1,
		waiting: make(map[uint64]*waiter),
		byID:    make(map[string]*waiter),
		closed:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	// Unbuffered: the reader goroutine's send completes only once watch
	// holds the return (see the type's comment).
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, confirmBuffer))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	go pc.watch(returns, confirms, closes)
	return pc, nil
}

// watch records returns, completes the publishes as their confirms arrive
// and, once the channel closed, fails the rest, until the client closed
// every notification channel.
func (pc *pubChannel) watch(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation, closes <-chan *amqp.Error) {
	defer close(pc.done)
	for returns != nil || confirms != nil || closes != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			pc.mu.Lock()
			if w := pc.byID[r.MessageId]; w != nil && w.ret == nil {
				w.ret = &r
			}
			pc.mu.Unlock()
		case c, ok := <-confirms:
			if !ok {
				// The channel closed. The client closes this last, after
				// handing over every confirm it received: the publishes
				// still waiting will get none.
				confirms = nil
				pc.mu.Lock()
				pc.dead = true
				left := pc.waiting
				pc.waiting, pc.byID = nil, nil
				pc.mu.Unlock()
				for _, w := range left {
					w.gone = true
					close(w.done)
				}
				continue
			}
			pc.mu.Lock()
			w := pc.waiting[c.DeliveryTag]
			if w != nil {
				pc.forget(c.DeliveryTag, w)
			}
			pc.mu.Unlock()
			if w != nil {
				w.ack = c.Ack
				close(w.done)
			}
		case e, ok := <-closes:
			if ok {
				pc.closeErr = e
			}
			closes = nil
			close(pc.closed)
		}
	}
}

// forget removes the waiter of tag; pc.mu must be held.
func (pc *pubChannel) forget(tag uint64, w *waiter) {
	delete(pc.waiting, tag)
	// The same event published twice at once on this channel (a retry
	// while an abandoned publish is still unconfirmed) shares its message
	// id: only the latest one is registered for returns.
	if pc.byID[w.id] == w {
		delete(pc.byID, w.id)
	}
}

// isClosed reports whether the channel can no longer publish.
func (pc *pubChannel) isClosed() bool { return pc.ch.IsClosed() }

// outcome is how a publish ended.
type outcome int

const (
	acked        outcome = iota
	nacked               // basic.nack
	returned             // basic.return (mandatory, unroutable), then basic.ack
	channelError         // the broker closed the channel with a channel-level error
	connLost             // the connection (or the channel, by the client) closed
	timedOut             // no confirm within ConfirmTimeout
	ctxDone              // the listener's ctx ended first
)

// result is an outcome with its detail.
type result struct {
	outcome outcome
	ret     *amqp.Return // returned
	err     error        // channelError (*amqp.Error), connLost, ctxDone
}

// publish publishes msg and waits for its confirm, at most timeout and
// within ctx.
func (pc *pubChannel) publish(ctx context.Context, exchange, key string, mandatory bool, msg amqp.Publishing, timeout time.Duration) result {
	w := &waiter{id: msg.MessageId, done: make(chan struct{})}
	pc.pubMu.Lock()
	tag := pc.nextTag
	pc.mu.Lock()
	if pc.dead {
		pc.mu.Unlock()
		pc.pubMu.Unlock()
		return pc.closedResult(amqp.ErrClosed)
	}
	// Registered before the publish: its confirm may come at once.
	pc.waiting[tag] = w
	if mandatory {
		pc.byID[w.id] = w
	}
	pc.mu.Unlock()
	dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err == nil && dc != nil && dc.DeliveryTag != tag {
		// Only this channel's publishes take its delivery tags, one each
		// in order: a mismatch is a bug, and the confirms cannot be told
		// apart any more. Give the channel up.
		err = fmt.Errorf("rabbitmq: delivery tag %d, expected %d", dc.DeliveryTag, tag)
		_ = pc.ch.Close()
	}
	if err != nil {
		pc.mu.Lock()
		pc.forget(tag, w)
		pc.mu.Unlock()
		pc.pubMu.Unlock()
		if ctx.Err() != nil {
			return result{outcome: ctxDone, err: ctx.Err()}
		}
		return pc.closedResult(err)
	}
	pc.nextTag++
	pc.pubMu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
		pc.abandon(tag, w)
		return result{outcome: timedOut, err: ErrConfirmTimeout}
	case <-ctx.Done():
		pc.abandon(tag, w)
		return result{outcome: ctxDone, err: ctx.Err()}
	}
	switch {
	case w.gone:
		return pc.closedResult(amqp.ErrClosed)
	case !w.ack:
		return result{outcome: nacked}
	case w.ret != nil:
		return result{outcome: returned, ret: w.ret}
	}
	return result{outcome: acked}
}

// abandon stops waiting for the confirm of tag: a late one is ignored.
func (pc *pubChannel) abandon(tag uint64, w *waiter) {
	pc.mu.Lock()
	if pc.waiting[tag] == w {
		pc.forget(tag, w)
	}
	pc.mu.Unlock()
}

// closedResult classifies a publish that failed because the channel is
// closed, waiting (briefly) for watch to record why.
func (pc *pubChannel) closedResult(cause error) result {
	if !pc.isClosed() {
		// The write failed on a channel still open: the connection broke.
		return result{outcome: connLost, err: cause}
	}
	// The client marks the channel closed before it hands the close error
	// to the NotifyClose listeners; wait for watch to record it.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-pc.closed:
	case <-t.C:
		return result{outcome: connLost, err: cause}
	}
	if channelLevel(pc.closeErr) {
		return result{outcome: channelError, err: pc.closeErr}
	}
	if pc.closeErr != nil {
		return result{outcome: connLost, err: pc.closeErr}
	}
	return result{outcome: connLost, err: errors.Join(cause, amqp.ErrClosed)}
}
