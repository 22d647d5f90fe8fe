package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Defaults of the flags.
const (
	defaultMySQLDSN     = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
	defaultPGDSN        = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultCycles       = 20
	defaultPublishers   = 4
	defaultRate         = 2000
	defaultRollback     = 0.10
	defaultListenerFail = 0.01
	defaultMinRun       = 200 * time.Millisecond
	defaultMaxRun       = 1500 * time.Millisecond
	defaultDrainTimeout = 2 * time.Minute
	defaultKeys         = 50 // with -ordered
	defaultProcs        = 1
	maxKeys             = 100000
	maxProcs            = 16
	// minRun is the shortest life a child is given when -duration spreads
	// the cycles: enough to start and publish a little.
	minRun = 50 * time.Millisecond
)

// options are the parsed and validated command-line flags.
type options struct {
	db           string        // "sqlite", "mysql" or "postgres"
	dsn          string        // MySQL DSN or PostgreSQL URL of an account that may CREATE and DROP databases
	cycles       int           // children killed; -1: as many as -duration allows
	duration     time.Duration // time budget of the kill cycles (0: none)
	seed         int64         // drives kill times, rollbacks and listener failures
	keep         bool          // keep the database at the end
	verbose      bool          // child logs to stderr
	publishers   int           // publisher goroutines per child
	rate         int           // committed+rolled back transactions per second per child (0: unpaced)
	rollback     float64       // share of transactions rolled back on purpose
	listenerFail float64       // share of listener invocations failing on purpose
	minRun       time.Duration // shortest life of a child before its SIGKILL
	maxRun       time.Duration // longest life of a child before its SIGKILL
	drainTimeout time.Duration // bound on the final drain
	ordered      bool          // publish ordered per key and fail on an order violation
	keys         int           // ordering keys the events are spread over (0: one aggregate per child, no order check)
	procs        int           // children running at once
	relay        string        // "natsjs" or "rabbitmq": the children relay every event to a JetStream stream or a RabbitMQ queue ("" : none)
	relayURL     string        // the broker of -relay
}

// tracksOrder reports whether the events are spread over keys with their
// commit positions recorded, so that order violations are counted.
func (o *options) tracksOrder() bool { return o.keys > 0 }

// usageText is printed by -h above the flag list.
const usageText = `outbox-torture SIGKILLs publishing outbox processes at random moments and
checks that no committed event is lost and no rolled-back one is delivered.

Usage:
  outbox-torture -db sqlite|mysql|postgres [-dsn DSN] [-cycles N] [-duration D] [flags]

The run uses a fresh database: a new SQLite file in a temporary directory,
or a new MySQL/MariaDB or PostgreSQL database outbox_torture_<random>
created through -dsn; it is removed at the end unless -keep is given or the
check fails.

Each cycle starts a child process (this binary, re-executed) that runs the
outbox (dispatcher + poller, 3 s leases) and publishes from -publishers
goroutines: per transaction INSERT ledger(event_id); Publish(event); about
-rollback of them roll back on purpose after both writes. Its listener
records every invocation in a deliveries table (-listener-fail of them then
fail on purpose, to exercise retries). The parent SIGKILLs the child after a
random time between -min-run and -max-run (or spread so that the cycles fit
-duration) and starts the next one, whose poller takes over the dead child's
events once their leases expire. A last child then drains the outbox; once
every event is DONE (or DEAD) it is stopped with SIGTERM and the database is
checked:

  lost        ledger ids never delivered successfully           (must be 0)
  phantom     delivered ids without a ledger or an outbox row, plus
              rolled-back ids that left a ledger, outbox or
              delivery row                                      (must be 0)
  duplicates  successful deliveries beyond the first per id     (allowed)
  not_done    ledger ids whose event is not DONE                (must be 0)
  dead        events marked DEAD                                (must be 0)
  orphans     outbox rows without a ledger row                  (must be 0)

-procs N runs N children at once on the database, each killed at its own
random time and replaced by a new one, and N draining children at the end.

-ordered publishes every event ordered by its key (-keys keys, 50 by
default; odd children ask through the builder, Builder.Ordered, even ones
through Config.Ordering) and adds to the check

  order_violations  deliveries of the key's event n+1 made before the first
                    successful delivery of its event n            (must be 0)
  seq_mismatch      events whose position in their key (order_seq) is not
                    their commit position recorded by the publisher (must be 0)

The commit position comes from the publisher itself: after Publish, the
transaction increments a per-key counter row (torture_keys), whose row lock
is held to commit, and writes the value into the ledger. -keys without
-ordered spreads unordered events over the keys and reports
order_violations without failing on them (unordered delivery reorders).

-relay natsjs makes every child relay every event to a JetStream stream
made for the run (file storage, 2 min duplicate window, deleted at the end
unless -keep) through the natsjs relay: the listener publishes the event,
waits for the stream's ack, and only then records the delivery (and fails
on purpose, after the ack, for -listener-fail of them, so that the retry
publishes the event again). After the drain the parent reads the stream
back and adds to the check

  stream_lost        committed events never stored in the stream    (must be 0)
  stream_duplicates  messages beyond the first per event id: a
                     redelivery stored again despite Nats-Msg-Id and
                     the duplicate window                           (must be 0)
  stream_phantom     stream messages of no committed event          (must be 0)
  stream_order_violations  (with -ordered) events stored before the
                     event before them in their key                 (must be 0)

-relay rabbitmq does the same through the rabbitmq relay to a durable
classic queue bound to an exchange made for the run (persistent, mandatory
messages, each awaited until the broker's confirm). The parent reads the
queue back in queue order into the same checks, with one difference:
RabbitMQ has no server-side deduplication, so stream_duplicates counts the
at-least-once redeliveries (an event whose confirm came but whose child was
killed before it was DONE is relayed again by the next one; a deliberate
listener failure after the confirm is retried) and is reported, not
checked. stream_lost, stream_phantom and stream_order_violations must be 0.

Output: one summary line on stdout,
  torture: db=… cycles=… events=… lost=0 phantom=0 duplicates=… …
Exit status 1 when a check fails or a child misbehaves, 2 on bad flags.
-duration alone runs cycles until the time is up; with -cycles it spreads
those cycles over it (at least 50ms a child, -procs at once: a shorter
-duration is refused) and runs every one of them, the last ones past
-duration when starting the children took part of it. The final drain
comes on top (a lease, 3 s, plus the backlog).

Flags:
`

