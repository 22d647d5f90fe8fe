package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/relay"
)

// Errors a publish fails with. Each is wrapped with the subject and the
// cause from nats.go; match them with errors.Is.
var (
	// ErrRejected reports a message JetStream or the NATS client refused
	// for the event's own sake: no stream for its subject (also
	// ErrNoStream), a stream that never acknowledges (also
	// ErrStreamNoAck), larger than the server's max_payload, the stream's
	// MaxMsgSize or (refused as "maximum bytes exceeded") the stream's
	// MaxBytes, a sealed stream, an ExpectStream mismatch. A
	// normal failure: the event is retried and ends DEAD after
	// MaxAttempts.
	ErrRejected = errors.New("natsjs: JetStream refused the message")
	// ErrNoStream reports a subject no stream listens on, found out while
	// the connection and the JetStream API were up: nothing answered the
	// publish ("no responders"), or only a plain NATS subscriber received
	// it and no ack came within AckTimeout. It comes wrapped with
	// ErrRejected.
	ErrNoStream = errors.New("natsjs: no stream listens on the subject")
	// ErrStreamNoAck reports a subject whose stream is configured with
	// NoAck: it stores a message without acknowledging it, so the relay
	// cannot know the event was stored (it may well be: each retry stores
	// it again, unless within the stream's duplicate window). Found out
	// once AckTimeout passed without an ack, by asking the JetStream API.
	// It comes wrapped with ErrRejected: a normal failure, retried and
	// DEAD after MaxAttempts. A stream the relay publishes to must
	// acknowledge (NoAck false, the default).
	ErrStreamNoAck = errors.New("natsjs: the stream listening on the subject does not acknowledge (NoAck)")
	// ErrNoAck reports a publish JetStream did not acknowledge within
	// AckTimeout or the listener's deadline. It comes inside a
	// core.Unavailable error: the event is put off, no attempt charged;
	// after AckTimeout with the connection up, only once the JetStream
	// API named a stream without NoAck for the subject (otherwise it
	// comes with ErrNoStream or ErrStreamNoAck, a normal failure).
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

// classify turns a failed publish of a message of size bytes (subject,
// headers and payload), started with attempt, into the listener's result:
// the breaker's core.Unavailable error for an outage (recorded through
// attempt, so a failure that outlived the outage it belongs to begins no
// new one), relay.Full's for a full destination, an error wrapping
// ErrRejected for a refusal.
func (r *Relay) classify(ctx context.Context, attempt relay.Attempt, f pubFailure, err error) error {
	subject, size := f.subject, f.size
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return r.noResponders(ctx, attempt, subject, err)
	}
	if errors.Is(err, ErrNoAck) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		return r.noAck(ctx, attempt, f, err)
	}
	for _, o := range outageErrors {
		if errors.Is(err, o) {
			return attempt.Down(fmt.Errorf("natsjs: publish to %q: %w", subject, err))
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && isStreamFull(apiErr) && r.neverFits(ctx, subject, size) {
		// No room the consumers could make would take it: refused for
		// the event's own sake.
		return fmt.Errorf("%w: subject %q: the message (%d bytes) is larger than its stream's MaxBytes: %w", ErrRejected, subject, size, err)
	}
	if errors.As(err, &apiErr) && isAccountFull(apiErr) {
		// The account's JetStream storage holds all it may: no fault of
		// the event's, and the broker answers. Waits, uncharged, as for
		// a full stream, until room is made.
		attempt.Up()
		return r.full.Refused(subject, fmt.Errorf("natsjs: publish to %q: the account's JetStream storage is full: %w", subject, err), func() string {
			return "(the account's JetStream storage)"
		})
	}
	if errors.As(err, &apiErr) && (isSubjectFull(apiErr) || isStreamFull(apiErr) || isServerStoreFull(apiErr)) {
		// The stream holds all it may and discards new messages (or,
		// with the per-subject limit, all it may of this subject; or the
		// server's storage of the stream's kind, memory or file, holds
		// all the server may keep, and streams of the other kind go on):
		// the broker answers, and the other streams (subjects) take
		// theirs. The event waits, uncharged, until room is made, without
		// opening the breaker, which would put off the events of every
		// stream, each retry of this one beginning a new outage; the
		// subject's next events try one per ProbeInterval (relay.Full).
		attempt.Up()
		what := "the stream is full"
		switch {
		case isSubjectFull(apiErr):
			what = "the stream takes no more messages on this subject"
		case isServerStoreFull(apiErr):
			what = "the server's JetStream storage of the stream's kind is full (max_memory_store or max_file_store)"
		}
		return r.full.Refused(subject, fmt.Errorf("natsjs: publish to %q: %s: %w", subject, what, err), func() string {
			if name, err := r.streamOf(ctx, subject); err == nil {
				return name
			}
			return "(unknown: the JetStream API did not say which stream listens on the subject)"
		})
	}
	if errors.As(err, &apiErr) && apiErr.Code >= 500 {
		// 503 and friends: JetStream is there but cannot take messages
		// now (no leader, storage failure).
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
	stream, lerr := r.streamOf(ctx, subject)
	switch {
	case errors.Is(lerr, jetstream.ErrStreamNotFound):
		return fmt.Errorf("%w: %w: subject %q: %w", ErrRejected, ErrNoStream, subject, err)
	case lerr != nil:
		return attempt.Down(fmt.Errorf("natsjs: publish to %q got no response and the JetStream API did not answer: %w", subject, errors.Join(err, lerr)))
	default:
		return attempt.Down(fmt.Errorf("natsjs: stream %s listens on %q but did not answer: %w", stream, subject, err))
	}
}

// noAck tells the meanings of a publish that got no ack in time (err:
// AckTimeout; nats.go's own asynchronous publish timeout, kept for a
// JetStream context wrapping another) apart. Something received
// it, or it would have got "no responders": a stream that did not
// answer (an outage), a stream with NoAck, which never answers, or only
// a plain NATS subscriber, no stream at all (both the event's fault). With
// the connection up, the JetStream API, asked which stream listens on the
// subject and how, decides; it is asked only here, never for a publish
// acknowledged in time, bounded by AckTimeout and ctx, and by one publish
// at a time: once one found an outage (the breaker is down) the others
// that timed out with it, and the probes of that outage, ask nothing.
func (r *Relay) noAck(ctx context.Context, attempt relay.Attempt, f pubFailure, err error) error {
	subject := f.subject
	down := func(err error) error { return attempt.Down(fmt.Errorf("natsjs: publish to %q: %w", subject, err)) }
	if !r.connected() {
		return down(err)
	}
	if perr := r.publishDenied(f); perr != nil {
		return fmt.Errorf("%w: subject %q: the server refused the publish: %w", ErrRejected, subject, errors.Join(perr, err))
	}
	select {
	case r.lookups <- struct{}{}:
		defer func() { <-r.lookups }()
	case <-ctx.Done():
		return down(err)
	}
	if outage, _ := r.breaker.State(); outage {
		return down(err)
	}
	lookup, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
	defer cancel()
	name, lerr := r.js.StreamNameBySubject(lookup, subject)
	if errors.Is(lerr, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %w: subject %q (only a plain NATS subscriber, if any, received it): %w", ErrRejected, ErrNoStream, subject, err)
	}
	if lerr != nil {
		return down(fmt.Errorf("%w; and the JetStream API did not answer which stream listens on it: %w", err, lerr))
	}
	st, lerr := r.js.Stream(lookup, name)
	if lerr != nil {
		return down(fmt.Errorf("%w; and the JetStream API did not answer about stream %s: %w", err, name, lerr))
	}
	if st.CachedInfo().Config.NoAck {
		return fmt.Errorf("%w: %w: stream %s, subject %q: %w", ErrRejected, ErrStreamNoAck, name, subject, err)
	}
	return down(fmt.Errorf("stream %s listens on it but did not acknowledge: %w", name, err))
}

// pubFailure is what classify knows of a failed publish: its subject,
// the size of its message (subject, headers and payload), the
// connection's last error when it began and the refusals recorded by then
// (denials.mark).
type pubFailure struct {
	subject string
	size    int
	lastErr error
	denied  uint64
}

// lastError returns the connection's last error (nil without one).
func (r *Relay) lastError() error {
	if nc := r.js.Conn(); nc != nil {
		return nc.LastError()
	}
	return nil
}

// publishDenied returns the server's refusal to let this connection
// publish to f's subject (a permissions violation: the server drops the
// message and answers with an error of the connection instead of an ack)
// that came after f began: one the relay's error handler recorded, or,
// when that handler was replaced, the connection's last error if it is
// such a refusal and newer than the last error when f began (nats.go keeps
// the last error until a reconnect: an older refusal, from before the
// permissions were fixed, says nothing of this publish); nil otherwise.
func (r *Relay) publishDenied(f pubFailure) error {
	if err := r.denials.since(f.subject, f.denied); err != nil {
		return err
	}
	err := r.lastError()
	if err == nil || err == f.lastErr || !errors.Is(err, nats.ErrPermissionViolation) ||
		!strings.Contains(err.Error(), "Publish to \""+f.subject+"\"") {
		return nil
	}
	return err
}

// connected reports whether the NATS connection is up.
func (r *Relay) connected() bool {
	nc := r.js.Conn()
	return nc == nil || nc.IsConnected()
}

// streamOf asks the JetStream API which stream listens on subject, within
// AckTimeout.
func (r *Relay) streamOf(ctx context.Context, subject string) (string, error) {
	lookup, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
	defer cancel()
	return r.js.StreamNameBySubject(lookup, subject)
}

// neverFits reports whether a message of size bytes, refused because its
// stream on subject holds all the bytes it may, could never be stored:
// it is larger than the stream's MaxBytes. Asked of the JetStream API
// (within AckTimeout) only for such a refusal; unknown counts as false.
func (r *Relay) neverFits(ctx context.Context, subject string, size int) bool {
	lookup, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
	defer cancel()
	name, err := r.js.StreamNameBySubject(lookup, subject)
	if err != nil {
		return false
	}
	st, err := r.js.Stream(lookup, name)
	if err != nil {
		return false
	}
	limit := st.CachedInfo().Config.MaxBytes
	return limit > 0 && int64(size) > limit
}

// isAccountFull reports whether err is JetStream's refusal of a message
// because the account's JetStream storage holds all it may: 400
// "resource limits exceeded for account" (JetStream error code 10002).
// The server's own storage running out (503 "insufficient resources") is
// an outage, as every 5xx.
func isAccountFull(apiErr *jetstream.APIError) bool {
	return apiErr.ErrorCode == 10002 || strings.Contains(apiErr.Description, "resource limits exceeded for account")
}

// isServerStoreFull reports whether err is JetStream's refusal of a
// message because the server's storage of the stream's kind holds all
// the server may keep (max_memory_store, max_file_store): 503
// "insufficient resources", error code 10023.
func isServerStoreFull(apiErr *jetstream.APIError) bool {
	return apiErr.Code == 503 && (apiErr.ErrorCode == 10023 || strings.Contains(apiErr.Description, "insufficient resources"))
}

// isSubjectFull reports whether err is JetStream's refusal of a message
// because its stream holds all it may of the message's subject
// (MaxMsgsPerSubject with DiscardNewPerSubject): 503 "maximum messages
// per subject exceeded".
func isSubjectFull(apiErr *jetstream.APIError) bool {
	return apiErr.Code == 503 && strings.Contains(apiErr.Description, "maximum messages per subject exceeded")
}

// isStreamFull reports whether err is JetStream's refusal of a message
// because its stream holds all it may (MaxMsgs or MaxBytes) and discards
// new messages (Discard: DiscardNew): 503 "maximum messages exceeded" or
// "maximum bytes exceeded".
func isStreamFull(apiErr *jetstream.APIError) bool {
	return apiErr.Code == 503 &&
		(strings.Contains(apiErr.Description, "maximum messages exceeded") || strings.Contains(apiErr.Description, "maximum bytes exceeded"))
}
