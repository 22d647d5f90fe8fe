package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	neturl "net/url"
	"slices"
	"strconv"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/dispatcher"
)

// relayCloseTimeout bounds the teardown of a scenario's broker
// destination (closing the relay, deleting the stream or queue), which
// runs even after an interrupt.
const relayCloseTimeout = 30 * time.Second

// A relayKind is a broker the relay scenarios can publish to (-relay
// NAME). Each kind lives in its own file (relay_<name>.go) and adds itself
// to relayKinds from an init function.
type relayKind struct {
	// defaultURL is the broker's address without -relay-url.
	defaultURL string
	// check parses url as open will, so that a malformed -relay-url is a
	// bad flag (exit status 2) before any scenario runs. Its error does
	// not repeat url, which may hold a password.
	check func(url string) error
	// forLog returns url without user names, passwords or tokens, for
	// messages.
	forLog func(url string) string
	// open connects to the broker at url, creates a destination that only
	// this scenario uses (names derived from run, a random token), and
	// returns the relay publishing to it.
	open func(ctx context.Context, url, run string, log *slog.Logger) (*relayTarget, error)
}

// relayKinds are the brokers of -relay, by name.
var relayKinds = map[string]relayKind{}

// relayNames returns the names of the known brokers, sorted.
func relayNames() []string { return slices.Sorted(maps.Keys(relayKinds)) }

// relayTarget is a relay set up for one scenario.
type relayTarget struct {
	// listener is the relay: registered with RegisterAll, it returns nil
	// once the broker acknowledged the event.
	listener outbox.Listener
	// notes describe the destination for the scenario's line (stream or
	// queue name, storage, how the queue is drained).
	notes []string
	// stored, when set, returns how many messages the destination
	// received; the scenario fails when the broker has fewer than the
	// events it acknowledged.
	stored func(ctx context.Context) (int64, error)
	// close closes the relay (after the outbox), deletes the destination
	// and closes the connection.
	close func(ctx context.Context) error
	// floor, when set, measures the broker floor on the same destination
	// right after the relay scenario: n messages like the relay's from a
	// minimal publisher, as fast as the broker confirms them, in
	// messages/s; notes describe how they were sent. workers is the
	// relay's concurrency (its dispatcher workers).
	floor func(ctx context.Context, n, workers int) (rate float64, notes []string, err error)
}

// openRelay sets up the -relay broker for one scenario.
func (b *bench) openRelay(ctx context.Context) (*relayTarget, error) {
	kind := relayKinds[b.opts.relay]
	tok := make([]byte, 5)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	t, err := kind.open(ctx, b.opts.relayURL, hex.EncodeToString(tok), b.log)
	if err != nil {
		return nil, fmt.Errorf("relay %s at %s: %w", b.opts.relay, kind.forLog(b.opts.relayURL), err)
	}
	return t, nil
}

// closeRelay tears the scenario's destination down, warning on failure.
func (b *bench) closeRelay(t *relayTarget) {
	ctx, cancel := context.WithTimeout(context.Background(), relayCloseTimeout)
	defer cancel()
	if err := t.close(ctx); err != nil {
		b.warn("relay cleanup: %v", err)
	}
}

// relayTune is the dispatcher setting of the relay scenarios: the hot
// queue holds every event of the scenario. A relay slower than the
// publishers would otherwise overflow the default hot queue (1000 events)
// and leave the rest to the poller, which claims them at its own pace
// (BatchSize per BacklogInterval): the scenario would measure the poller,
// not the relay. The workers are -relay-workers.
func (b *bench) relayTune(events int) (func(*dispatcher.Config), []string) {
	capacity := max(events, 1000)
	notes := []string{fmt.Sprintf("hot_capacity=%d", capacity)}
	if b.opts.relayWorkers != b.opts.workers {
		notes = append(notes, fmt.Sprintf("dispatcher_workers=%d", b.opts.relayWorkers))
	}
	return func(c *dispatcher.Config) {
		c.HotCapacity = capacity
		c.Workers = b.opts.relayWorkers
	}, notes
}

