package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/relay"
)

// ErrClosed is returned (wrapped in a core.Unavailable error, so the event
// is put off without charging an attempt) by OnEvent after Close. It
// wraps core.ErrClosed, as the RabbitMQ relay's error after Close does.
var ErrClosed = fmt.Errorf("natsjs: relay closed: %w", core.ErrClosed)

// Relay publishes outbox events to JetStream. It implements
// core.Listener; register it on an outbox with Register or RegisterAll.
// Create one with [New]. A Relay is safe for concurrent use by any number
// of dispatcher workers.
type Relay struct {
	js      jetstream.JetStream
	cfg     Config
	subject relay.Template
	breaker *relay.Breaker
	full    *relay.Full   // streams full with DiscardNew: no outage
	slots   chan struct{} // one token per publish awaiting its ack
	pubOpts []jetstream.PublishOpt
	// lookups (one token) lets one publish at a time ask the JetStream
	// API why its ack did not come (see noAck).
	lookups chan struct{}
	denials *denials // the server's refusals to publish (nil without a connection)
	// maxSubject is the longest subject the connection can publish to
	// (see maxSubjectOn).
	maxSubject int
	// links follows the connection's spells up (see watchLinks).
	links links

	mu      sync.Mutex
	closed  bool
	active  int           // OnEvent calls under way
	drained chan struct{} // closed once closed and active == 0
}

var _ core.Listener = (*Relay)(nil)

// New returns a Relay publishing through js, a JetStream context of the
// new API (jetstream.New). It validates cfg first and returns every
// invalid field at once, each a *core.ConfigError wrapping
// core.ErrInvalidConfig, joined with errors.Join.
//
// The relay does not own js or its connection: closing them is up to the
// caller, after the outbox and the relay are closed. Connect with
// nats.MaxReconnects(-1) so the client keeps reconnecting through an
// outage of any length; the relay puts events off meanwhile.
//
// New puts a handler of its own in front of the connection's asynchronous
// error handler (nats.Conn.SetErrorHandler), calling the one it finds
// there for every error: it records the server's refusals to let the
// connection publish to a subject (permissions violations), which come as
// errors of the connection, not as answers to the publish. Set your handler
// before New (and not while another New on the connection runs): one set
// after replaces the relay's, which then sees only the connection's last
// error, so of two publishes refused at the same moment one may be taken
// for an outage. New also follows the connection's status
// (nats.Conn.StatusChanged): a publish awaiting its ack when the
// connection drops stops waiting at once, an outage.
func New(js jetstream.JetStream, cfg Config) (*Relay, error) {
	if js == nil {
		// cfg is checked all the same: every problem is reported at once.
		_, err := cfg.withDefaults("").validate()
		return nil, errors.Join(&core.ConfigError{Field: "js", Msg: "(the JetStream context) must not be nil"}, err)
	}
	nc := js.Conn()
	cfg = cfg.withDefaults(brokerName(nc))
	tpl, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	b, err := relay.NewBreaker(cfg.Breaker)
	if err != nil {
		return nil, err
	}
	r := &Relay{js: js, cfg: cfg, subject: tpl, breaker: b,
		full:  b.NewFull("stream full (Discard: DiscardNew, or DiscardNewPerSubject for its subjects)"),
		slots: make(chan struct{}, cfg.MaxInFlight), lookups: make(chan struct{}, 1), drained: make(chan struct{}),
		// A publish nothing answered is not sent again: nats.go's retries
		// (twice, 250 ms apart) held a worker half a second per event to a
		// subject without stream. classify asks the JetStream API instead,
		// and a JetStream not there at all is an outage, probed.
		pubOpts: []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)}}
	if cfg.ExpectStream != "" {
		r.pubOpts = append(r.pubOpts, jetstream.WithExpectStream(cfg.ExpectStream))
	}
	r.denials = watchDenials(nc)
	r.maxSubject = maxSubjectOn(nc)
	r.watchLinks(nc)
	return r, nil
}

// OnEvent publishes env to JetStream and returns once JetStream
// acknowledged it (nil, also for a duplicate within the stream's duplicate
// window), refused it (an error: the event is retried, DEAD after
// MaxAttempts) or could not be reached (a core.Unavailable error: the event
// is put off without charging an attempt). It implements core.Listener.
// A nil ctx returns core.ErrNilContext.
//
// The publish runs beside the call, which returns within 100 ms of ctx's
// end whatever the connection does: nats.go writes a message over 32 KB
// to the socket holding its connection's lock, heeding no context (bounded
// by nats.FlusherTimeout, 1 min), so on a link too slow for one message
// within the listener's deadline a call waiting for it would outlive the
// deadline, and the dispatcher would charge an attempt. The event is put
// off at the deadline instead (an outage: the link is too slow); the
// publish goes on in the background, still a call under way for Close,
// and a message it does send is dropped as a duplicate (its Nats-Msg-Id)
// when the event comes again within the stream's duplicate window.
func (r *Relay) OnEvent(ctx context.Context, env core.Envelope) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	if !r.enter() {
		return core.Unavailable(ErrClosed, r.cfg.Breaker.RetryAfter)
	}
	res := make(chan error, 1)
	go func() {
		defer r.leave()
		res <- r.deliver(ctx, env)
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	// The publish heeds ctx too, and says best why it ended: wait for its
	// answer a moment.
	t := time.NewTimer(deliverGrace)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
	}
	err := fmt.Errorf("natsjs: the publish outlived the listener's context inside nats.go (a write to a slow link holds its connection; the publish goes on in the background): %w", ctxerr.Of(ctx))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return r.breaker.Down(err)
	}
	return err // interrupted (shutdown)
}

