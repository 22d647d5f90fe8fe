package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/deadline"
	"github.com/outbox-go/outbox/internal/ratelog"
	"github.com/outbox-go/outbox/relay"
)

// Relay publishes outbox events to RabbitMQ. It is a core.Listener:
// register it on an outbox for the event types to forward. Make one with
// [New]; it is safe for concurrent use by any number of dispatcher
// workers.
type Relay struct {
	cfg     Config
	tpl     templates
	breaker *relay.Breaker
	full    *relay.Full // nacks: a queue full with reject-publish, no outage
	log     *slog.Logger
	// closedWarn rate-limits the WARN of a channel the broker closed:
	// events to a deleted exchange close one each.
	closedWarn *ratelog.Limiter
	sem        chan struct{} // MaxInFlight slots
	slots      []*slot
	next       atomic.Uint64 // round robin over slots
	// lone is the channel a message is published on again, one at a
	// time, after the broker closed its channel for a reason that does
	// not say which of the messages on it was refused: alone on a
	// channel, a refusal can only be the message's own. loneSem (one
	// token) lets one publish at a time use it.
	lone    *slot
	loneSem chan struct{}

	mu      sync.Mutex
	conn    *amqp.Connection          // nil while reconnecting
	connErr error                     // why conn is nil
	blocked atomic.Bool               // connection.blocked by the broker
	socket  atomic.Pointer[batchConn] // the socket of the last connection dialled from URL
	opens   sync.WaitGroup            // channel opens under way (added under mu, with conn set)

	closeMu   sync.RWMutex
	closed    bool
	inflight  sync.WaitGroup // OnEvent calls under way
	stop      chan struct{}  // closed by Close: ends the supervisor
	stopCtx   context.Context
	cancel    context.CancelFunc
	stopOnce  sync.Once
	superDone chan struct{}
}

// slot holds one publishing channel, opened on first use and again after
// it was closed.
type slot struct {
	mu      sync.Mutex
	pc      *pubChannel
	opening *opening // the open under way, nil when none
}

// opening is a slot's channel being opened. The publishes that need the
// channel meanwhile wait for it, each within its own ctx.
type opening struct {
	done chan struct{} // closed once pc or err is set
	pc   *pubChannel
	err  error
}

var _ core.Listener = (*Relay)(nil)

// New checks cfg, connects to the broker and returns the relay. It
// returns an error wrapping core.ErrInvalidConfig (one *core.ConfigError
// per invalid field, joined) for a bad Config, and the dial error when
// the broker cannot be reached now: the relay starts connected. Once
// running it reconnects by itself. Close it after the outbox it is
// registered on. A nil ctx returns core.ErrNilContext.
func New(ctx context.Context, cfg Config) (*Relay, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	name := "rabbitmq"
	if cfg.URL != "" {
		name += " " + RedactURL(cfg.URL)
	}
	cfg = cfg.withDefaults(name)
	tpl, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	b, err := relay.NewBreaker(cfg.Breaker)
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:        cfg,
		tpl:        tpl,
		breaker:    b,
		closedWarn: ratelog.New(5 * time.Second),
		full:       b.NewFull("message nacked (a queue full with overflow reject-publish, or unavailable)"),
		log:        cfg.Logger,
		sem:        make(chan struct{}, cfg.MaxInFlight),
		slots:      make([]*slot, cfg.Channels),
		lone:       &slot{},
		loneSem:    make(chan struct{}, 1),
		stop:       make(chan struct{}),
		superDone:  make(chan struct{}),
	}
	for i := range r.slots {
		r.slots[i] = &slot{}
	}
	r.stopCtx, r.cancel = context.WithCancel(context.Background())
	conn, err := r.dial(ctx)
	if err != nil {
		r.cancel()
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			// The handshake ended on the socket deadline ctx set: say so,
			// so that the caller tells its own deadline from the broker's.
			err = fmt.Errorf("%w: %w", ctxErr, err)
		}
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w", cfg.Breaker.Name, err)
	}
	r.conn = conn
	go r.supervise(conn)
	return r, nil
}

// maxChannelTries bounds how often one event is published again after the
// broker closed its channel; past it the event is put off (not charged:
// it was never found at fault). Once alone on the lone channel an event
// is refused or delivered at its first try there, unless a publish that
// gave up on its confirm left a message awaiting one on that channel.
const maxChannelTries = 5

// closeTimeout bounds the connection's close handshake in Close when ctx
// has no deadline.
const closeTimeout = 5 * time.Second

