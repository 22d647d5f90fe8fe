package natsjs

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/relay"
)

// Errors a publish fails with. Each is wrapped with the subject and the
// cause from nats.go; match them with errors.Is.
var (
	// ErrRejected reports a message JetStream or the NATS client refused
	// for the event's own sake: no stream for its subject (also
	// ErrNoStream), larger than the server's max_payload or the stream's
	// MaxMsgSize, a sealed stream, an ExpectStream mismatch. A normal
	// failure: the event is retried and ends DEAD after MaxAttempts.
	ErrRejected = errors.New("natsjs: JetStream refused the message")
	// ErrNoStream reports a subject no stream listens on, found out while
	// the connection and the JetStream API were up. It comes wrapped with
	// ErrRejected.
	ErrNoStream = errors.New("natsjs: no stream listens on the subject")
	// ErrNoAck reports a publish JetStream did not acknowledge within
	// AckTimeout or the listener's deadline. It comes inside a
	// core.Unavailable error: the event is put off, no attempt charged.
	ErrNoAck = errors.New("natsjs: no acknowledgement from JetStream")
)

// outageErrors are the nats.go errors that say the broker cannot be
// reached, whatever the message.
var outageErrors = []error{
	nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrConnectionReconnecting,
	nats.ErrDisconnected, nats.ErrReconnectBufExceeded, nats.ErrNoServers, nats.ErrInvalidConnection,
	nats.ErrTimeout, nats.ErrStaleConnection,
	jetstream.ErrConnectionClosed, jetstream.ErrAsyncPublishTimeout, jetstream.ErrTooManyStalledMsgs,
	jetstream.ErrJetStreamPublisherClosed, jetstream.ErrJetStreamNotEnabled, jetstream.ErrJetStreamNotEnabledForAccount,
}

// classify turns a failed publish, started with attempt, into the
// listener's result: the breaker's core.Unavailable error for an outage
// (recorded through attempt, so a failure that outlived the outage it
// belongs to begins no new one), an error wrapping ErrRejected for a
// refusal.
func (r *Relay) classify(ctx context.Context, attempt relay.Attempt, subject string, err error) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return r.noResponders(ctx, attempt, subject, err)
	}
	for _, o := range outageErrors {
		if errors.Is(err, o) {
			return attempt.Down(fmt.Errorf("natsjs: publish to %q: %w", subject, err))
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code >= 500 {
		// 503 and friends: JetStream is there but cannot take messages
		// now (no leader, storage failure, stream full with DiscardNew).
		return attempt.Down(fmt.Errorf("natsjs: publish to %q: JetStream unavailable: %w", subject, err))
	}
	if !r.connected() {
		return attempt.Down(fmt.Errorf("natsjs: publish to %q while disconnected: %w", subject, err))
	}
	return fmt.Errorf("%w: subject %q: %w", ErrRejected, subject, err)
}

// noResponders tells the two meanings of "no responders" apart. Nothing
// answered the publish: either no stream listens on the subject (the
// event's fault: a rejection) or JetStream is not there (an outage). The
// JetStream API, asked which stream listens on the subject, decides.
func (r *Relay) noResponders(ctx context.Context, attempt relay.Attempt, subject string, err error) error {
	if !r.connected() {
		return attempt.Down(fmt.Errorf("natsjs: publish to %q: %w", subject, err))
	}
	lookup, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
	defer cancel()
	stream, lerr := r.js.StreamNameBySubject(lookup, subject)
	switch {
	case errors.Is(lerr, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: %w: subject %q: %w", ErrRejected, ErrNoStream, subject, err)
	case lerr != nil:
		return attempt.Down(fmt.Errorf("natsjs: publish to %q got no response and the JetStream API did not answer: %w", subject, errors.Join(err, lerr)))
	default:
		return attempt.Down(fmt.Errorf("natsjs: stream %s listens on %q but did not answer: %w", stream, subject, err))
	}
}

// connected reports whether the NATS connection is up.
func (r *Relay) connected() bool {
	nc := r.js.Conn()
	return nc == nil || nc.IsConnected()
}