// parseFlags parses args (without the program name). It returns
// flag.ErrHelp for -h; any other error is a usage error to print.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("outbox-torture", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller
	fs.StringVar(&o.db, "db", "sqlite", "database: sqlite, mysql or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "MySQL/MariaDB DSN or PostgreSQL URL of an account that may CREATE and DROP databases\n(default $OUTBOX_TEST_MYSQL_DSN, else "+defaultMySQLDSN+";\n$OUTBOX_TEST_POSTGRES_DSN, else "+defaultPGDSN+"); only with -db mysql or postgres")
	fs.IntVar(&o.cycles, "cycles", defaultCycles, "child processes to SIGKILL before the final drain")
	fs.DurationVar(&o.duration, "duration", 0, "time budget of the kill cycles; alone, cycles run until it is used up")
	fs.Int64Var(&o.seed, "seed", 0, "random seed of kill times, rollbacks and listener failures (default: time-based, printed)")
	fs.BoolVar(&o.keep, "keep", false, "keep the database (SQLite file, MySQL or PostgreSQL database) and print where it is")
	fs.BoolVar(&o.verbose, "v", false, "stream the children's log lines to stderr")
	fs.IntVar(&o.publishers, "publishers", defaultPublishers, "publisher goroutines per child")
	fs.IntVar(&o.rate, "rate", defaultRate, "transactions per second per child, all publishers together (0: as fast as possible)")
	fs.Float64Var(&o.rollback, "rollback", defaultRollback, "share of transactions rolled back on purpose (0 to 0.9)")
	fs.Float64Var(&o.listenerFail, "listener-fail", defaultListenerFail, "share of listener invocations that fail on purpose after being recorded (0 to 0.2)")
	fs.DurationVar(&o.minRun, "min-run", defaultMinRun, "shortest time a child runs before its SIGKILL")
	fs.DurationVar(&o.maxRun, "max-run", defaultMaxRun, "longest time a child runs before its SIGKILL")
	fs.BoolVar(&o.ordered, "ordered", false, "publish ordered per key and fail on any order violation")
	fs.IntVar(&o.keys, "keys", 0, "ordering keys the events are spread over (default 50 with -ordered; without it,\nunordered events over the keys, violations reported but not checked)")
	fs.IntVar(&o.procs, "procs", defaultProcs, "child processes running at once on the database")
	fs.StringVar(&o.relay, "relay", "", "relay every event to a broker and check what it stored: natsjs (a JetStream stream) or rabbitmq (a queue)")
	fs.StringVar(&o.relayURL, "relay-url", "", "broker of -relay (default natsjs: $OUTBOX_TEST_NATS_URL, else "+nats.DefaultURL+"; rabbitmq: $OUTBOX_TEST_AMQP_URL, else "+defaultAMQPURL+")")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", defaultDrainTimeout, "how long the final child may take to bring every event to DONE")
	fs.Usage = func() {} // usage only for -h; other errors are one line
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, usageText)
			fs.SetOutput(out)
			fs.PrintDefaults()
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["seed"] {
		o.seed = time.Now().UnixNano()
	}
	if o.ordered && !set["keys"] {
		o.keys = defaultKeys
	}
	if o.duration > 0 && !set["cycles"] {
		o.cycles = -1 // as many as fit
	}
	o.relayURL = strings.TrimSpace(o.relayURL)
	if o.relay != "" && !set["relay-url"] {
		env, def := "OUTBOX_TEST_NATS_URL", nats.DefaultURL
		if o.relay == relayRabbitMQ {
			env, def = "OUTBOX_TEST_AMQP_URL", defaultAMQPURL
		}
		o.relayURL = strings.TrimSpace(os.Getenv(env))
		if o.relayURL == "" {
			o.relayURL = def
		}
	}
	return o, o.validate(set["dsn"])
}

