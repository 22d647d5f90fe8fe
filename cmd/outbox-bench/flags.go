package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-go/outbox/cleanup"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
)

// Scenario names, in the order they run.
const (
	scenarioFloor    = "floor"
	scenarioPublish  = "publish"
	scenarioBatch    = "batch"
	scenarioEndToEnd = "end_to_end"
	scenarioLatency  = "latency"
	scenarioOverload = "overload"
	scenarioWakeup   = "wakeup"
	// The ordered scenarios (with -ordered-keys).
	scenarioOrderedE2E     = "ordered_end_to_end"
	scenarioOrderedOneKey  = "ordered_one_key"
	scenarioOrderedLatency = "ordered_latency"
	// The relay scenarios (with -relay).
	scenarioRelay        = "relay"
	scenarioRelayLatency = "relay_latency"
	// The observed scenario (with -observe).
	scenarioObservedE2E = "observed_end_to_end"
	// The recovery scenarios: a crashed node's backlog drained
	// (ordered_recovery only with -ordered-keys).
	scenarioRecovery        = "recovery"
	scenarioOrderedRecovery = "ordered_recovery"
	defaultMySQLDSN         = "root@tcp(127.0.0.1:3306)/test?parseTime=true"
	defaultPGDSN            = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultSQLiteN          = 20000
	defaultMySQLN           = 10000
	defaultOverloadN        = 200000
	defaultRecoveryN        = 200000
	defaultRecoveryKeys     = 50
	defaultWorkers          = 4
	defaultWarmup           = 300
	defaultRounds           = 3
	maxWorkers              = 256
	defaultRelayWorkers     = 16
	defaultSlowListen       = 2 * time.Millisecond
	// defaultOrderedKeys is -ordered-keys given without a value.
	defaultOrderedKeys = 1000
)

// allScenarios lists every scenario in run order.
var allScenarios = []string{scenarioFloor, scenarioPublish, scenarioBatch, scenarioEndToEnd, scenarioOrderedE2E, scenarioObservedE2E, scenarioRelay,
	scenarioMultinode, scenarioMultinodeFloor,
	scenarioLatency, scenarioOrderedOneKey, scenarioOrderedLatency, scenarioRelayLatency, scenarioOverload, scenarioWakeup,
	scenarioRecovery, scenarioOrderedRecovery, scenarioHistory, scenarioDashboard}

// orderedScenarios are the scenarios of ordered events, run by default
// only with -ordered-keys.
var orderedScenarios = []string{scenarioOrderedE2E, scenarioOrderedOneKey, scenarioOrderedLatency, scenarioOrderedRecovery}

// relayScenarios are the scenarios through a broker relay, run by default
// only with -relay.
var relayScenarios = []string{scenarioRelay, scenarioRelayLatency}

// notifyingDBs are the databases that announce commits to other sessions
// (jdbcstore.Notifier), where the wakeup scenario runs.
var notifyingDBs = []string{"postgres"}

// options are the parsed and validated command-line flags.
type options struct {
	db         string        // "sqlite", "mysql" or "postgres"
	dsn        string        // MySQL DSN or PostgreSQL URL (server and credentials; the database is created per scenario)
	n          int           // transactions per throughput scenario
	workers    int           // business writers and dispatcher workers
	warmup     int           // untimed transactions before each scenario
	overloadN  int           // events of the overload scenario
	slow       time.Duration // listener delay of the overload scenario (0: auto)
	skipRecent time.Duration // Poller.SkipRecent of the overload scenario
	pollEvery  time.Duration // Poller.Interval of every framework scenario (0: framework default)
	backlog    time.Duration // Poller.BacklogInterval of every framework scenario (0: framework default)
	timeout    time.Duration // bound on waiting for events to be DONE, per scenario
	maxOpen    int           // sql.DB.SetMaxOpenConns of every scenario (0: unlimited)
	rounds     int           // rounds of the throughput scenarios
	doneWindow time.Duration // Dispatcher.DoneFlushWindow (0: framework default)
	doneBatch  int           // Dispatcher.DoneBatchSize (0: framework default)
	scenarios  []string      // scenarios to run, in run order
	json       bool          // one JSON object per line
	verbose    bool          // framework logs to stderr
	cpuProfile string        // CPU profile output file
	trace      string        // runtime execution trace output file
	payload    int           // payload bytes of the overload events (0: the small order JSON)
	maxHeld    int64         // Dispatcher.MaxHeldBytes (0: framework default)
	// orderedKeys is the number of ordering keys of ordered_end_to_end
	// (-ordered-keys; 0 when the ordered scenarios do not run).
	orderedKeys int
	// relay is the broker of the relay scenarios (-relay, a key of
	// relayKinds; "" when they do not run), relayURL its address and
	// relayWorkers the dispatcher workers of those scenarios
	// (defaultRelayWorkers).
	relay        string
	relayURL     string
	relayWorkers int
	// observe runs observed_end_to_end (-observe).
	observe bool
	// observeSample is the share of traces observed_end_to_end samples
	// (-observe-sample): 1 samples every span, less samples that share of
	// the publishers' traces, parent-based.
	observeSample float64
	// historyDone and historyDead are the rows seeded before the history
	// scenario (-history-done, -history-dead).
	historyDone, historyDead int
	// purgePause is the cleanup.Config.PauseFactor of the history
	// scenario's purge (-history-pause-factor; 0: the default, -1: none).
	purgePause float64
	// purgeBatch is the cleanup.Config.BatchSize of the history
	// scenario's purge (-history-purge-batch; 0: the default).
	purgeBatch int
	// purgeRate is the history scenario's cleanup.Config.MaxRate during
	// publishing, as a multiple of the publish rate (-history-purge-rate;
	// 0: no cap).
	purgeRate float64
	// nodes is the number of processes of the multinode scenario
	// (-nodes, defaultNodes); multiN the events of the multinode
	// scenarios, all nodes together (-multinode-n, default n);
	// multiFloor where multinode_floor runs (-multinode-floor,
	// floorInProcesses or floorInProcess).
	nodes      int
	multiN     int
	multiFloor string
	// dash are the dashboard scenario's flags (dashboard.go).
	dash dashboardOptions
	// recoveryN is the backlog of recovery (-recovery-n; ordered_recovery
	// drains a tenth of it) and recoveryKeys the ordering keys of
	// ordered_recovery's backlog (-recovery-keys).
	recoveryN, recoveryKeys int
}

