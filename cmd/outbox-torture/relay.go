package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// Settings of the -relay natsjs runs.
const (
	// relayNATS and relayRabbitMQ are the brokers of -relay.
	relayNATS     = "natsjs"
	relayRabbitMQ = "rabbitmq"
	// streamDuplicates is the stream's duplicate window. Redeliveries (a
	// lease taken over after a SIGKILL, a retry after a deliberate
	// failure) come within seconds, far inside it, so every one must be
	// stored once: stream_duplicates must be 0.
	streamDuplicates = 2 * time.Minute
	// natsTimeout bounds each request of the parent to the JetStream API.
	natsTimeout = 10 * time.Second
)

// connectNATS connects to NATS at url, reconnecting forever (a child's
// relay puts events off while the connection is down), and returns the
// JetStream context.
func connectNATS(url, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", natsjs.RedactURL(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// runStream is the run's destination, made by the parent: every child
// relays every event to it, and the parent reads it back at the end. With
// -relay natsjs it is a JetStream stream, with -relay rabbitmq a durable
// queue bound to the run's exchange.
type runStream struct {
	name    string // the stream or queue name, for log lines
	addr    string // the broker's address without credentials, for log lines
	subject string // the children publish to <subject>.<type> (NATS) or to the exchange <subject> (RabbitMQ)
	// copyTo reads every message of the destination, in its order, into
	// the stream table (a position and the event id) and returns how many
	// it copied.
	copyTo func(ctx context.Context, db *sqlx.DB) (int, error)
	// close deletes the destination unless keep, and closes the
	// connection.
	close func(keep bool) error
}

// openStream creates the run's destination on the -relay broker kind at
// url.
func openStream(ctx context.Context, kind, url string) (*runStream, error) {
	if kind == relayRabbitMQ {
		return openRabbitQueue(ctx, url)
	}
	return openNATSStream(ctx, url)
}

// natsStream is the run's JetStream stream.
type natsStream struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	name    string // OUTBOX_TORTURE_<RANDOM>
	subject string // outbox-torture-<random>: the children publish to <subject>.<type>
}

// openNATSStream connects to url and creates the run's stream: file
// storage, a duplicate window of streamDuplicates, on the subjects
// outbox-torture-<random>.>.
func openNATSStream(ctx context.Context, url string) (*runStream, error) {
	nc, js, err := connectNATS(url, "outbox-torture")
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 5)
	if _, err := rand.Read(tok); err != nil {
		nc.Close()
		return nil, err
	}
	run := hex.EncodeToString(tok)
	s := &natsStream{nc: nc, js: js, name: "OUTBOX_TORTURE_" + strings.ToUpper(run), subject: "outbox-torture-" + run}
	cctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	if _, err := js.CreateStream(cctx, jetstream.StreamConfig{
		Name:       s.name,
		Subjects:   []string{s.subject + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: streamDuplicates,
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s at %s (is JetStream enabled?): %w", s.name, natsjs.RedactURL(url), err)
	}
	return &runStream{name: s.name, addr: natsjs.RedactURL(url), subject: s.subject, copyTo: s.copyTo, close: s.close}, nil
}

// copyTo reads every message of the stream, in stream order, into the
// stream table: its sequence and its Nats-Msg-Id (the event id). It
// returns how many messages it copied.
func (s *natsStream) copyTo(ctx context.Context, db *sqlx.DB) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	st, err := s.js.Stream(cctx, s.name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", s.name, err)
	}
	info, err := st.Info(cctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", s.name, err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return 0, nil
	}
	if info.State.Msgs != last-info.State.FirstSeq+1 {
		return 0, fmt.Errorf("stream %s holds %d messages from sequence %d to %d: some were removed", s.name, info.State.Msgs, info.State.FirstSeq, last)
	}
	cons, err := st.OrderedConsumer(cctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, fmt.Errorf("stream %s: ordered consumer: %w", s.name, err)
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	insert := tx.Rebind(insertStream)
	msgs, err := cons.Messages()
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", s.name, err)
	}
	defer msgs.Stop()
	copied := 0
	for seq := uint64(0); seq < last; {
		msg, err := msgs.Next(jetstream.NextMaxWait(natsTimeout))
		if err != nil {
			return 0, fmt.Errorf("stream %s: reading the message after sequence %d of %d: %w", s.name, seq, last, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return 0, fmt.Errorf("stream %s: message after sequence %d: %w", s.name, seq, err)
		}
		seq = meta.Sequence.Stream
		if _, err := tx.ExecContext(ctx, insert, seq, msg.Headers().Get(jetstream.MsgIDHeader)); err != nil {
			return 0, fmt.Errorf("record stream message %d: %w", seq, err)
		}
		copied++
	}
	return copied, tx.Commit()
}

// close deletes the stream unless keep, and closes the connection.
func (s *natsStream) close(keep bool) error {
	defer s.nc.Close()
	if keep {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	if err := s.js.DeleteStream(ctx, s.name); err != nil {
		return fmt.Errorf("delete stream %s: %w", s.name, err)
	}
	return nil
}

// childRelay is a child's relay to the run's destination.
type childRelay struct {
	relay core.Listener
	close func(ctx context.Context) error // the relay (after the outbox: it waits for the publishes under way), then the connection
}

// openChildRelay builds the child's relay of spec.Relay: natsjs publishing
// every event to <subject>.<type>, rabbitmq publishing it to the exchange
// <subject> with the event type as routing key.
func openChildRelay(spec childSpec, logger *slog.Logger) (*childRelay, error) {
	if spec.Relay == relayRabbitMQ {
		return openChildRabbitMQ(spec, logger)
	}
	nc, js, err := connectNATS(spec.RelayURL, fmt.Sprintf("outbox-torture child %d", spec.ID))
	if err != nil {
		return nil, err
	}
	r, err := natsjs.New(js, natsjs.Config{Subject: spec.RelaySubject + ".{type}", Logger: logger})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &childRelay{relay: r, close: func(ctx context.Context) error {
		err := r.Close(ctx)
		nc.Close()
		return err
	}}, nil
}