// OnEvent publishes env and returns once the broker confirmed it: nil for
// a basic.ack of a routed message, a normal error for a message the broker
// refused (ErrUnroutable, ErrRefused, ErrInvalidMessage), a
// core.Unavailable error wrapping ErrNacked for a message the broker
// nacked (see ErrNacked), and a core.Unavailable error (the event is put
// off, no attempt charged) when
// the broker cannot be reached (ErrNotConnected, ErrConfirmTimeout, also
// when ctx's deadline ends the wait for the confirm first, ErrBlocked, a
// connection lost while the confirm was awaited) or when ctx's deadline
// ends before the message was sent (waiting for one of the MaxInFlight
// slots). A nil ctx returns core.ErrNilContext.
//
// The message is persistent, with the event id as message_id, the event
// type as type, the occurred-at time as timestamp, content_type
// application/json for a JSON payload, and the headers of relay.Headers
// (the event's own headers, such as traceparent, then the Outbox-*
// metadata, which an event header cannot replace).
func (r *Relay) OnEvent(ctx context.Context, env core.Envelope) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	r.closeMu.RLock()
	if r.closed {
		r.closeMu.RUnlock()
		return core.Unavailable(fmt.Errorf("rabbitmq relay: %w", core.ErrClosed), r.cfg.Breaker.RetryAfter)
	}
	r.inflight.Add(1)
	r.closeMu.RUnlock()
	defer r.inflight.Done()

	exchange, key := r.tpl.exchange.Expand(env), r.tpl.routingKey.Expand(env)
	if exchange == "" && !r.tpl.exchange.IsZero() {
		// "" is the default exchange, which routes by the routing key to
		// the queue of that name: only a Config.Exchange of "" means it.
		return fmt.Errorf("%w: event %s: the Exchange template %q expands to \"\" (an empty event field), which would be the default exchange",
			ErrInvalidMessage, env.ID(), r.tpl.exchange.String())
	}
	msg, err := message(ctx, env, exchange, key, r.cfg.Propagator)
	if err != nil {
		return err
	}
	return r.deliver(ctx, exchange, key, msg)
}

// deliver publishes msg and waits for its confirm: OnEvent's outcomes.
func (r *Relay) deliver(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	where := fmt.Sprintf("exchange %q, routing key %q", exchange, key)
	if err := r.full.Allow(where); err != nil {
		return err // a queue it is routed to is full: a probe is under way or was just nacked
	}
	if err := r.breaker.Allow(); err != nil {
		return err
	}
	if r.blocked.Load() {
		return r.breaker.Down(ErrBlocked)
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		// Every slot is held by a publish awaiting its confirm: the event
		// was not sent, so it is put off, not charged. Busy slots are
		// backpressure, not an outage by themselves: the publishes holding
		// them open the breaker if their confirms do not come in time.
		return core.Unavailable(fmt.Errorf("rabbitmq: waiting for one of the MaxInFlight (%d) publish slots: %w",
			r.cfg.MaxInFlight, ctx.Err()), r.cfg.Breaker.RetryAfter)
	}
	defer func() { <-r.sem }()

	// The outcomes of this publish go through attempt: an answer to it
	// ends only an outage under way when it started, and its failure
	// begins none when an outage ended since it started (the failure
	// belongs to that outage).
	attempt := r.breaker.Attempt()
	mark := r.full.Mark() // likewise, its ack ends no full incident begun since
	var last error
	alone := false // publish on the lone channel
	for range maxChannelTries {
		res, err := r.publishOn(ctx, alone, exchange, key, msg)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				// Shutting down: the event was not sent, not charged.
				return core.Unavailable(fmt.Errorf("rabbitmq: not published (%s): %w", where, err), r.cfg.Breaker.RetryAfter)
			}
			// No connection, a failed open, or no answer to it before the
			// listener's deadline: the broker cannot be reached.
			return attempt.Down(err)
		}
		switch res.outcome {
		case acked:
			attempt.Up()
			r.full.AcceptedSince(where, mark)
			return nil
		case nacked:
			// RabbitMQ nacks a message a queue it was routed to could not
			// take: one full with overflow reject-publish, or a queue
			// whose process failed. The broker answers and its other
			// queues take their messages: the event waits, uncharged,
			// without opening the breaker.
			attempt.Up()
			return r.full.Refused(where, fmt.Errorf("%w (%s)", ErrNacked, where), func() string { return where })
		case returned:
			attempt.Up()
			return fmt.Errorf("%w: %d %s (%s)", ErrUnroutable, res.ret.ReplyCode, res.ret.ReplyText, where)
		case channelError:
			attempt.Up()
			last = fmt.Errorf("%w: %w (%s)", ErrRefused, res.err, where)
			if res.alone || causedBy(res.err, exchange, key) {
				// The only message the broker had not answered on the
				// channel, whatever the reason says (a 406 for a header,
				// a 404 whose text the broker cut short), or one to the
				// exchange (and routing key) the reason names.
				return last
			}
			// Another message on the channel may have closed it: this
			// one was discarded with it, or was the one refused. Publish
			// it again alone, on the lone channel, where a refusal can
			// only be its own; so a refused event closes one shared
			// channel, not one at each of its tries.
			alone = true
		case connLost:
			return attempt.Down(fmt.Errorf("connection lost awaiting the confirm: %w", res.err))
		case timedOut:
			return attempt.Down(fmt.Errorf("%w after %v (%s)", ErrConfirmTimeout, r.cfg.ConfirmTimeout, where))
		case unsent:
			// ctx ended before the message was written: not the event's
			// fault, and the broker was not asked.
			return core.Unavailable(fmt.Errorf("rabbitmq: not published (%s): %w", where, res.err), r.cfg.Breaker.RetryAfter)
		case ctxDone:
			if errors.Is(res.err, context.DeadlineExceeded) {
				// The listener's deadline (the dispatcher's ListenerTimeout)
				// ended the wait before ConfirmTimeout did: the same outage.
				return attempt.Down(fmt.Errorf("%w before the listener's deadline (%s): %w", ErrConfirmTimeout, where, res.err))
			}
			// Cancelled: the dispatcher is shutting down, and charges no
			// attempt for an interrupted delivery.
			return fmt.Errorf("rabbitmq: interrupted awaiting the confirm (%s): %w", where, res.err)
		}
	}
	// Every try was lost to a channel closed while other messages awaited
	// their confirms on it: this one was never found refused, so it is
	// put off, not charged an attempt (and not reported as ErrRefused,
	// which may name another message's refusal).
	return core.Unavailable(fmt.Errorf("rabbitmq: not published (%s): its channel was closed %d times by other messages the broker refused (last: %v)",
		where, maxChannelTries, last), r.cfg.Breaker.RetryAfter)
}

