package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outbox-go/outbox/relay/natsjs"
)

// NATS settings of the relay scenarios.
const (
	// natsDuplicates is the stream's duplicate window: longer than any
	// redelivery of the scenario, so each event is stored once.
	natsDuplicates = 2 * time.Minute
)

func init() {
	relayKinds["natsjs"] = relayKind{defaultURL: nats.DefaultURL, check: checkNATSURL, forLog: natsjs.RedactURL, open: openNATSJS}
}

// natsURLs parses a nats.go server list: comma-separated URLs, each with
// "nats://" when it has no scheme, as nats.Connect reads it.
func natsURLs(list string) ([]*neturl.URL, error) {
	var urls []*neturl.URL
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := neturl.Parse(s)
		if err != nil {
			return nil, urlParseError(err)
		}
		if u.Host == "" {
			return nil, errors.New("a server address without a host")
		}
		switch strings.ToLower(u.Scheme) {
		case "nats", "tls", "ws", "wss":
		default:
			return nil, fmt.Errorf("scheme %q: want nats://, tls://, ws:// or wss://", u.Scheme)
		}
		if err := checkPort(u.Port()); err != nil {
			return nil, err
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// checkNATSURL is the natsjs relayKind.check.
func checkNATSURL(list string) error {
	_, err := natsURLs(list)
	return err
}

// openNATSJS connects to NATS at url and creates the file-storage stream
// OUTBOX_BENCH_<RUN> on the subjects outbox-bench-<run>.> with a 2 minute
// duplicate window, and a natsjs relay publishing every event to
// outbox-bench-<run>.<type>. No consumer is needed: the stream keeps the
// messages until it is deleted at the end of the scenario.
func openNATSJS(ctx context.Context, url, run string, log *slog.Logger) (*relayTarget, error) {
	nc, err := nats.Connect(url, nats.Name("outbox-bench"), nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	name := "OUTBOX_BENCH_" + strings.ToUpper(run)
	subject := "outbox-bench-" + run
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{subject + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: natsDuplicates,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s (is JetStream enabled?): %w", name, err)
	}
	r, err := natsjs.New(js, natsjs.Config{Subject: subject + ".{type}", Logger: log})
	if err != nil {
		err = errors.Join(err, deleteStream(js, name))
		nc.Close()
		return nil, err
	}
	return &relayTarget{
		listener: r,
		notes:    []string{"stream=" + name, "storage=file", fmt.Sprintf("duplicates=%v", natsDuplicates)},
		stored: func(ctx context.Context) (int64, error) {
			info, err := stream.Info(ctx)
			if err != nil {
				return 0, err
			}
			return int64(info.State.Msgs), nil
		},
		close: func(ctx context.Context) error {
			err := errors.Join(r.Close(ctx), deleteStream(js, name))
			nc.Close()
			return err
		},
	}, nil
}

// deleteStream deletes the scenario's stream.
func deleteStream(js jetstream.JetStream, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, name); err != nil {
		return fmt.Errorf("delete stream %s: %w", name, err)
	}
	return nil
}