// deliverGrace is how long OnEvent waits, after its ctx ended, for the
// publish to answer before it returns without it.
const deliverGrace = 100 * time.Millisecond

// deliver is OnEvent's work: it builds env's message and publishes it
// (see publish), once the breaker, the stream's room, the connection and
// a publish slot allow.
func (r *Relay) deliver(ctx context.Context, env core.Envelope) error {
	msg, err := r.message(ctx, env)
	if err != nil {
		return err
	}
	if err := r.full.Allow(msg.Subject); err != nil {
		return err // its stream is full: a probe of it is under way or was just refused
	}
	if err := r.breaker.Allow(); err != nil {
		return err
	}
	if nc := r.js.Conn(); nc != nil && !nc.IsConnected() {
		// Publishing now would only fill nats.go's reconnect buffer with
		// a message whose ack cannot come before the reconnect.
		return r.breaker.Down(fmt.Errorf("nats connection %s: %w", strings.ToLower(nc.Status().String()), nats.ErrDisconnected))
	}
	if ctx.Err() != nil {
		return r.endedBeforePublish(ctx) // a free slot must not win Go's random select
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return r.endedBeforePublish(ctx)
	}
	defer func() { <-r.slots }()
	return r.publish(ctx, msg)
}

// endedBeforePublish puts off an event whose ctx ended before its
// publish began: the broker is slow, the event is not at fault. Every
// slot taken by publishes awaiting their ack says the broker is slow to
// ack; otherwise nats.go held the call (its connection's lock, behind a
// write to a slow link), and the slots are not blamed.
func (r *Relay) endedBeforePublish(ctx context.Context) error {
	if len(r.slots) == cap(r.slots) {
		return core.Unavailable(fmt.Errorf("natsjs: waiting for one of %d publish slots: %w", r.cfg.MaxInFlight, ctxerr.Of(ctx)), r.cfg.Breaker.RetryAfter)
	}
	return core.Unavailable(fmt.Errorf("natsjs: the listener's deadline passed before the publish began (the NATS connection was busy): %w", ctxerr.Of(ctx)), r.cfg.Breaker.RetryAfter)
}

// brokerName is the default name of a relay over nc: "nats jetstream"
// and the address of the server it is connected to, or else of the first
// server it was given (it may not be connected yet), without credentials
// (a user name would give the relays of one server several names).
func brokerName(nc *nats.Conn) string {
	const kind = "nats jetstream"
	if nc == nil {
		return kind
	}
	if u := nc.ConnectedUrl(); u != "" {
		return kind + " " + RedactURL(u)
	}
	if servers := nc.Servers(); len(servers) > 0 {
		return kind + " " + RedactURL(servers[0])
	}
	return kind
}

// message builds the NATS message of env: subject, headers (the trace
// context of ctx last, with a Propagator, which cannot replace the
// metadata headers; those NATS cannot carry
// verbatim inside HeaderEncoded), the Nats-Msg-Id of its id (see msgID),
// payload.
func (r *Relay) message(ctx context.Context, env core.Envelope) (*nats.Msg, error) {
	var subject string
	if r.cfg.SubjectFunc != nil {
		s, err := r.cfg.SubjectFunc(env)
		if err != nil {
			return nil, fmt.Errorf("natsjs: SubjectFunc for event %s: %w", env.ID(), err)
		}
		subject = s
	} else {
		subject = r.subject.Expand(env)
	}
	if err := ValidateSubject(subject); err != nil {
		return nil, fmt.Errorf("natsjs: event %s (type %s): %w", env.ID(), env.Type(), err)
	}
	if len(subject) > r.maxSubject {
		return nil, fmt.Errorf("natsjs: event %s (type %s): %w: %d bytes, longer than %d: with the connection's inbox prefix (nats.CustomInboxPrefix) the publish line would pass nats-server's max_control_line (4096 bytes by default), and the server would close the connection",
			env.ID(), env.Type(), ErrInvalidSubject, len(subject), r.maxSubject)
	}
	msg := nats.NewMsg(subject)
	hs := headerSetter{msg: msg, empty: env.PayloadLen() == 0}
	relay.Headers(env, hs.set)
	if r.cfg.Propagator != nil {
		r.cfg.Propagator.InjectHeaders(ctx, hs.setInjected)
	}
	if err := hs.finish(); err != nil {
		return nil, fmt.Errorf("natsjs: event %s (type %s): %w", env.ID(), env.Type(), err)
	}
	msg.Header.Set(jetstream.MsgIDHeader, msgID(env.ID()))
	msg.Data = env.RawPayload()
	return msg, nil
}