// usageText is printed by -h above the flag list.
const usageText = `outbox-bench measures the outbox against a bare INSERT on the same database.

Usage:
  outbox-bench -db sqlite|mysql|postgres [-dsn DSN] [-n N] [-workers W] [-json] [flags]
  outbox-bench -ordered-keys [K] ...   (also the ordered scenarios, K = 1000 by default)
  outbox-bench -relay natsjs [-relay-url URL] ...   (also the relay scenarios)
  outbox-bench -observe ...   (also observed_end_to_end)

Scenarios (each on a fresh database: a new SQLite file, or a new MySQL or
PostgreSQL database outbox_bench_<random> dropped at the end):
  floor       per tx: BEGIN; INSERT business row; INSERT an outbox-shaped row
              with plain database/sql (no framework); COMMIT. W writers, N tx.
  publish     the same business tx publishing through the framework (InTx +
              Publish), dispatcher running with a no-op listener; the rate of
              committed transactions.
  batch       publish with 10 events per business tx: one business row and one
              PublishAll of 10 events (one multi-row INSERT), N/10 tx; the rate
              of committed events, against publish's one event per tx
              (batch_speedup). Its notes add done_events_per_s: first publish
              until every event is DONE.
  end_to_end  publish -> listener -> DONE: from the first publish until every
              row is DONE in the table.
  latency     commit returned -> listener invoked, publishers paced at 0.5 x
              the end_to_end rate, N/4 events (at most ~5 s); p50/p90/p99/max.
  overload    -overload-n events published faster than a slow listener
              consumes them (it sleeps -overload-slow per event; by default
              long enough that W workers consume at most half the measured
              publish rate), default queue sizes: peak RSS (VmHWM), time
              until all are DONE, and lost: events the listener never saw or
              rows not DONE when the wait ended (after at most -timeout);
              must be 0. The peak RSS counts the whole process (Go heap,
              runtime, SQLite's C memory); the tool keeps one bit per event.
              -payload SIZE gives each event a JSON payload of SIZE bytes
              (e.g. 1MiB): the dispatcher's payload budget
              (-max-held-bytes, Dispatcher.MaxHeldBytes, 64MiB by default)
              then bounds the memory, not the queue capacities.
  wakeup      (postgres) commit returned -> listener invoked for events
              committed on a plain *sql.Tx (PublishTx: no after-commit
              hand-off, so no hot path) while the poller rests for an hour:
              only the database's commit notification (LISTEN/NOTIFY) wakes
              it. N/10 events (at most 500), paced at 200/s; p50/p90/p99/max.
              Target p99 <= 20 ms. Run by default where the database
              supports it.
  recovery    a crashed node's backlog drained by a fresh process:
              -recovery-n NEW rows (default 200000), seeded in bulk before
              the outbox starts, shaped as a node that died holding them
              leaves them (leased by that node, leases expired, attempts
              0), no-op listener. From Start until every seeded row is
              DONE: drain rate, drain_ratio = drain rate / end_to_end rate.
              Meanwhile publishers paced at 0.1 x the end_to_end rate
              publish new events (for about 0.8 x the drain's expected
              time): p50/p90/p99/max are their commit -> listener
              latencies during the drain. Peak RSS as in overload.

Ordered scenarios (run by default only with -ordered-keys K; K = 1000 when
the flag has no value):
  ordered_end_to_end  end_to_end with ordered events (Builder.OrderKey):
              transaction i publishes on key i mod K, so a key's events are
              K transactions apart. An event whose key has an earlier event
              pending waits for the poller, woken when that event is DONE.
  ordered_one_key  end_to_end with every event on one key, N/10 events (at
              most 2000): delivery is sequential, each event waits for the
              DONE write of the one before (Dispatcher.DoneFlushWindow).
              The events/s of one key.
  ordered_recovery  recovery with an ordered backlog of -recovery-n/10
              rows over -recovery-keys keys (default 50), row i on key
              i mod K; the listener checks each key's order.
  ordered_latency  latency with ordered events whose key has nothing
              pending: each timed event is the second of its own key, the
              first one DONE before timing starts, so it takes the hot path.
              Paced at 0.5 x the ordered_end_to_end rate, N/4 events (at
              most ~5 s).

Relay scenarios (run by default only with -relay BROKER, where BROKER is
one of: %RELAYS%; each on a destination of its own, made for the scenario
and deleted at its end: for natsjs a JetStream stream OUTBOX_BENCH_<RANDOM>
with file storage and a 2 min duplicate window, which needs no consumer;
for rabbitmq a durable topic exchange and a durable queue
outbox-bench-<random> bound with "#", drained by an auto-ack consumer so
that it does not fill up; the relay publishes persistent, mandatory
messages and awaits each confirm):
  relay       end_to_end with the broker relay registered (RegisterAll)
              instead of the no-op listener: from the first publish until
              every row is DONE, that is until the broker acknowledged
              every event. The hot queue holds every event (HotCapacity =
              warm-up + N, at least 1000, in the line's notes): with the
              default 1000 a
              relay slower than the publishers leaves the overflow to the
              poller, and the scenario would measure the poller. Dispatcher
              workers: -relay-workers (default 16: a relay waits on the broker's ack,
              so it gets more workers than a local listener, as the README advises).
              With rabbitmq, each round then measures on the same queue
              the broker floor (broker_floor/s: a minimal amqp091-go
              publisher, N messages identical to the relay's, the best of
              1x256 and 4x64 channels x outstanding confirms; also at the
              relay's own 4 x workers/4) and the relay alone (relay_direct/s:
              OnEvent from -relay-workers goroutines, no database).
              The line also names the publishers' own rate (published/s)
              and the events not yet relayed when the last commit returned
              (undelivered_at_last_commit): near 0, the relay kept up and
              the publishers set the rate.
  relay_latency  latency through the relay: commit returned -> the relay
              returned (broker ack), paced at 0.5 x the relay rate, N/4
              events (at most ~5 s).

Observed scenario (run by default only with -observe):
  observed_end_to_end  end_to_end with the outbox observed through
              OpenTelemetry: an *otel.Observer (package
              github.com/outbox-go/outbox/otel) as Config.Observer and
              Config.Metrics, over the OpenTelemetry SDK: a TracerProvider
              sampling every span (AlwaysSample) into a batch span
              processor whose exporter drops them (every span is created,
              ended and batched; only the network export is left out), and
              a MeterProvider with a ManualReader (instruments record into
              their aggregations, collected once at the end). Its notes
              give the spans exported and metric data points collected.
              With -observe-sample R < 1 the TracerProvider samples a share
              R of the traces instead (ParentBased(TraceIDRatioBased(R)):
              the publish decides, its deliveries follow); the summary
              names the sampling beside observability_cost.

History scenario (run only when -scenarios names it):
  history     a fresh database seeded with -history-done DONE and
              -history-dead DEAD rows (bulk SQL: a recursive CTE on SQLite,
              digit cross joins on MySQL/MariaDB, generate_series on
              PostgreSQL; ~200-byte JSON payloads, a traceparent header,
              creation times over 120 days), then ANALYZE; the seeding time
              is printed. Then -rounds rounds of: publish on an empty table
              (as the publish scenario) and on the seeded one, end_to_end on
              an empty table and on the seeded one (end_to_end waits until no NEW or RETRY row is left,
              one range of the pending index), the retention purge (package
              cleanup, default batch and pause unless -history-purge-batch
              or -history-pause-factor say otherwise; DONE kept 30 days, DEAD 60)
              alone for as long as a publish round took, and publish with
              the purge running beside it, capped (cleanup.Config.MaxRate)
              at -history-purge-rate times the round's publish rate. Its line gives the median rates:
              events_per_s (publish), history_e2e_per_s,
              publish_purge_per_s, purge_rows_per_s (during publishing) and
              purge_alone_rows_per_s.

Multinode scenarios (run by default only with -nodes K, K = 3 by default;
or name multinode in -scenarios, which then also runs multinode_floor):
  multinode_floor  floor with K x W writers, M transactions (-multinode-n,
              default N): in K processes of this program of W writers each,
              started together like multinode's (the rate is M / (last
              end - first start)), or with -multinode-floor process in this
              one process.
  multinode   K processes of this program (re-executed, each a full
              outbox: dispatcher and poller with an owner token of its
              own) on one database, each publishing M/K events on W
              writers and delivering them; they start together once every
              node's warm-up is DONE. The rate is M / (last DONE - first
              start), M = -multinode-n. Then every committed event must have been delivered
              exactly once across the nodes and every row be DONE: a lost
              event fails the run, duplicates are reported (dups, target
              0). The nodes die with the run (killed on interrupt; a node
              whose parent is gone exits when its stdin closes). Its
              cpu_us_per_event is the nodes' CPU; rss_MiB the parent's.

Dashboard scenario (run only when -scenarios names it):
  dashboard   seeds -dashboard-rows finished rows (1% DEAD) by bulk SQL,
              times the dashboard's pages (-dashboard-loads each, figures
              read fresh on every load), then runs -rounds pairs of
              end_to_end phases of N events on that table: quiet, and with
              -dashboard-loaders goroutines loading pages. events_per_s is
              the median loaded rate; loaded_ratio = loaded / quiet.

floor, publish, batch, end_to_end, ordered_end_to_end, observed_end_to_end,
relay, multinode_floor and multinode run -rounds times, interleaved, and
report their median round.

Ratios (all measured within one run, same process and settings):
  ratio_to_floor    (scenario lines) scenario rate / floor rate; higher is faster.
  publish_ratio     (summary) floor rate / publish rate: the cost factor of
                    publishing over a bare INSERT; target <= 1.05.
  end_to_end_ratio  (summary) end_to_end rate / floor rate; target >= 0.95.
  batch_speedup     (summary) batch rate / publish rate, both in events/s:
                    what 10 events per transaction gain; target >= 5.
  ordered_ratio     (summary) ordered_end_to_end rate / end_to_end rate;
                    target >= 0.7.
  relay_ratio       (summary) relay rate / end_to_end rate; target >= 0.7.
  relay_floor_ratio (summary, rabbitmq) relay rate / the broker floor of
                    the same round (relay_floor_per_s): what the relay does
                    of what the broker allows; no target.
  observability_cost  (summary) 1 - observed_end_to_end rate / end_to_end
                    rate: the share of throughput OpenTelemetry tracing and
                    metrics cost; target <= 0.05.
  history_publish_ratio, history_e2e_ratio  (summary) the history
                    scenario's publish and end_to_end rates / the
                    empty-table ones measured just before them in the same
                    round, median of the rounds; target >= 0.9.
  purge_keeps_up    (summary) purge rows/s / publish rate, both while the
                    purge runs beside the publishers, median of the rounds;
                    target >= 2.
  purge_cost        (summary) publish rate with the purge running / without
                    (both on the seeded table, in the same round), median of
                    the rounds; target >= 0.9.
  multinode_ratio   (summary) multi_ratio / end_to_end_ratio, where
                    multi_ratio = multinode rate / multinode_floor rate
                    (the multinode line's ratio_to_floor): how well K
                    processes keep the single process's share of the
                    floor; target >= 0.9, with 0 duplicates.
  drain_ratio       (summary) recovery drain rate / end_to_end rate;
                    target >= 0.8. With it drain_hot_p99_us (the hot
                    events' p99 during the drain; no target) and
                    drain_peak_rss_mb (target as overload's).
  ordered_drain_ratio  (summary) ordered_recovery drain rate / end_to_end
                    rate; no target.
  Other targets: latency p99_us <= 100, ordered_latency p99
  (ordered_p99_us) <= 1000, relay_latency p99 (relay_p99_us) <= 5000, overload peak_rss_mb <= 64 (with
  -payload: <= 2.5 x MaxHeldBytes + 128 MiB, the garbage collector's
  headroom and the process's fixed cost; none with -max-held-bytes -1),
  lost = 0.

Output: one line per scenario (an aligned table, or JSON with -json), then a
summary line (its n is the -n flag; each scenario line states the n it ran,
as overload its -overload-n). Extra fields: cpu_us_per_event (process CPU per event, steadier
than rates on a loaded machine; on SQLite it includes the database's work),
hot_dropped (events the full hot queue left to the poller), cold_enqueued
(events the poller queued: in the ordered scenarios, those that waited for
an earlier event of their key), the rates of every round, and the load
average at the start and end of the run. The summary adds ordered_keys and
ordered_one_key_per_s with the ordered scenarios, and end_to_end_per_s and
observed_per_s (both rates) with observed_end_to_end.

Exit status 1 when a scenario fails or an event is lost, 2 on bad flags; a
missed performance target is reported, not an error.

Flags:
`

