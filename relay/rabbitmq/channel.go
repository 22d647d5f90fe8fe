package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// pubChannel is one AMQP channel in confirm mode with its bookkeeping:
// the returns of its mandatory publishes, correlated by message id, and
// the error it was closed with.
//
// A return names its message by message id alone (and exchange and
// routing key), so two mandatory publishes with one message id (events
// of two outboxes, or tenants, that share the relay and chose the same
// id) never await their confirms on one channel at once: the second waits
// until the first has its outcome. Otherwise the return of one could be
// taken for the other's, and a message the broker dropped counted as
// delivered.
//
// Correlating returns relies on two facts. RabbitMQ sends a mandatory
// message's basic.return before its basic.ack (its publisher confirms
// documentation: "If the message is also published as mandatory, the
// basic.return is sent to the client before basic.ack"). And amqp091-go
// handles both, in that order, on its one reader goroutine; it delivers a
// return by a send on the channel given to NotifyReturn that holds the
// reader until watch takes it. So once a publish's confirm arrived, its
// return (if any) was already received by watch; a barrier request,
// served by watch after whatever it was doing, makes sure it was also
// recorded.
//
// That send is not blocking for ever: amqp091-go (v1.16.0, notifyAll)
// drops a notification no receiver took within 5 s, so that a slow
// listener cannot wedge the reader, and a return dropped so would leave
// its publish reported as delivered. watch never keeps it waiting that
// long: it blocks on nothing but pc.mu, which is only ever held for a map
// access, and its other cases (a close, a barrier) return at once. Only a
// process that does not run at all for 5 s (stopped, or starved of CPU)
// could lose a return.
type pubChannel struct {
	ch *amqp.Channel

	mu      sync.Mutex
	pending map[string]*awaitedReturn // message id -> the one mandatory publish of it under way

	// sendMu makes sending a message and recording it in unconfirmed
	// one step, so that whoever reads unconfirmed sees every message
	// written to the channel so far.
	sendMu sync.Mutex
	// unconfirmed holds, by delivery tag, the messages sent on the
	// channel the broker did not answer yet (as far as their publishes
	// know): a message the broker closes the channel because of is
	// among them. A publish removes its own once the broker acked or
	// nacked it; one that gave up waiting leaves it (see settle).
	unconfirmed map[uint64]*amqp.DeferredConfirmation

	barrier  chan chan struct{}
	closed   chan struct{} // closed once the channel is closed
	closeErr *amqp.Error   // why; set before closed is closed, nil for a close of ours
	done     chan struct{} // closed when watch returns
}

// awaitedReturn is the return of the mandatory publish under way of one
// message id on a channel.
type awaitedReturn struct {
	ret  *amqp.Return  // nil until returned; under pubChannel.mu
	done chan struct{} // closed once the publish no longer awaits its outcome
}

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
		ch:          ch,
		pending:     make(map[string]*awaitedReturn),
		unconfirmed: make(map[uint64]*amqp.DeferredConfirmation),
		barrier:     make(chan chan struct{}),
		closed:      make(chan struct{}),
		done:        make(chan struct{}),
	}
	// Unbuffered: the reader goroutine's send completes only once watch
	// holds the return (see the type's comment).
	returns := ch.NotifyReturn(make(chan amqp.Return))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	go pc.watch(returns, closes)
	return pc, nil
}

// watch records returns and the close of the channel, and serves barrier
// requests, until the client closed both notification channels. It must
// never block for long (see pubChannel): nothing in its loop waits for
// anything but pc.mu.
func (pc *pubChannel) watch(returns <-chan amqp.Return, closes <-chan *amqp.Error) {
	defer close(pc.done)
	for returns != nil || closes != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			pc.mu.Lock()
			if v, ok := pc.pending[r.MessageId]; ok && v.ret == nil {
				v.ret = &r
			}
			pc.mu.Unlock()
		case e, ok := <-closes:
			if ok {
				pc.closeErr = e
			}
			if closes != nil {
				closes = nil
				close(pc.closed)
			}
		case b := <-pc.barrier:
			close(b)
		}
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
	ctxDone              // the listener's ctx ended while the confirm was awaited
	unsent               // the listener's ctx ended before the message was written
)

// result is an outcome with its detail.
type result struct {
	outcome outcome
	ret     *amqp.Return // returned
	err     error        // channelError (*amqp.Error), connLost, ctxDone and unsent (ctx.Err())
	// alone reports, for channelError, that the message was sent and was
	// the only one on the channel the broker had not answered when it
	// closed the channel: the broker closed it because of this message.
	alone bool
}

