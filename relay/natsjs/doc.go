// Package natsjs relays outbox events to NATS JetStream.
//
// A [Relay] is a core.Listener: register it on an outbox for the event
// types it should forward (or for all of them with RegisterAll) and every
// committed event is published to a JetStream stream. The event counts as
// delivered only once JetStream acknowledged it (a PubAck, which a stream
// sends after it stored the message), so at-least-once holds up to the
// stream. What the stream later drops it drops for good: a stream with
// limits and the default Discard: DiscardOld removes its oldest messages
// (a message larger than MaxBytes empties it, itself included), MaxAge
// expires them; use Discard: DiscardNew to have the relay wait instead.
// nats-server 2.9 (seen on 2.9.10) admits a message to a DiscardNew stream
// by its payload and headers but keeps it larger (subject and overhead
// added) and then trims the stream to MaxBytes: a message that nearly
// fills the stream is acknowledged and then removed, or removes an older
// one. Bound such a stream by MaxMsgs, or keep MaxBytes well above what
// its messages take.
//
//	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
//	js, err := jetstream.New(nc)
//	r, err := natsjs.New(js, natsjs.Config{Subject: "orders.{type}"})
//	ob.RegisterAll(r)
//
// Each message carries:
//
//   - the subject expanded from Config.Subject (a relay.Template) or
//     returned by Config.SubjectFunc, checked against the NATS subject
//     rules before anything is sent;
//   - the event id as "Nats-Msg-Id" (encoded when NATS cannot carry it as
//     it is: see Nats-Msg-Id below), so a stream with a duplicate window
//     (StreamConfig.Duplicates, 2 min by default) stores a redelivered event
//     once when it comes back within that window; the second publish is
//     acknowledged as a duplicate and counts as delivered. An event
//     published again later (its ack was lost in an outage longer than the
//     window; a crashed node published it and another took it over once its
//     lease ran out, Dispatcher.Lease after the publish) is stored again:
//     size Duplicates above Dispatcher.Lease plus Poller.Interval and for
//     the outages to ride out, or deduplicate in the consumer;
//   - the relay.Headers metadata ("Outbox-Event-Id", "Outbox-Event-Type",
//     ...) and the event's own headers, such as "traceparent", which a
//     consumer gets back exactly (see Headers below); the metadata is the
//     relay's: an event header with one of its names is dropped;
//   - the payload bytes, unchanged.
//
// # Headers
//
// NATS headers are MIME-like, and nats.go does not carry every header
// the outbox accepts: it refuses a message with a header name that holds
// anything but visible ASCII or one of "(),/:;<=>?@[\]{} (a space, a
// colon, a non-ASCII letter), turns CR and LF in a value into spaces and
// trims the spaces and tabs around a value. So the relay sends each header
// that NATS carries verbatim as a NATS header of its own, as it is, and
// puts the others (the event's own and the metadata ones, such as the
// Outbox-Aggregate-Id of the aggregate id "agg\nid") into one extra header,
// [HeaderEncoded], a JSON object of just those names and values. A
// message whose headers all travel verbatim, the usual case, has no
// HeaderEncoded and is what it always was. A consumer gets every header
// back exactly with [DecodeHeaders]:
//
//	h, err := natsjs.DecodeHeaders(msg.Headers())
//	aggregateID := h.Get(relay.HeaderAggregateID)
//
// Headers in the "Nats-" namespace, where JetStream reads its controls,
// are dropped, the event's and a Propagator's alike, and so are those
// named like a relay metadata header (in any case, such as an
// "Outbox-Event-Id" copied from an upstream message): Outbox-Event-Id is
// always the event's own id. A header whose name
// or value merely mentions "Nats-" (in any case) travels inside
// HeaderEncoded, where that text is escaped: nats-server finds its control
// headers by searching the text of the whole header block, so a value
// such as "Nats-Msg-Id: x" in another header could be taken for one (on
// nats-server 2.9 it turned off the message's duplicate detection).
//
// # Nats-Msg-Id
//
// The Nats-Msg-Id of an event is its id, as it is, when NATS carries
// that verbatim and it does not start with "~b64:": always for the
// default ids (ULIDs), and for any id without CR or LF, without a space
// or a tab at either end and not mentioning "Nats-". nats.go would change
// the others (" x" would arrive as "x", "a\nb" as "a b": two events would
// share a Msg-Id and JetStream would drop the later one as a duplicate),
// or the server could read a control header in them, so they are sent as
// "~b64:" and the id's bytes in unpadded standard base64 (RFC 4648,
// section 4, whose alphabet has no dash), " x" as "~b64:IHg"; so is an id
// that starts with "~b64:", which could otherwise spell the Msg-Id of
// another id.
// So a redelivered event has the Msg-Id it had, and two events have the
// same Msg-Id only if they have the same id. A consumer that deduplicates
// on Nats-Msg-Id deduplicates on the event id, one to one; one that needs
// the event id itself reads it, exactly, from Outbox-Event-Id through
// DecodeHeaders:
//
//	h, err := natsjs.DecodeHeaders(msg.Headers())
//	eventID := h.Get(relay.HeaderEventID)
//
// # Failures
//
// A message JetStream refuses for the event's own sake (no stream listens
// on its subject, the message is larger than the server or stream allows,
// the stream is sealed, the subject is invalid) is a normal failure: the
// listener returns an error, the dispatcher retries the event with backoff
// and marks it DEAD after MaxAttempts. So is a message that got no ack
// within AckTimeout because no stream listens on its subject (only a plain
// NATS subscriber received it: [ErrNoStream]) or because its stream has
// NoAck ([ErrStreamNoAck]): the relay asks the JetStream API once the
// ack is late, never for a message acknowledged in time. So is a publish
// the server refused for the connection's permissions (it answers with
// a permissions violation instead of an ack): once AckTimeout passed, an
// [ErrRejected] that wraps nats.ErrPermissionViolation. The server sends
// that refusal as an error of the connection, not as an answer to the
// publish: the relay records each one through the connection's error
// handler (see [New]), so publishes refused at the same moment on several
// subjects are each a refusal.
//
// When JetStream cannot be reached (the connection is down or
// reconnecting, the stream that listens on the subject does not
// acknowledge within AckTimeout, the JetStream API itself does not answer,
// JetStream answers 503 because it cannot take messages now) the relay
// returns a core.Unavailable error through a relay.Breaker: the event is put off
// without charging an attempt, and events flow again as soon as a publish
// is acknowledged. One ERROR is logged when an incident begins and one
// INFO "broker recovered" line once publishes have been acknowledged for
// the breaker's Settle (10 s by default) after its last outage, so a link
// that fails and recovers every few seconds logs one incident.
// During the outage the breaker lets one probe event through per
// ProbeInterval and puts the others off at once, so events never go DEAD
// because the broker was down and the reconnect buffer of nats.go does not
// fill with messages whose acks may never come.
//
// A subject the stream takes no more messages on (MaxMsgsPerSubject with
// DiscardNewPerSubject: 503 "maximum messages per subject exceeded") is
// no outage: its event is put off (core.Unavailable, no attempt charged)
// until room is made on that subject, and the events of other subjects
// are published meanwhile; the stream's incident is logged and counted as
// below.
//
// Nor is a stream full with Discard: DiscardNew (MaxMsgs or MaxBytes: 503
// "maximum messages exceeded" or "maximum bytes exceeded"): its events
// are put off, uncharged, until room is made (a consumer acks, a purge,
// MaxAge), and the other streams' events are published meanwhile; one
// event per Breaker.ProbeInterval of each refused subject tries the
// stream, the subject's others are put off without a publish. Each
// such incident logs one ERROR naming the stream when its first event is
// refused and one INFO "full destination takes messages again" (with how long
// it was full and how many times an event was put off) once every subject
// refused meanwhile was accepted again. A message larger than the stream's
// MaxBytes, which no room made could take, is a refusal instead
// (ErrRejected). The account's JetStream storage full (400 "resource
// limits exceeded for account") waits as a full stream does, and so does
// the server's storage of the stream's kind (503 "insufficient
// resources": max_memory_store or max_file_store reached), subject by
// subject: streams of the other kind go on.
//
// # Order
//
// The relay returns only after the stream's ack, and the dispatcher hands
// out a key's next ordered event only after the previous one's outcome is
// written, so ordered events (see the outbox's "Ordered delivery") reach the
// stream in per-key order without anything more.
package natsjs