// parseFlags parses args (without the program name). It returns
// flag.ErrHelp for -h; any other error is a usage error to print.
func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	var scenarios string
	fs := flag.NewFlagSet("outbox-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller
	fs.StringVar(&o.db, "db", "sqlite", "database: sqlite, mysql or postgres")
	fs.StringVar(&o.dsn, "dsn", "", "MySQL/MariaDB DSN or PostgreSQL URL of an account that may CREATE and DROP databases\n(default "+defaultMySQLDSN+" or "+defaultPGDSN+"); only with -db mysql or postgres")
	fs.IntVar(&o.n, "n", 0, fmt.Sprintf("transactions per throughput scenario (default %d on sqlite, %d on mysql and postgres)", defaultSQLiteN, defaultMySQLN))
	fs.IntVar(&o.workers, "workers", defaultWorkers, "business writer goroutines and dispatcher workers")
	fs.IntVar(&o.rounds, "rounds", defaultRounds, "rounds of floor, publish and end_to_end, interleaved; each reports its median round")
	fs.IntVar(&o.warmup, "warmup", defaultWarmup, "untimed transactions before each scenario")
	fs.IntVar(&o.overloadN, "overload-n", defaultOverloadN, "events published by the overload scenario")
	fs.IntVar(&o.recoveryN, "recovery-n", defaultRecoveryN, fmt.Sprintf("backlog rows of the recovery scenario (ordered_recovery: a tenth), at most %d", maxSeed))
	fs.IntVar(&o.recoveryKeys, "recovery-keys", defaultRecoveryKeys, "ordering keys of ordered_recovery's backlog")
	fs.DurationVar(&o.slow, "overload-slow", 0, "time the overload listener spends per event (time.Sleep), so W workers consume at most W/this events/s (default: consume at half the measured publish rate, or 2ms without a publish scenario)")
	fs.DurationVar(&o.skipRecent, "overload-skip-recent", 100*time.Millisecond, "Poller.SkipRecent of the overload scenario")
	fs.DurationVar(&o.pollEvery, "poll-interval", 0, "Poller.Interval of the framework scenarios (default: the framework's, 5s)")
	fs.DurationVar(&o.backlog, "backlog-interval", 0, "Poller.BacklogInterval of the framework scenarios (default: the framework's, "+poller.DefaultBacklogInterval.String()+")")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long a scenario may wait for its events to be DONE")
	fs.IntVar(&o.maxOpen, "max-open-conns", 0, "connection pool limit (sql.DB.SetMaxOpenConns) of every scenario, floor included; 0: unlimited, the database/sql default")
	fs.DurationVar(&o.doneWindow, "done-flush-window", 0, "Dispatcher.DoneFlushWindow (default: the framework's, "+dispatcher.DefaultDoneFlushWindow.String()+")")
	fs.IntVar(&o.doneBatch, "done-batch-size", 0, "Dispatcher.DoneBatchSize (default: the framework's, "+strconv.Itoa(dispatcher.DefaultDoneBatchSize)+")")
	var payload, maxHeld string
	fs.StringVar(&payload, "payload", "", "payload size of the overload scenario's events, e.g. 1MiB, 64KiB or 512 (bytes); default: the small order JSON (~60 bytes)")
	fs.StringVar(&maxHeld, "max-held-bytes", "", "Dispatcher.MaxHeldBytes, e.g. 64MiB, or -1 for no limit (default: the framework's, 64MiB)")
	fs.StringVar(&scenarios, "scenarios", "", "comma-separated scenarios to run, of "+strings.Join(allScenarios, ",")+
		" (default: those the database supports, but the ordered, relay, observed and multinode ones only with their flags"+
		" (-ordered-keys, -relay, -observe, -nodes), and history and dashboard only when named)")
	ordered := &orderedKeysFlag{}
	fs.Var(ordered, "ordered-keys", fmt.Sprintf("run the ordered scenarios too, ordered_end_to_end with `K` keys (%d when the flag has no value)", defaultOrderedKeys))
	fs.StringVar(&o.relay, "relay", "", "run the relay scenarios too, through this broker: "+strings.Join(relayNames(), " or "))
	fs.StringVar(&o.relayURL, "relay-url", "", "address of the -relay broker (default: "+relayDefaults()+")")
	fs.IntVar(&o.relayWorkers, "relay-workers", 0, fmt.Sprintf("dispatcher workers of the relay scenarios, 1..%d (0 or omitted: %d; a relay waits on the broker, so it gets more workers than a local listener)", maxWorkers, defaultRelayWorkers))
	fs.BoolVar(&o.observe, "observe", false, "run observed_end_to_end too: end_to_end traced and measured through OpenTelemetry (SDK, every span sampled), for observability_cost")
	fs.Float64Var(&o.observeSample, "observe-sample", 1, "share `R` of the traces observed_end_to_end samples, parent-based (1: every span)")
	fs.IntVar(&o.historyDone, "history-done", defaultHistoryDone, "DONE rows seeded before the history scenario (with far fewer than the default the purge runs out of old rows while the publishers run, and purge_keeps_up reads low)")
	fs.IntVar(&o.historyDead, "history-dead", defaultHistoryDead, "DEAD rows seeded before the history scenario")
	fs.Float64Var(&o.purgePause, "history-pause-factor", 0, "cleanup.Config.PauseFactor of the history scenario's purge (default: the package's; -1: batches back to back)")
	fs.IntVar(&o.purgeBatch, "history-purge-batch", 0, fmt.Sprintf("cleanup.Config.BatchSize of the history scenario's purge: rows per DELETE, 1..%d (default: the package's, %d)", jdbcstore.MaxPurgeBatch, cleanup.DefaultBatchSize))
	fs.Float64Var(&o.purgeRate, "history-purge-rate", defaultHistoryPurgeRate, "cleanup.Config.MaxRate of the history scenario's purge beside the publishers, as a multiple of the publish rate measured just before (0: no cap)")
	fs.IntVar(&o.nodes, "nodes", defaultNodes, "run the multinode scenarios too, with this many processes of W writers each on one database")
	fs.IntVar(&o.multiN, "multinode-n", 0, "events of multinode_floor and multinode, all nodes together (default: -n)")
	fs.StringVar(&o.multiFloor, "multinode-floor", floorInProcesses, "where multinode_floor runs: "+floorInProcesses+" (-nodes processes of W writers, like multinode) or "+floorInProcess+" (this process, -nodes x W writers)")
	o.dash.register(fs)
	fs.BoolVar(&o.json, "json", false, "print one JSON object per line")
	fs.BoolVar(&o.verbose, "v", false, "show the framework's log lines (debug level) on stderr")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (and of each multinode process, from start to stop, to FILE.node1, FILE.node2, …)")
	fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace of the whole run to this file (go tool trace; large: use with -scenarios and a small -n)")
	fs.Usage = func() {} // usage only for -h; other errors are one line
	args = joinNegativeKeys(args)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(out, strings.ReplaceAll(usageText, "%RELAYS%", strings.Join(relayNames(), ", ")))
				fs.SetOutput(out)
				fs.PrintDefaults()
			}
			return o, err
		}
		// -ordered-keys parses as a boolean flag, so that it may go without
		// a value; "-ordered-keys 500" leaves 500 as the first argument.
		if ordered.bare && fs.NArg() > 0 {
			k, err := strconv.Atoi(fs.Arg(0))
			if err != nil && !strings.HasPrefix(fs.Arg(0), "-") {
				return o, fmt.Errorf("-ordered-keys: want a number of keys of at least 1, got %q", fs.Arg(0))
			}
			if err == nil {
				ordered.keys, ordered.bare = k, false
				args = fs.Args()[1:]
				continue
			}
		}
		break
	}
	if ordered.err != nil {
		return o, ordered.err
	}
	o.orderedKeys = ordered.keys
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	nodesSet, nSet := false, false
	fs.Visit(func(f *flag.Flag) {
		nodesSet = nodesSet || f.Name == "nodes"
		nSet = nSet || f.Name == "n"
	})
	if nSet && o.n < 1 { // 0 stands for the default only when -n is not given
		return o, errors.New("-n must be at least 1")
	}
	var err error
	if scenarios == "" {
		for _, name := range allScenarios {
			switch {
			case name == scenarioWakeup && !slices.Contains(notifyingDBs, o.db):
			case slices.Contains(orderedScenarios, name) && !ordered.set:
			case slices.Contains(relayScenarios, name) && o.relay == "":
			case name == scenarioObservedE2E && !o.observe:
			case name == scenarioHistory:
			case slices.Contains(multinodeScenarios, name) && !nodesSet:
			case name == scenarioDashboard: // only when named: it seeds a million rows
			default:
				o.scenarios = append(o.scenarios, name)
			}
		}
	} else if o.scenarios, err = parseScenarios(scenarios); err != nil {
		return o, err
	}
	if err := o.checkScenarioFlags(fs); err != nil {
		return o, err
	}
	if o.has(scenarioMultinode) && !o.has(scenarioMultinodeFloor) {
		// multinode is measured against its own floor: run it too.
		o.scenarios, _ = parseScenarios(strings.Join(append(o.scenarios, scenarioMultinodeFloor), ","))
	}
	if nodesSet && !slices.ContainsFunc(o.scenarios, func(s string) bool { return slices.Contains(multinodeScenarios, s) }) {
		return o, fmt.Errorf("-nodes: -scenarios selects no multinode scenario (%s)", strings.Join(multinodeScenarios, ", "))
	}
	if ordered.set && !slices.ContainsFunc(o.scenarios, func(s string) bool { return slices.Contains(orderedScenarios, s) }) {
		return o, fmt.Errorf("-ordered-keys: -scenarios selects no ordered scenario (%s)", strings.Join(orderedScenarios, ", "))
	}
	if o.relay != "" && !slices.ContainsFunc(o.scenarios, func(s string) bool { return slices.Contains(relayScenarios, s) }) {
		return o, fmt.Errorf("-relay: -scenarios selects no relay scenario (%s)", strings.Join(relayScenarios, ", "))
	}
	if o.observe && !o.has(scenarioObservedE2E) {
		return o, fmt.Errorf("-observe: -scenarios does not select %s", scenarioObservedE2E)
	}
	if !o.observe && o.has(scenarioObservedE2E) {
		return o, fmt.Errorf("-scenarios: %s needs -observe", scenarioObservedE2E)
	}
	if !ordered.set && slices.ContainsFunc(o.scenarios, func(s string) bool { return slices.Contains(orderedScenarios, s) }) {
		o.orderedKeys = defaultOrderedKeys
	}
	if payload != "" {
		n, err := parseSize(payload)
		if err != nil || n < minPayload || n > maxPayload {
			return o, fmt.Errorf("-payload: want a size from %d bytes to %d MiB, got %q", minPayload, maxPayload>>20, payload)
		}
		o.payload = int(n)
	}
	if maxHeld == "-1" {
		o.maxHeld = -1
	} else if maxHeld != "" {
		if o.maxHeld, err = parseSize(maxHeld); err != nil || o.maxHeld < 1 {
			return o, fmt.Errorf("-max-held-bytes: want a positive size or -1, got %q", maxHeld)
		}
	}
	return o, o.validate()
}