// publish publishes msg and waits for its confirm, at most timeout and
// within ctx.
func (pc *pubChannel) publish(ctx context.Context, exchange, key string, mandatory bool, msg amqp.Publishing, timeout time.Duration) result {
	id := msg.MessageId
	var awaited *awaitedReturn
	if mandatory {
		awaited = &awaitedReturn{done: make(chan struct{})}
		for {
			pc.mu.Lock()
			other, busy := pc.pending[id]
			if !busy {
				pc.pending[id] = awaited
			}
			pc.mu.Unlock()
			if !busy {
				break
			}
			// Another publish of this message id awaits its outcome
			// here: a return could not tell the two apart.
			select {
			case <-other.done:
			case <-ctx.Done():
				return result{outcome: unsent, err: ctx.Err()}
			}
		}
		defer func() {
			pc.mu.Lock()
			delete(pc.pending, id)
			pc.mu.Unlock()
			close(awaited.done)
		}()
	}
	pc.sendMu.Lock()
	dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err == nil {
		pc.unconfirmed[dc.DeliveryTag] = dc
	}
	pc.sendMu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return result{outcome: unsent, err: ctx.Err()}
		}
		// Not sent: the broker did not close the channel because of it.
		return pc.closedResult(err, nil)
	}
	res := pc.await(ctx, awaited, dc, timeout)
	pc.settle(dc, res.outcome)
	return res
}

// await waits for the confirm of the message sent with dc, at most
// timeout and within ctx; awaited is its return, nil when it is not
// mandatory.
func (pc *pubChannel) await(ctx context.Context, awaited *awaitedReturn, dc *amqp.DeferredConfirmation, timeout time.Duration) result {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-dc.Done():
	case <-timer.C:
		return result{outcome: timedOut, err: ErrConfirmTimeout}
	case <-ctx.Done():
		return result{outcome: ctxDone, err: ctx.Err()}
	}
	if !dc.Acked() {
		// A nack, or the channel closed and the client nacked every
		// pending confirm: only the channel's state tells them apart
		// (the client marks the channel closed before it nacks them).
		if pc.isClosed() {
			return pc.closedResult(amqp.ErrClosed, dc)
		}
		return result{outcome: nacked}
	}
	if awaited == nil {
		return result{outcome: acked}
	}
	b := make(chan struct{})
	select {
	case pc.barrier <- b:
		<-b
	case <-pc.done: // watch returned: it recorded everything it received
	}
	pc.mu.Lock()
	ret := awaited.ret
	pc.mu.Unlock()
	if ret != nil {
		return result{outcome: returned, ret: ret}
	}
	return result{outcome: acked}
}

// settle forgets the message sent with dc once the broker answered it
// (outcome acked, returned or nacked): the broker cannot close the
// channel because of it any more. A message whose publish gave up
// waiting (timedOut, ctxDone) stays, as a message the broker may still
// refuse; the entries of a closed channel stay too, for the other
// publishes that find out why it closed. Giving up is rare (an outage):
// then the messages acked since are dropped as well.
func (pc *pubChannel) settle(dc *amqp.DeferredConfirmation, o outcome) {
	pc.sendMu.Lock()
	defer pc.sendMu.Unlock()
	switch o {
	case acked, returned, nacked:
		delete(pc.unconfirmed, dc.DeliveryTag)
	case timedOut, ctxDone:
		for tag, other := range pc.unconfirmed {
			if other.Acked() {
				delete(pc.unconfirmed, tag)
			}
		}
	}
}

// alone reports whether the message sent with dc is the only one on the
// channel the broker has not acked. A message the broker closed the
// channel because of is one it never acked, so when the channel was
// closed by a channel-level error, that message is the culprit. A nacked
// message, whose publish has not removed it yet, counts as unanswered:
// at worst a culprit is not recognised (and is published again, alone).
func (pc *pubChannel) alone(dc *amqp.DeferredConfirmation) bool {
	pc.sendMu.Lock()
	defer pc.sendMu.Unlock()
	for tag, other := range pc.unconfirmed {
		if tag != dc.DeliveryTag && !other.Acked() {
			return false
		}
	}
	return true
}

// closedResult classifies a publish that failed because the channel is
// closed, waiting (briefly) for watch to record why; dc is the message's
// confirmation when it was sent, nil when it was not.
func (pc *pubChannel) closedResult(cause error, dc *amqp.DeferredConfirmation) result {
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
		return result{outcome: channelError, err: pc.closeErr, alone: dc != nil && pc.alone(dc)}
	}
	if pc.closeErr != nil {
		return result{outcome: connLost, err: pc.closeErr}
	}
	return result{outcome: connLost, err: errors.Join(cause, amqp.ErrClosed)}
}
