package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/txctx"
)

// envChild, when set, makes this binary a child: its value is the JSON of
// a childSpec.
const envChild = "OUTBOX_TORTURE_CHILD"

// Outbox settings of a child: the defaults except short leases, so that
// the next child takes a dead child's events over within seconds, and a
// fast poller. Validation requires Lease > ListenerTimeout + ListenerGrace
// + StatusTimeout.
const (
	childLease           = 3 * time.Second
	childListenerTimeout = time.Second
	childListenerGrace   = 500 * time.Millisecond
	childStatusTimeout   = time.Second
	childPollInterval    = 200 * time.Millisecond
	childSkipRecent      = 50 * time.Millisecond
	childCloseTimeout    = 30 * time.Second
	// maxConsecutiveTxErrors is how many unexpected transaction failures
	// in a row make a publisher give up (and the child fail).
	maxConsecutiveTxErrors = 100
)

// eventType is the type of every event the torture publishes.
const eventType = "TortureEvent"

// Lines a child prints on stdout for its parent.
const (
	lineReady     = "READY"      // the outbox is started
	linePublished = "PUBLISHED " // + count: a drain child finished publishing
)

// childSpec is everything a child needs, passed in envChild.
type childSpec struct {
	ID           int     `json:"id"`
	DB           string  `json:"db"`  // "sqlite", "mysql" or "postgres"
	DSN          string  `json:"dsn"` // SQLite path, MySQL DSN or PostgreSQL URL
	Seed         int64   `json:"seed"`
	Drain        bool    `json:"drain"`         // publish DrainPublish transactions, then only deliver
	DrainPublish int     `json:"drain_publish"` // transactions a drain child runs
	Publishers   int     `json:"publishers"`
	Rate         int     `json:"rate"` // transactions per second, all publishers (0: unpaced)
	Rollback     float64 `json:"rollback"`
	ListenerFail float64 `json:"listener_fail"`
	Verbose      bool    `json:"verbose"`
	// Keys > 0 spreads the events over that many ordering keys and
	// records each one's commit position in the ledger; Ordered publishes
	// them ordered (through the builder in odd children, Config.Ordering
	// in even ones).
	Keys    int  `json:"keys"`
	Ordered bool `json:"ordered"`
	// RelayURL, when set, makes the listener relay every event to the
	// Relay broker at this address (NATS JetStream, on the subjects
	// RelaySubject.<type>; RabbitMQ, to the exchange RelaySubject) before
	// it records the delivery.
	Relay        string `json:"relay,omitempty"`
	RelayURL     string `json:"relay_url,omitempty"`
	RelaySubject string `json:"relay_subject,omitempty"`
}

// orderedByConfig reports whether the child orders its events through
// Config.Ordering rather than Builder.Ordered: both paths are exercised.
func (s childSpec) orderedByConfig() bool { return s.Ordered && s.ID%2 == 0 }

// errDeliberate rolls a transaction back, or fails a listener invocation,
// on purpose.
var errDeliberate = errors.New("torture: deliberate failure")

// deliberatePanic is the value a publisher panics with inside a
// transaction to roll it back the other way.
type deliberatePanic struct{}

// childMain runs this process as a child and returns its exit status.
func childMain(specJSON string, stdout, stderr io.Writer) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(stderr, "outbox-torture child: bad %s: %v\n", envChild, err)
		return 2
	}
	if err := runChild(spec, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "outbox-torture child %d: %v\n", spec.ID, err)
		return 1
	}
	return 0
}