// validate checks the flags and fills the defaults that depend on -db.
// scenarioFlags are the flags that configure some scenarios only: set
// without any of them, they would be ignored.
var scenarioFlags = map[string][]string{
	"payload":              {scenarioOverload},
	"overload-n":           {scenarioOverload},
	"overload-slow":        {scenarioOverload},
	"overload-skip-recent": {scenarioOverload},
	"recovery-n":           {scenarioRecovery, scenarioOrderedRecovery},
	"recovery-keys":        {scenarioRecovery, scenarioOrderedRecovery},
	"observe-sample":       {scenarioObservedE2E},
	"history-done":         {scenarioHistory},
	"history-dead":         {scenarioHistory},
	"history-pause-factor": {scenarioHistory},
	"history-purge-batch":  {scenarioHistory},
	"history-purge-rate":   {scenarioHistory},
	"dashboard-rows":       {scenarioDashboard},
	"dashboard-loads":      {scenarioDashboard},
	"dashboard-loaders":    {scenarioDashboard},
	"dashboard-pause":      {scenarioDashboard},
}

// checkScenarioFlags refuses a flag of scenarioFlags set while none of
// its scenarios runs.
func (o *options) checkScenarioFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if uses, ok := scenarioFlags[f.Name]; ok && err == nil && !slices.ContainsFunc(uses, o.has) {
			err = fmt.Errorf("-%s: -scenarios selects none of the scenarios it configures (%s)", f.Name, strings.Join(uses, ", "))
		}
	})
	return err
}