// headerBytes is the size of h as nats.go sends it: "NATS/1.0\r\n", a
// "key: value\r\n" line per value, "\r\n" (what max_payload counts
// besides the payload).
func headerBytes(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// isNATSHeader reports whether k is in the "Nats-" namespace, where
// JetStream reads control headers (expected sequence, rollup, TTL). An
// event header there could purge or refuse stream contents, so the relay
// drops it.
func isNATSHeader(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "nats-")
}

// publish sends msg and waits for its ack, AckTimeout or ctx, whichever
// comes first. It publishes as a request (jetstream.PublishMsg), whose
// reply nats.go forgets when the wait ends: an ack that never comes (a
// refusal the server answers with no ack, a stream with NoAck, a plain
// subscriber) leaves nothing behind. (An asynchronous publish left it
// pending in the JetStream context until a reconnect: 4000 such refusals
// filled the context's default bound and every later publish was put off,
// for ever.)
func (r *Relay) publish(ctx context.Context, msg *nats.Msg) error {
	attempt := r.breaker.Attempt()
	mark := r.full.Mark()    // its ack ends no full incident begun since it started
	lastErr := r.lastError() // a refusal of this publish is a newer one
	denied := r.denials.mark()
	fail := func(err error) error {
		res := r.classify(ctx, attempt, pubFailure{subject: msg.Subject, size: msg.Size(), lastErr: lastErr, denied: denied}, err)
		if errors.Is(res, ErrRejected) {
			attempt.Up() // refused for the message's sake: the broker answers
		}
		return res
	}
	if nc := r.js.Conn(); nc != nil && nc.MaxPayload() > 0 {
		// Refused here, as nats.go would: a request it refuses to send
		// leaves its reply's entry behind for the connection's life.
		if n := int64(len(msg.Data) + headerBytes(msg.Header)); n > nc.MaxPayload() {
			return fail(fmt.Errorf("a message of %d bytes (payload and headers), over the server's max_payload of %d: %w", n, nc.MaxPayload(), nats.ErrMaxPayload))
		}
	}
	wait, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
	defer cancel()
	l := r.links.cur.Load()
	if l != nil {
		defer context.AfterFunc(l.ctx, cancel)()
	}
	_, err := r.js.PublishMsg(wait, msg, r.pubOpts...)
	switch {
	case err == nil:
		attempt.Up()
		r.full.AcceptedSince(msg.Subject, mark)
		return nil
	case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
		return fail(err)
	case ctx.Err() == nil && l.dropped():
		return fail(fmt.Errorf("the connection dropped before the ack came: %w", nats.ErrDisconnected))
	case ctx.Err() == nil:
		// Down through attempt: a publish that outlived the outage its
		// ack was lost in begins no new one.
		return fail(fmt.Errorf("%w within AckTimeout %v", ErrNoAck, r.cfg.AckTimeout))
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return attempt.Down(fmt.Errorf("%w before the listener's deadline: %w", ErrNoAck, ctxerr.Of(ctx)))
	default:
		return fmt.Errorf("natsjs: publish to %q interrupted before its ack: %w", msg.Subject, ctxerr.Of(ctx))
	}
}

// enter counts an OnEvent call in; false once the relay is closed.
func (r *Relay) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.active++
	return true
}

// leave counts an OnEvent call out.
func (r *Relay) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	r.signalDrained()
}

// signalDrained closes drained once closed and idle; r.mu must be held.
func (r *Relay) signalDrained() {
	if r.closed && r.active == 0 {
		select {
		case <-r.drained:
		default:
			close(r.drained)
		}
	}
}

// Close stops the relay and waits until every OnEvent call under way has
// its outcome (ack, refusal, AckTimeout or its listener's ctx). An OnEvent
// called from then on publishes nothing and returns a core.Unavailable
// error wrapping ErrClosed, so events still dispatched are put off
// without charging an attempt. If ctx ends first Close returns ctx's
// error; the calls under way still end on their own, within their
// listener's ctx: at their ack or AckTimeout, or, when the relay then asks
// the JetStream API why an ack did not come (see Config.AckTimeout), once
// it answered, within AckTimeout more. Calling it again waits again. A nil
// ctx returns core.ErrNilContext and closes nothing. Close
// neither closes the JetStream context nor the NATS connection, which
// belong to the caller; close the outbox first, so no event is still
// being delivered.
func (r *Relay) Close(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	r.mu.Lock()
	r.closed = true
	r.signalDrained()
	r.mu.Unlock()
	// A closed relay waits on no broker: its metrics say so (see
	// Config.Metrics), whatever the calls still under way find.
	defer r.full.Retire()
	defer r.breaker.Retire()
	defer r.denials.stop()
	defer r.stopLinks()
	return engine.Wait(ctx, r.drained) // idle: nil, whatever ctx says
}