// runChild runs the outbox and the publishers until SIGTERM (a SIGKILL
// ends it anywhere), then closes the outbox gracefully.
func runChild(spec childSpec, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	level := slog.LevelWarn
	if spec.Verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	db, err := openChildDB(spec.DB, spec.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	// database/sql keeps 2 idle connections by default: publishers,
	// workers, the DONE batcher and the poller would reconnect all the time.
	db.SetMaxIdleConns(2*spec.Publishers + 8)

	cfg := outbox.Config{Logger: logger}
	cfg.Dispatcher.Lease = childLease
	cfg.Dispatcher.ListenerTimeout = childListenerTimeout
	cfg.Dispatcher.ListenerGrace = childListenerGrace
	cfg.Dispatcher.StatusTimeout = childStatusTimeout
	cfg.Poller.Interval = childPollInterval
	cfg.Poller.SkipRecent = childSkipRecent
	if spec.orderedByConfig() {
		cfg.Ordering = core.Ordering{Types: []string{eventType}}
	}
	ob, err := outbox.New(context.Background(), db, cfg)
	if err != nil {
		return err
	}
	l := newListener(spec, db)
	if spec.RelayURL != "" {
		r, err := openChildRelay(spec, logger)
		if err != nil {
			return err
		}
		defer func() {
			// Runs after the return statement below closed the outbox:
			// no event reaches a closed relay.
			cctx, cancel := context.WithTimeout(context.Background(), childCloseTimeout)
			defer cancel()
			if err := r.close(cctx); err != nil {
				logger.Warn("closing the relay", slog.String("error", err.Error()))
			}
		}()
		l.relay = r.relay
	}
	ob.RegisterFunc(eventType, l.onEvent)
	if err := ob.Start(context.Background()); err != nil {
		return err
	}
	fmt.Fprintln(stdout, lineReady)

	limit := -1
	if spec.Drain {
		limit = spec.DrainPublish
	}
	committed, pubErr := publishAll(ctx, spec, ob, db, logger, limit)
	if spec.Drain && pubErr == nil {
		fmt.Fprintf(stdout, "%s%d\n", linePublished, committed)
	}
	if pubErr == nil {
		<-ctx.Done() // SIGTERM: the parent saw every event DONE
	}
	cctx, cancel := context.WithTimeout(context.Background(), childCloseTimeout)
	defer cancel()
	return errors.Join(pubErr, ob.Close(cctx))
}

// listener records every invocation in the deliveries table, on the
// child's pool in autocommit, and fails a share of them on purpose after
// recording (ok = 0), so that retries run across the kills too. With a
// relay it first relays the event and records nothing unless the broker
// acknowledged it: a delivery row then means "stored in the stream", and a
// failure on purpose comes after the ack, so its retry publishes the event
// again (a duplicate the stream must drop).
type listener struct {
	spec  childSpec
	db    *sqlx.DB
	relay outbox.Listener // nil without -relay
	mu    sync.Mutex
	rng   *rand.Rand
}

func newListener(spec childSpec, db *sqlx.DB) *listener {
	return &listener{spec: spec, db: db, rng: rand.New(rand.NewPCG(uint64(spec.Seed), uint64(spec.ID)<<32|0xffff))}
}

func (l *listener) onEvent(ctx context.Context, env outbox.Envelope) error {
	l.mu.Lock()
	fail := l.rng.Float64() < l.spec.ListenerFail
	l.mu.Unlock()
	if l.relay != nil {
		if err := l.relay.OnEvent(ctx, env); err != nil {
			return err
		}
	}
	ok := 1
	if fail {
		ok = 0
	}
	if _, err := l.db.ExecContext(ctx, l.db.Rebind(insertDelivery), env.ID(), l.spec.ID, ok); err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	if fail {
		return errDeliberate
	}
	return nil
}

// publishAll runs spec.Publishers publishers until ctx is done or, when
// limit >= 0, until they ran limit transactions together. It returns how
// many committed.
func publishAll(ctx context.Context, spec childSpec, ob *outbox.Outbox, db *sqlx.DB, logger *slog.Logger, limit int) (int, error) {
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		committed int
		errs      []error
	)
	for p := range spec.Publishers {
		share := -1
		if limit >= 0 {
			share = limit / spec.Publishers
			if p < limit%spec.Publishers {
				share++
			}
		}
		pub := &publisher{spec: spec, index: p, ob: ob, db: db, log: logger,
			rng: rand.New(rand.NewPCG(uint64(spec.Seed), uint64(spec.ID)<<32|uint64(p)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := pub.run(ctx, share)
			mu.Lock()
			defer mu.Unlock()
			committed += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return committed, errors.Join(errs...)
}

// publisher runs business transactions: INSERT ledger; Publish; commit,
// or roll back on purpose (by error or by panic).
type publisher struct {
	spec  childSpec
	index int
	ob    *outbox.Outbox
	db    *sqlx.DB
	rng   *rand.Rand
	log   *slog.Logger
	seq   int
}

// How a transaction ends.
type txEnd int

const (
	txCommit txEnd = iota
	txRollbackError
	txRollbackPanic
)

// run runs transactions until ctx is done or, when n >= 0, n of them ran.
// It returns how many committed.
func (p *publisher) run(ctx context.Context, n int) (int, error) {
	var pace *time.Timer
	interval := time.Duration(0)
	if p.spec.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(p.spec.Publishers) / float64(p.spec.Rate))
		pace = time.NewTimer(0)
		defer pace.Stop()
		<-pace.C
	}
	// Publishers start staggered over one interval.
	next := time.Now().Add(interval * time.Duration(p.index) / time.Duration(p.spec.Publishers))
	committed, failures := 0, 0
	for i := 0; n < 0 || i < n; i++ {
		if pace != nil {
			if wait := time.Until(next); wait > 0 {
				pace.Reset(wait)
				select {
				case <-pace.C:
				case <-ctx.Done():
					return committed, nil
				}
			} else if wait < -time.Second {
				next = time.Now() // fell behind (a stall): no burst to catch up
			}
			next = next.Add(interval)
		}
		if ctx.Err() != nil {
			return committed, nil
		}
		end := txCommit
		if p.rng.Float64() < p.spec.Rollback {
			end = txRollbackError
			if p.rng.IntN(4) == 0 {
				end = txRollbackPanic
			}
		}
		id, err := p.transaction(ctx, end)
		switch {
		case end != txCommit && errors.Is(err, errDeliberate):
			failures = 0
			// Bookkeeping for the check that rolled-back ids left nothing
			// behind; a kill right here loses the row, which only makes
			// rolled_back smaller.
			if _, err := p.db.ExecContext(context.WithoutCancel(ctx), p.db.Rebind(insertRollback), id, p.spec.ID); err != nil {
				p.log.Warn("cannot record a rolled-back id", slog.String("event_id", id), slog.String("error", err.Error()))
			}
		case err == nil && end == txCommit:
			failures = 0
			committed++
		case ctx.Err() != nil:
			return committed, nil // SIGTERM during the transaction: rolled back
		case err == nil:
			return committed, fmt.Errorf("publisher %d: a transaction meant to roll back returned no error", p.index)
		default:
			failures++
			p.log.Warn("business transaction failed", slog.Int("publisher", p.index), slog.String("error", err.Error()))
			if failures >= maxConsecutiveTxErrors {
				return committed, fmt.Errorf("publisher %d: %d transactions failed in a row, last: %w", p.index, failures, err)
			}
		}
	}
	return committed, nil
}

// event builds the event of the publisher's next transaction and returns
// its ordering key ("" when the run does not track order).
func (p *publisher) event() (outbox.Envelope, string, error) {
	p.seq++
	b := outbox.NewEvent(eventType).
		PayloadJSONString(fmt.Sprintf(`{"child":%d,"publisher":%d,"seq":%d}`, p.spec.ID, p.index, p.seq))
	if p.spec.Keys == 0 {
		env, err := b.AggregateType("TortureChild").AggregateID(strconv.Itoa(p.spec.ID)).Build()
		return env, "", err
	}
	k := p.rng.IntN(p.spec.Keys)
	b.AggregateType(keyAggregate).AggregateID(strconv.Itoa(k))
	if p.spec.Ordered && !p.spec.orderedByConfig() {
		b.Ordered()
	}
	env, err := b.Build()
	return env, keyName(k), err
}

// transaction runs one business transaction ending as end and returns the
// event id it published.
//
// When the run tracks order, the transaction takes the event's commit
// position in its key after Publish: bumpKey locks the key's counter row
// until the transaction ends, so positions follow the commit order, and
// the ledger row records it. It is the publisher's own witness of the
// commit order, independent of the outbox's order_seq (which the check
// compares with it): under -ordered Publish already holds the outbox's
// lock on the key, so the counter's lock never waits; without -ordered
// the counter's lock is what serializes the transactions of a key.
func (p *publisher) transaction(ctx context.Context, end txEnd) (id string, err error) {
	env, key, err := p.event()
	if err != nil {
		return "", err
	}
	id = env.ID()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(deliberatePanic); !ok {
				panic(r)
			}
			err = errDeliberate
		}
	}()
	err = p.ob.InTx(ctx, func(ctx context.Context) error {
		tx, ok := txctx.From(ctx)
		if !ok {
			return errors.New("no transaction in ctx")
		}
		if key == "" {
			if _, err := tx.ExecContext(ctx, p.db.Rebind(insertLedger), id, p.spec.ID); err != nil {
				return fmt.Errorf("insert ledger row: %w", err)
			}
		}
		if _, err := p.ob.Publish(ctx, env); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		if key != "" {
			if _, err := tx.ExecContext(ctx, p.db.Rebind(bumpKey), key); err != nil {
				return fmt.Errorf("take the commit position of key %s: %w", key, err)
			}
			var seq int64
			if err := tx.QueryRowContext(ctx, p.db.Rebind(readKey), key).Scan(&seq); err != nil {
				return fmt.Errorf("read the commit position of key %s: %w", key, err)
			}
			if _, err := tx.ExecContext(ctx, p.db.Rebind(insertLedgerAt), id, p.spec.ID, key, seq); err != nil {
				return fmt.Errorf("insert ledger row: %w", err)
			}
		}
		switch end {
		case txRollbackError:
			return errDeliberate
		case txRollbackPanic:
			panic(deliberatePanic{})
		}
		return nil
	})
	return id, err
}