func (o *options) validate() error {
	switch o.db {
	case "sqlite":
		if o.dsn != "" {
			return errors.New("-dsn is only for -db mysql or postgres")
		}
		if o.n == 0 {
			o.n = defaultSQLiteN
		}
	case "mysql":
		if o.dsn == "" {
			o.dsn = defaultMySQLDSN
		}
		if strings.HasPrefix(o.dsn, "postgres://") || strings.HasPrefix(o.dsn, "postgresql://") {
			return errors.New("-dsn: a PostgreSQL URL with -db mysql (use -db postgres, or a MySQL DSN such as " + defaultMySQLDSN + ")")
		}
		if _, err := mysql.ParseDSN(o.dsn); err != nil {
			return fmt.Errorf("-dsn: %v", err)
		}
		if o.n == 0 {
			o.n = defaultMySQLN
		}
	case "postgres":
		if o.dsn == "" {
			o.dsn = defaultPGDSN
		}
		if _, err := pgconn.ParseConfig(o.dsn); err != nil {
			return fmt.Errorf("-dsn: %v", err)
		}
		if o.n == 0 {
			o.n = defaultMySQLN
		}
	default:
		return errors.New("-db must be sqlite, mysql or postgres")
	}
	switch {
	case o.n < 1:
		return errors.New("-n must be at least 1")
	case o.workers < 1 || o.workers > maxWorkers:
		return fmt.Errorf("-workers must be between 1 and %d", maxWorkers)
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.warmup < 0:
		return errors.New("-warmup must not be negative")
	case o.overloadN < 1:
		return errors.New("-overload-n must be at least 1")
	case o.recoveryN < 1 || o.recoveryN > maxSeed:
		return fmt.Errorf("-recovery-n must be between 1 and %d", maxSeed)
	case o.recoveryKeys < 1:
		return errors.New("-recovery-keys must be at least 1")
	case o.slow < 0:
		return errors.New("-overload-slow must not be negative")
	case o.skipRecent < 0:
		return errors.New("-overload-skip-recent must not be negative")
	case o.pollEvery < 0:
		return errors.New("-poll-interval must not be negative")
	case o.backlog < 0:
		return errors.New("-backlog-interval must not be negative")
	case o.doneWindow < 0:
		return errors.New("-done-flush-window must not be negative")
	case o.doneBatch < 0:
		return errors.New("-done-batch-size must not be negative")
	case o.maxOpen < 0:
		return errors.New("-max-open-conns must not be negative")
	case o.timeout <= 0:
		return errors.New("-timeout must be positive")
	case o.historyDone < 0 || o.historyDead < 0:
		return errors.New("-history-done and -history-dead must not be negative")
	case !(o.purgeRate >= 0 && o.purgeRate <= 1000):
		return errors.New("-history-purge-rate must be 0..1000")
	case o.purgeBatch < 0 || o.purgeBatch > jdbcstore.MaxPurgeBatch:
		return fmt.Errorf("-history-purge-batch must be 0..%d", jdbcstore.MaxPurgeBatch)
	case o.purgePause != -1 && !(o.purgePause >= 0 && o.purgePause <= jdbcstore.MaxPauseFactor): // NaN too
		return fmt.Errorf("-history-pause-factor must be -1 or 0..%d", jdbcstore.MaxPauseFactor)
	case o.orderedKeys < 0:
		return errors.New("-ordered-keys must be at least 1")
	case !(o.observeSample > 0 && o.observeSample <= 1):
		return errors.New("-observe-sample must be more than 0 and at most 1")
	case o.nodes < 2 || o.nodes > maxNodes:
		return fmt.Errorf("-nodes must be between 2 and %d", maxNodes)
	case o.multiN < 0:
		return errors.New("-multinode-n must be at least 1")
	case o.multiFloor != floorInProcesses && o.multiFloor != floorInProcess:
		return fmt.Errorf("-multinode-floor must be %s or %s, got %q", floorInProcesses, floorInProcess, o.multiFloor)
	case o.orderedKeys == 0 && slices.ContainsFunc(o.scenarios, func(s string) bool { return slices.Contains(orderedScenarios, s) }):
		return errors.New("-ordered-keys must be at least 1")
	}
	if o.multiN == 0 {
		o.multiN = o.n
	}
	if err := o.validateRelay(); err != nil {
		return err
	}
	if err := o.dash.validate(); err != nil {
		return err
	}
	if o.has(scenarioWakeup) && !slices.Contains(notifyingDBs, o.db) {
		return fmt.Errorf("-scenarios: wakeup needs a database that announces commits (%s), not %s", strings.Join(notifyingDBs, ", "), o.db)
	}
	if o.has(scenarioBatch) && !o.has(scenarioPublish) {
		return errors.New("-scenarios: batch is measured against publish (batch_speedup), so it needs publish")
	}
	if o.has(scenarioLatency) && !o.has(scenarioEndToEnd) {
		return errors.New("-scenarios: latency paces itself at half the end_to_end rate, so it needs end_to_end")
	}
	if o.has(scenarioOrderedE2E) && !o.has(scenarioEndToEnd) {
		return errors.New("-scenarios: ordered_end_to_end is measured against end_to_end (ordered_ratio), so it needs end_to_end")
	}
	if o.has(scenarioObservedE2E) && !o.has(scenarioEndToEnd) {
		return errors.New("-scenarios: observed_end_to_end is measured against end_to_end (observability_cost), so it needs end_to_end")
	}
	if o.has(scenarioMultinode) && (!o.has(scenarioFloor) || !o.has(scenarioEndToEnd)) {
		return errors.New("-scenarios: multinode is measured against end_to_end / floor (multinode_ratio), so it needs floor and end_to_end")
	}
	for _, s := range []string{scenarioRecovery, scenarioOrderedRecovery} {
		if o.has(s) && !o.has(scenarioEndToEnd) {
			return fmt.Errorf("-scenarios: %s is measured against end_to_end (drain ratio, hot pace), so it needs end_to_end", s)
		}
	}
	if o.has(scenarioOrderedLatency) && !o.has(scenarioOrderedE2E) {
		return errors.New("-scenarios: ordered_latency paces itself at half the ordered_end_to_end rate, so it needs ordered_end_to_end")
	}
	return nil
}