// publishOn publishes msg on the channel of the next slot, or, when
// alone is set, on the lone channel once no other publish uses it (within
// ctx: a wait ended by ctx is an unsent outcome, the event put off, as
// for a MaxInFlight slot). The error is the slot's: no channel.
func (r *Relay) publishOn(ctx context.Context, alone bool, exchange, key string, msg amqp.Publishing) (result, error) {
	var s *slot
	if alone {
		select {
		case r.loneSem <- struct{}{}:
			defer func() { <-r.loneSem }()
		case <-ctx.Done():
			return result{outcome: unsent, err: fmt.Errorf("waiting to publish again alone on a channel: %w", ctx.Err())}, nil
		}
		s = r.lone
	} else {
		s = r.slots[r.next.Add(1)%uint64(len(r.slots))]
	}
	pc, err := s.get(ctx, r)
	if err != nil {
		return result{}, err
	}
	return pc.publish(ctx, exchange, key, !r.cfg.AllowUnroutable, msg, r.cfg.ConfirmTimeout), nil
}

// causedBy reports whether a channel-level error names the message
// published to exchange with routing key key: 404 NOT_FOUND "no exchange
// 'x' in vhost '/'" or 403 ACCESS_REFUSED for the exchange, or, when the
// broker's topic authorisation refused a routing key ("access to topic
// 'k' in exchange 'x' …"), for that key on that exchange: other messages
// to the exchange are not at fault then.
func causedBy(err error, exchange, key string) bool {
	var ae *amqp.Error
	if !errors.As(err, &ae) || (ae.Code != amqp.NotFound && ae.Code != amqp.AccessRefused) {
		return false
	}
	// The broker cuts a reply text longer than 255 bytes to 252 and
	// "...": a long name may have lost its end, and then it is not
	// matched (the publish tells whether its message was alone on the
	// channel, and if not it is sent again alone).
	if ae.Code == amqp.AccessRefused && strings.Contains(ae.Reason, "access to topic '") {
		return strings.Contains(ae.Reason, "access to topic '"+key+"' in exchange '"+exchange+"'")
	}
	return strings.Contains(ae.Reason, "exchange '"+exchange+"'")
}