// validate checks the options and fills the DSN default.
func (o *options) validate(dsnSet bool) error {
	switch o.db {
	case "sqlite":
		if dsnSet {
			return errors.New("-dsn is only for -db mysql or postgres")
		}
	case "mysql":
		if !dsnSet {
			o.dsn = strings.TrimSpace(os.Getenv("OUTBOX_TEST_MYSQL_DSN"))
			if o.dsn == "" {
				o.dsn = defaultMySQLDSN
			}
		}
		if o.dsn == "" {
			return errors.New("-dsn must not be empty")
		}
		if _, err := mysql.ParseDSN(o.dsn); err != nil {
			return fmt.Errorf("-dsn: %v", err)
		}
	case "postgres":
		if !dsnSet {
			o.dsn = strings.TrimSpace(os.Getenv("OUTBOX_TEST_POSTGRES_DSN"))
			if o.dsn == "" {
				o.dsn = defaultPGDSN
			}
		}
		if o.dsn == "" {
			return errors.New("-dsn must not be empty")
		}
		if _, err := pgconn.ParseConfig(o.dsn); err != nil {
			return fmt.Errorf("-dsn: %v", err)
		}
	default:
		return fmt.Errorf("-db must be sqlite, mysql or postgres, got %q", o.db)
	}
	switch {
	case o.cycles < -1 || (o.cycles == -1 && o.duration <= 0):
		return fmt.Errorf("-cycles must not be negative, got %d", o.cycles)
	case o.duration < 0:
		return fmt.Errorf("-duration must not be negative, got %v", o.duration)
	case o.cycles > 0 && o.duration > 0 && o.procs > 0 && o.duration*time.Duration(o.procs) < time.Duration(o.cycles)*minRun:
		return fmt.Errorf("-duration %v is too short for -cycles %d: each child lives at least %v, %d at once (-procs): give at least %v",
			o.duration, o.cycles, minRun, o.procs, time.Duration(o.cycles)*minRun/time.Duration(o.procs))
	case o.publishers < 1 || o.publishers > 64:
		return fmt.Errorf("-publishers must be between 1 and 64, got %d", o.publishers)
	case o.rate < 0:
		return fmt.Errorf("-rate must not be negative, got %d", o.rate)
	case !(o.rollback >= 0 && o.rollback <= 0.9):
		return fmt.Errorf("-rollback must be between 0 and 0.9, got %v", o.rollback)
	case !(o.listenerFail >= 0 && o.listenerFail <= 0.2):
		return fmt.Errorf("-listener-fail must be between 0 and 0.2, got %v", o.listenerFail)
	case o.minRun <= 0 || o.maxRun < o.minRun:
		return fmt.Errorf("-min-run (%v) must be positive and at most -max-run (%v)", o.minRun, o.maxRun)
	case o.drainTimeout <= 0:
		return fmt.Errorf("-drain-timeout must be positive, got %v", o.drainTimeout)
	case o.keys < 0 || o.keys > maxKeys || (o.ordered && o.keys == 0):
		return fmt.Errorf("-keys must be between 1 and %d (0 only without -ordered), got %d", maxKeys, o.keys)
	case o.procs < 1 || o.procs > maxProcs:
		return fmt.Errorf("-procs must be between 1 and %d, got %d", maxProcs, o.procs)
	case o.relay != "" && o.relay != relayNATS && o.relay != relayRabbitMQ:
		return fmt.Errorf("-relay must be %s or %s, got %q", relayNATS, relayRabbitMQ, o.relay)
	case o.relay == "" && o.relayURL != "":
		return errors.New("-relay-url needs -relay")
	case o.relay != "" && o.relayURL == "":
		return errors.New("-relay-url must not be empty")
	case o.relay != "":
		if err := checkRelayURL(o.relay, o.relayURL); err != nil {
			return fmt.Errorf("-relay-url: %w", err)
		}
	}
	return nil
}

// checkRelayURL parses url as the broker client of relay will, so a
// malformed one is a bad flag (exit 2) rather than a failed connection.
// Its error does not repeat url, which may hold a password.
func checkRelayURL(relay, url string) error {
	if relay == relayRabbitMQ {
		_, err := amqp.ParseURI(url)
		return withoutURL(err)
	}
	// nats.go takes a comma-separated list, each URL with "nats://" when
	// it has no scheme.
	for _, u := range strings.Split(url, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		if _, err := neturl.Parse(u); err != nil {
			return withoutURL(err)
		}
	}
	return nil
}

// withoutURL returns err without the URL a *url.Error repeats.
func withoutURL(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