// validateRelay checks -relay, -relay-url, -relay-workers and the relay
// scenarios, and fills the defaults of the relay.
func (o *options) validateRelay() error {
	if o.relay == "" {
		switch {
		case o.relayURL != "":
			return errors.New("-relay-url needs -relay")
		case o.relayWorkers != 0:
			return errors.New("-relay-workers needs -relay")
		case slices.ContainsFunc(o.scenarios, func(s string) bool { return slices.Contains(relayScenarios, s) }):
			return fmt.Errorf("-scenarios: the relay scenarios need -relay (%s)", strings.Join(relayNames(), " or "))
		}
		return nil
	}
	kind, ok := relayKinds[o.relay]
	if !ok {
		return fmt.Errorf("-relay must be %s, got %q", strings.Join(relayNames(), " or "), o.relay)
	}
	if o.relayURL = strings.TrimSpace(o.relayURL); o.relayURL == "" {
		o.relayURL = kind.defaultURL
	}
	if err := kind.check(o.relayURL); err != nil {
		return fmt.Errorf("-relay-url: %w", err)
	}
	switch {
	case o.relayWorkers == 0:
		o.relayWorkers = defaultRelayWorkers
	case o.relayWorkers < 1 || o.relayWorkers > maxWorkers:
		return fmt.Errorf("-relay-workers must be between 1 and %d", maxWorkers)
	}
	if o.has(scenarioRelay) && !o.has(scenarioEndToEnd) {
		return errors.New("-scenarios: relay is measured against end_to_end (relay_ratio), so it needs end_to_end")
	}
	if o.has(scenarioRelayLatency) && !o.has(scenarioRelay) {
		return errors.New("-scenarios: relay_latency paces itself at half the relay rate, so it needs relay")
	}
	return nil
}