// get returns the slot's channel, opening a new one when it has none or
// its channel was closed. The open (two round trips to the broker) runs in
// a goroutine of its own, neither under s.mu nor bound to a ctx: every
// caller that needs the channel meanwhile waits for it within its own
// ctx, so a broker that does not answer holds no caller past its ctx (nor
// Close, which closes the connection and so ends the open). The error
// wraps ctx.Err() when ctx ended first.
func (s *slot) get(ctx context.Context, r *Relay) (*pubChannel, error) {
	s.mu.Lock()
	if s.pc != nil && !s.pc.isClosed() {
		pc := s.pc
		s.mu.Unlock()
		return pc, nil
	}
	op := s.opening
	if op == nil {
		if old := s.pc; old != nil {
			select {
			case <-old.closed:
				if channelLevel(old.closeErr) {
					r.closedWarn.Hit(r.log, slog.LevelWarn, "rabbitmq relay: the broker closed a publishing channel; opening a new one",
						slog.String("broker", r.cfg.Breaker.Name), slog.Int("code", old.closeErr.Code), slog.String("reason", old.closeErr.Reason))
				}
			default:
			}
			s.pc = nil
		}
		conn, err := r.startOpen()
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		op = &opening{done: make(chan struct{})}
		s.opening = op
		go s.open(r, conn, op)
	}
	s.mu.Unlock()
	select {
	case <-op.done:
		return op.pc, op.err
	case <-ctx.Done():
		return nil, fmt.Errorf("rabbitmq: opening a publishing channel: %w", ctx.Err())
	}
}

// open opens the channel of op on conn and makes it the slot's.
func (s *slot) open(r *Relay, conn *amqp.Connection, op *opening) {
	defer r.opens.Done()
	pc, err := openChannel(conn)
	s.mu.Lock()
	s.opening = nil
	if err == nil {
		s.pc = pc
	}
	s.mu.Unlock()
	op.pc, op.err = pc, err
	close(op.done)
}

// Close stops the relay: new OnEvent calls return a core.Unavailable
// error wrapping core.ErrClosed (the event is put off for
// Breaker.RetryAfter, not charged), the publishes under way finish (their
// confirms awaited), then the channels and the connection are closed. If ctx ends first, Close closes them
// anyway (the publishes still waiting fail as an outage) and returns
// ctx's error: it waits past ctx neither for the publishes nor for a
// channel being opened nor for the broker's answer to the close (which,
// with a ctx without a deadline, it awaits 5 s at most). Close
// the outbox first, so its workers are done. Calling Close again is safe.
// A nil ctx returns core.ErrNilContext and closes nothing.
func (r *Relay) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	r.closeMu.Lock()
	r.closed = true
	r.closeMu.Unlock()
	drained := make(chan struct{})
	go func() {
		r.inflight.Wait()
		close(drained)
	}()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = ctx.Err()
	}
	// A closed relay waits on no broker: its metrics say so (see
	// Config.Metrics), whatever the publishes still under way find.
	r.breaker.Retire()
	r.full.Retire()
	r.stopOnce.Do(func() {
		close(r.stop)
		r.cancel()
	})
	<-r.superDone
	// Take the connection, so no channel open starts any more, and close
	// it: that closes its channels and ends the opens under way. Only then
	// are the slots read.
	r.mu.Lock()
	conn := r.conn
	r.conn, r.connErr = nil, core.ErrClosed
	r.mu.Unlock()
	if conn != nil {
		closeBy, ok := ctx.Deadline()
		switch {
		case ctx.Err() != nil:
			closeBy = time.Now() // the caller gave up: no handshake
		case !ok:
			closeBy = time.Now().Add(closeTimeout)
		}
		if cerr := conn.CloseDeadline(closeBy); cerr != nil && err == nil {
			deadline.Settle(ctx, 0) // the socket's deadline, ctx's, may come a moment before ctx's timer
			if ctx.Err() != nil {
				err = ctx.Err() // the broker's answer did not come within ctx
			}
		}
	}
	wait := func(done <-chan struct{}) {
		select {
		case <-done:
			return // even when ctx ended too
		default:
		}
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	opened := make(chan struct{})
	go func() {
		r.opens.Wait()
		close(opened)
	}()
	wait(opened)
	var watchers []chan struct{}
	for _, s := range append([]*slot{r.lone}, r.slots...) {
		s.mu.Lock()
		if s.pc != nil {
			watchers = append(watchers, s.pc.done)
			s.pc = nil
		}
		s.mu.Unlock()
	}
	for _, w := range watchers {
		wait(w)
	}
	return err
}