// runRelay is end_to_end with the relay registered (RegisterAll) instead
// of the no-op listener: from the first publish until every row is DONE,
// that is until the broker acknowledged every event.
func (b *bench) runRelay(ctx context.Context) (result, error) {
	t, err := b.openRelay(ctx)
	if err != nil {
		return result{}, err
	}
	defer b.closeRelay(t)
	tune, notes := b.relayTune(b.opts.warmup + b.opts.n)
	r, h, err := b.endToEndVia(ctx, scenarioRelay, b.opts.n, func(int) string { return "" }, outboxSetup{all: t.listener, tune: tune})
	if err != nil {
		return r, err
	}
	r.Relay = b.opts.relay
	r.Workers = b.opts.relayWorkers
	r.Notes = append(append(slices.Clone(t.notes), notes...), r.Notes...)
	if err := checkStored(ctx, t, b.opts.warmup+b.opts.n); err != nil {
		return r, err
	}
	r.ColdEnqueued = ptr(h.m.coldEnqueued.Load())
	if t.floor != nil {
		rate, notes, err := t.floor(ctx, b.opts.n, b.opts.relayWorkers)
		if err != nil {
			return r, fmt.Errorf("broker floor: %w", err)
		}
		r.relayFloor = rate
		r.Notes = append(r.Notes, fmt.Sprintf("broker_floor/s=%.0f", rate), fmt.Sprintf("relay/broker_floor=%.3f", r.rate/rate))
		r.Notes = append(r.Notes, notes...)
	}
	return r, nil
}

// runRelayLatency is latency through the relay: commit returned → the
// relay's OnEvent returned nil (the broker acknowledged the event),
// publishers paced at half the relay rate, N/4 events (at most ~5 s).
func (b *bench) runRelayLatency(ctx context.Context) (result, error) {
	target := b.relayRate / 2
	if target <= 0 {
		return result{}, errors.New("no relay rate to pace by")
	}
	count := max(1, min(b.opts.n/4, int(target*latencyMaxDuration.Seconds())))
	t, err := b.openRelay(ctx)
	if err != nil {
		return result{}, err
	}
	defer b.closeRelay(t)
	p := newLatencyProbe(count)
	tune, notes := b.relayTune(b.opts.warmup + count)
	h, err := b.start(ctx, outboxSetup{all: p.after(t.listener), tune: tune})
	if err != nil {
		return result{}, err
	}
	defer h.close()
	r := b.newResult(scenarioRelayLatency, count)
	r.Relay = b.opts.relay
	r.Workers = b.opts.relayWorkers
	r.Notes = append(slices.Clone(t.notes), notes...)
	if err := p.run(ctx, b, h, target, func(ctx context.Context, i int) error {
		return h.publish(ctx, eventType, orderRef("rlat", i), orderAmount(i), i)
	}, &r); err != nil {
		return result{}, err
	}
	if err := checkStored(ctx, t, b.opts.warmup+count); err != nil {
		return r, err
	}
	b.relayP99 = r.P99us
	return r, nil
}

// storedWait bounds how long checkStored waits for the count to reach the
// acknowledged events: a consumer draining the destination may still have
// messages in flight (sent by the broker, not yet counted).
const storedWait = 10 * time.Second

// checkStored fails when the broker holds fewer messages than the events
// the relay reported acknowledged (want), after waiting up to storedWait
// for the count to get there.
func checkStored(ctx context.Context, t *relayTarget, want int) error {
	if t.stored == nil {
		return nil
	}
	deadline := time.Now().Add(storedWait)
	for {
		n, err := t.stored(ctx)
		if err != nil {
			return fmt.Errorf("counting the messages the broker stored: %w", err)
		}
		if n >= int64(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the broker stored %d messages, but %d events were acknowledged", n, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkPort refuses a port (text, "" for none) outside 1..65535:
// url.Parse and amqp.ParseURI take any digits, and the dial failed only
// after the scenarios before the relay's had run.
func checkPort(port string) error {
	if port == "" {
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %s is not 1..65535", port)
	}
	return nil
}

// urlParseError returns err without the URL a *url.Error repeats, since
// the URL may hold a password.
func urlParseError(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