// relayDefaults lists the default address of every -relay broker.
func relayDefaults() string {
	var s []string
	for _, name := range relayNames() {
		s = append(s, relayKinds[name].defaultURL+" for "+name)
	}
	return strings.Join(s, ", ")
}

// parseScenarios splits a comma-separated list, rejects unknown names and
// returns the scenarios in run order without duplicates.
func parseScenarios(list string) ([]string, error) {
	want := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(allScenarios, name) {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (known: %s)", name, strings.Join(allScenarios, ", "))
		}
		want[name] = true
	}
	if len(want) == 0 {
		return nil, errors.New("-scenarios must name at least one scenario")
	}
	var out []string
	for _, name := range allScenarios {
		if want[name] {
			out = append(out, name)
		}
	}
	return out, nil
}

// has reports whether the scenario is selected.
func (o *options) has(scenario string) bool { return slices.Contains(o.scenarios, scenario) }

// Bounds of -payload: the overload events carry their sequence number in a
// header, the payload is a JSON string of exactly that many bytes.
const (
	minPayload = 2
	maxPayload = 16 << 20
)

// parseSize parses a byte size: a whole number, optionally followed by B,
// KiB, MiB or GiB (also KB, MB, GB, taken as powers of 1024 too).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

// orderedKeysFlag is -ordered-keys: a number of keys, or no value for
// defaultOrderedKeys. It parses as a boolean flag so that the value may be
// left out ("-ordered-keys" alone, "-ordered-keys=500"); parseFlags takes
// the value of "-ordered-keys 500" from the next argument.
type orderedKeysFlag struct {
	keys int
	set  bool  // the flag was given
	bare bool  // given without "=value"
	err  error // a bad value, reported after parsing (the flag package would call it a bad boolean)
}

// IsBoolFlag lets the flag go without a value.
func (f *orderedKeysFlag) IsBoolFlag() bool { return true }

// String returns the number of keys.
func (f *orderedKeysFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.Itoa(f.keys)
}

// Set takes a number of keys, or "true" (no value) for the default.
func (f *orderedKeysFlag) Set(v string) error {
	f.set, f.bare = true, v == "true"
	if f.bare {
		f.keys = defaultOrderedKeys
		return nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 {
		f.err = fmt.Errorf("-ordered-keys: want a number of keys of at least 1, got %q", v)
	}
	f.keys = k
	return nil
}

// joinNegativeKeys writes "-ordered-keys -5" as "-ordered-keys=-5": the
// flag may go without a value, so the flag package would read -5 as a
// flag of its own (and report it undefined) instead of the bad value it
// is.
func joinNegativeKeys(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-ordered-keys" || a == "--ordered-keys") && i+1 < len(args) {
			if _, err := strconv.Atoi(args[i+1]); err == nil && strings.HasPrefix(args[i+1], "-") {
				out = append(out, a+"="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}
