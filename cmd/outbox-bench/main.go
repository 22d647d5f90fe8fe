// Command outbox-bench measures the outbox against the floor of its
// database: the same one-row business transaction with a bare INSERT of
// an outbox-shaped row and no framework.
//
//	go run ./cmd/outbox-bench -db sqlite -json
//	go run ./cmd/outbox-bench -db mysql -dsn 'root@tcp(127.0.0.1:3306)/test?parseTime=true' -json
//	go run ./cmd/outbox-bench -db postgres -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -json
//
// By default it runs floor, publish, batch, end_to_end, latency, overload
// and recovery (and wakeup on PostgreSQL), each on a fresh database,
// prints one line per scenario and a summary line with the ratios the
// project targets: publish_ratio = floor rate / publish rate (at most
// 1.05) and end_to_end_ratio = end_to_end rate / floor rate (at least
// 0.95). With -ordered-keys K it also runs the ordered scenarios
// (ordered_end_to_end over K keys, ordered_one_key, ordered_latency,
// ordered_recovery) and reports ordered_ratio = ordered_end_to_end rate /
// end_to_end rate (at least 0.7) and ordered_p99_us (at most 1000). With
// -relay natsjs (or rabbitmq) it also runs the relay scenarios through a broker relay
// (relay, relay_latency) and reports relay_ratio = relay rate / end_to_end
// rate (at least 0.7) and relay_p99_us, commit to broker ack (at most
// 5000):
//
//	go run ./cmd/outbox-bench -db sqlite -relay natsjs -scenarios end_to_end,relay,relay_latency
//
// With -nodes K (or -scenarios ...,multinode) it also runs multinode, K
// processes of this program on one database, and multinode_floor, the
// floor with K x W writers (in K processes of W writers by default), and
// reports multinode_ratio = (multinode rate / multinode_floor rate) /
// end_to_end_ratio (at least 0.9) and the duplicates across the processes
// (0):
//
//	go run ./cmd/outbox-bench -db mysql -scenarios floor,end_to_end,multinode
//
// With -observe it also runs observed_end_to_end, end_to_end with an
// OpenTelemetry Observer over the SDK (every span sampled), and reports
// observability_cost = 1 - observed rate / end_to_end rate (at most 0.05):
//
//	go run ./cmd/outbox-bench -db sqlite -observe -scenarios end_to_end,observed_end_to_end
//
// Each broker is one file (relay_natsjs.go, relay_rabbitmq.go) adding
// itself to relayKinds.
// Run it with -h for the details.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"syscall"
)

func main() {
	if code, ok := runNodeFromEnv(); ok { // a process of the multinode scenario
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the scenario stops and cleans up (dropping
	// its database); a second signal kills the process as usual.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// bench holds the options and what earlier scenarios measured for later
// ones (ratios, the latency pacing, the summary).
type bench struct {
	opts   *options
	log    *slog.Logger
	stderr io.Writer

	floorRate, publishRate, e2eRate float64
	orderedRate, oneKeyRate         float64  // ordered_end_to_end, ordered_one_key
	relayRate                       float64  // relay
	relayFloorRate                  float64  // relay: the broker floor of its median round
	observedRate                    float64  // observed_end_to_end
	multiFloorRate, multiRate       float64  // multinode_floor, multinode
	multiDuplicates                 int      // multinode, every round
	relayP99                        *float64 // relay_latency
	drainRate, orderedDrainRate     float64  // recovery, ordered_recovery
	drainHotP99, drainRSS           *float64 // recovery: hot p99 during the drain, peak RSS
	p99, overloadRSS, wakeupP99     *float64
	orderedP99                      *float64 // ordered_latency
	lost                            *int
	history                         *historyMeasure
	loadStart                       *float64
	rssResetErr                     error

	batchRate float64 // batch
}

// run is the whole command: parse args, run the selected scenarios, print
// their lines and the summary. It returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "outbox-bench: %v\nRun outbox-bench -h for usage.\n", err)
		return 2
	}
	logger := slog.New(slog.DiscardHandler)
	if opts.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "outbox-bench: -cpuprofile: %v\n", err)
			return 2 // a path it cannot write: bad usage, as a bad flag
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "outbox-bench: -cpuprofile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if opts.trace != "" {
		f, err := os.Create(opts.trace)
		if err != nil {
			fmt.Fprintf(stderr, "outbox-bench: -trace: %v\n", err)
			return 2 // a path it cannot write: bad usage, as a bad flag
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintf(stderr, "outbox-bench: -trace: %v\n", err)
			return 1
		}
		defer trace.Stop()
	}
	b := &bench{opts: &opts, log: logger, stderr: stderr, loadStart: loadAvg()}
	p := &printer{w: stdout, json: opts.json}
	if err := b.runAll(ctx, p); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "outbox-bench: interrupted: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "outbox-bench: %v\n", err)
		}
		return 1
	}
	s := b.summary()
	p.summary(s)
	if b.rssResetErr != nil {
		b.warn("peak RSS is the whole process's, not per scenario: %v", b.rssResetErr)
	}
	if b.lost != nil && *b.lost > 0 {
		fmt.Fprintf(stderr, "outbox-bench: %d events lost in the overload scenario\n", *b.lost)
		return 1
	}
	return 0
}

// throughputScenarios run -rounds times, interleaved.
var throughputScenarios = []string{scenarioFloor, scenarioPublish, scenarioBatch, scenarioEndToEnd, scenarioOrderedE2E, scenarioObservedE2E, scenarioRelay,
	scenarioMultinode, scenarioMultinodeFloor}

// runAll runs the selected scenarios and prints their lines. The
// throughput scenarios (floor, publish, end_to_end, ordered_end_to_end,
// observed_end_to_end, relay) run -rounds times,
// interleaved so that drifting machine load hits all of them alike, and
// each reports its median round; latency and overload run once, after
// them, since they depend on the measured rates.
func (b *bench) runAll(ctx context.Context, p *printer) error {
	funcs := map[string]func(context.Context) (result, error){
		scenarioFloor:    b.runFloor,
		scenarioPublish:  b.runPublish,
		scenarioBatch:    b.runBatch,
		scenarioEndToEnd: b.runEndToEnd,
		scenarioLatency:  b.runLatency,
		scenarioOverload: b.runOverload,
		scenarioWakeup:   b.runWakeup,

		scenarioOrderedE2E:     b.runOrderedEndToEnd,
		scenarioOrderedOneKey:  b.runOrderedOneKey,
		scenarioOrderedLatency: b.runOrderedLatency,

		scenarioObservedE2E: b.runObservedEndToEnd,

		scenarioRelay:        b.runRelay,
		scenarioRelayLatency: b.runRelayLatency,

		scenarioHistory:         b.runHistory,
		scenarioMultinodeFloor:  b.runMultinodeFloor,
		scenarioMultinode:       b.runMultinode,
		scenarioDashboard:       b.runDashboard,
		scenarioRecovery:        b.runRecovery,
		scenarioOrderedRecovery: b.runOrderedRecovery,
	}
	one := func(name string) (r result, err error) {
		// The CPU profile labels every sample with its scenario, the
		// goroutines the scenario starts included (pprof -tagfocus).
		pprof.Do(ctx, pprof.Labels("scenario", name), func(ctx context.Context) {
			r, err = funcs[name](ctx)
		})
		if err != nil {
			return r, fmt.Errorf("%s on %s: %w", name, b.opts.db, err)
		}
		if peak, err := peakRSSMiB(); err == nil {
			r.PeakRSSMB = round(peak, 1)
		}
		return r, nil
	}
	var throughput []string
	for _, name := range b.opts.scenarios {
		if slices.Contains(throughputScenarios, name) {
			throughput = append(throughput, name)
		}
	}
	rounds := map[string][]result{}
	for range b.opts.rounds {
		for _, name := range throughput {
			r, err := one(name)
			if err != nil {
				return err
			}
			rounds[name] = append(rounds[name], r)
		}
	}
	medians := map[string]result{}
	for _, name := range throughput {
		medians[name] = medianRound(rounds[name])
	}
	b.floorRate = medians[scenarioFloor].rate
	b.publishRate = medians[scenarioPublish].rate
	b.e2eRate = medians[scenarioEndToEnd].rate
	b.batchRate = medians[scenarioBatch].rate
	b.orderedRate = medians[scenarioOrderedE2E].rate
	b.relayRate = medians[scenarioRelay].rate
	b.relayFloorRate = medians[scenarioRelay].relayFloor
	b.observedRate = medians[scenarioObservedE2E].rate
	b.multiFloorRate = medians[scenarioMultinodeFloor].rate
	b.multiRate = medians[scenarioMultinode].rate
	for _, name := range throughput {
		r := medians[name]
		r.EventsPerS = round(r.rate, 1)
		switch {
		case name == scenarioMultinode && b.multiFloorRate > 0:
			r.RatioToFloor = round(r.rate/b.multiFloorRate, 3) // its own floor
		case name != scenarioFloor:
			r.RatioToFloor = b.ratioToFloor(r.rate)
		}
		p.result(r)
	}
	for _, name := range []string{scenarioLatency, scenarioOrderedOneKey, scenarioOrderedLatency, scenarioRelayLatency, scenarioOverload, scenarioWakeup, scenarioRecovery, scenarioOrderedRecovery, scenarioHistory, scenarioDashboard} {
		if !b.opts.has(name) {
			continue
		}
		r, err := one(name)
		if err != nil {
			return err
		}
		switch name {
		case scenarioOverload:
			b.overloadRSS = r.PeakRSSMB
		case scenarioRecovery:
			b.drainRSS = r.PeakRSSMB
		}
		p.result(r)
	}
	return nil
}

// medianRound returns the round with the median rate (the lower middle
// one for an even count), listing every round's rate when there are
// several.
func medianRound(rs []result) result {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(a.rate, b.rate) })
	m := sorted[(len(sorted)-1)/2]
	if len(rs) > 1 {
		for _, r := range rs {
			m.Rounds = append(m.Rounds, *round(r.rate, 1))
		}
	}
	return m
}

// newResult starts a scenario's line.
func (b *bench) newResult(scenario string, n int) result {
	return result{DB: b.opts.db, Scenario: scenario, N: n, Workers: b.opts.workers}
}

// ratioToFloor returns rate / floor rate, or nil without a floor.
func (b *bench) ratioToFloor(rate float64) *float64 {
	if b.floorRate <= 0 {
		return nil
	}
	return round(rate/b.floorRate, 3)
}

// resetRSS resets the peak-RSS mark before a scenario's timed part; a
// failure is remembered and reported once at the end.
func (b *bench) resetRSS() {
	if err := resetPeakRSS(); err != nil && b.rssResetErr == nil {
		b.rssResetErr = err
	}
}

// summary computes the summary line and checks the targets.
func (b *bench) summary() summary {
	s := summary{Summary: true, DB: b.opts.db, N: b.opts.n, Workers: b.opts.workers,
		P99us: b.p99, OrderedP99us: b.orderedP99, WakeupP99us: b.wakeupP99, PeakRSSMB: b.overloadRSS, Lost: b.lost, TargetsMet: true}
	if end := loadAvg(); b.loadStart != nil && end != nil {
		s.LoadAvg = []float64{*b.loadStart, *end}
	}
	miss := func(what string) {
		s.TargetsMet = false
		s.TargetsMissed = append(s.TargetsMissed, what)
	}
	if b.floorRate > 0 {
		s.FloorPerS = round(b.floorRate, 1)
		if b.publishRate > 0 {
			s.PublishRatio = round(b.floorRate/b.publishRate, 3)
			if *s.PublishRatio > targetPublishRatio {
				miss(fmt.Sprintf("publish_ratio <= %.2f", targetPublishRatio))
			}
		}
		if b.e2eRate > 0 {
			s.EndToEndRatio = round(b.e2eRate/b.floorRate, 3)
			if *s.EndToEndRatio < targetEndToEndRatio {
				miss(fmt.Sprintf("end_to_end_ratio >= %.2f", targetEndToEndRatio))
			}
		}
	}
	if b.batchRate > 0 && b.publishRate > 0 {
		s.BatchSpeedup = round(b.batchRate/b.publishRate, 2)
		if *s.BatchSpeedup < targetBatchSpeedup {
			miss(fmt.Sprintf("batch_speedup >= %.0f", targetBatchSpeedup))
		}
	}
	if s.P99us != nil && *s.P99us > targetP99us {
		miss(fmt.Sprintf("p99_us <= %d", targetP99us))
	}
	if b.orderedRate > 0 && b.e2eRate > 0 {
		s.OrderedRatio = round(b.orderedRate/b.e2eRate, 3)
		if *s.OrderedRatio < targetOrderedRatio {
			miss(fmt.Sprintf("ordered_ratio >= %.2f", targetOrderedRatio))
		}
	}
	if b.oneKeyRate > 0 {
		s.OneKeyPerS = round(b.oneKeyRate, 1)
	}
	if s.OrderedP99us != nil && *s.OrderedP99us > targetOrderedP99us {
		miss(fmt.Sprintf("ordered_p99_us <= %d", targetOrderedP99us))
	}
	if b.opts.relay != "" {
		s.Relay = b.opts.relay
	}
	if b.relayRate > 0 && b.e2eRate > 0 {
		s.RelayRatio = round(b.relayRate/b.e2eRate, 3)
		if *s.RelayRatio < targetRelayRatio {
			miss(fmt.Sprintf("relay_ratio >= %.2f", targetRelayRatio))
		}
	}
	if b.relayRate > 0 && b.relayFloorRate > 0 {
		s.RelayFloorPerS = round(b.relayFloorRate, 1)
		s.RelayFloorRatio = round(b.relayRate/b.relayFloorRate, 3)
	}
	if b.observedRate > 0 && b.e2eRate > 0 {
		s.EndToEndPerS = round(b.e2eRate, 1)
		s.ObservedPerS = round(b.observedRate, 1)
		s.ObservabilityCost = round(1-b.observedRate/b.e2eRate, 4)
		s.ObservedSampling = samplingName(b.opts.observeSample)
		if *s.ObservabilityCost > targetObservabilityCost {
			miss(fmt.Sprintf("observability_cost <= %.2f", targetObservabilityCost))
		}
	}
	if b.multiRate > 0 && b.multiFloorRate > 0 && s.EndToEndRatio != nil && *s.EndToEndRatio > 0 {
		s.Nodes = ptr(b.opts.nodes)
		s.MultinodeFloorPerS = round(b.multiFloorRate, 1)
		s.MultinodePerS = round(b.multiRate, 1)
		s.MultiRatio = round(b.multiRate/b.multiFloorRate, 3)
		s.MultinodeRatio = round(b.multiRate/b.multiFloorRate/(b.e2eRate/b.floorRate), 3)
		s.MultinodeDuplicates = ptr(b.multiDuplicates)
		if *s.MultinodeRatio < targetMultinodeRatio {
			miss(fmt.Sprintf("multinode_ratio >= %.2f", targetMultinodeRatio))
		}
		if b.multiDuplicates > 0 {
			miss("multinode duplicates = 0")
		}
	}
	if s.RelayP99us = b.relayP99; s.RelayP99us != nil && *s.RelayP99us > targetRelayP99us {
		miss(fmt.Sprintf("relay_p99_us <= %d", targetRelayP99us))
	}
	if s.WakeupP99us != nil && *s.WakeupP99us > targetWakeupP99us {
		miss(fmt.Sprintf("wakeup_p99_us <= %d", targetWakeupP99us))
	}
	if b.opts.orderedKeys > 0 {
		s.OrderedKeys = ptr(b.opts.orderedKeys)
	}
	if s.PeakRSSMB != nil {
		s.RSSTargetMiB = ptr(b.rssTargetMiB())
		if t := *s.RSSTargetMiB; t > 0 && *s.PeakRSSMB > float64(t) {
			miss(fmt.Sprintf("peak_rss_mb <= %d", t))
		}
	}
	if s.Lost != nil && *s.Lost > 0 {
		miss("lost = 0")
	}
	b.historySummary(&s, miss)
	b.drainSummary(&s, miss)
	return s
}

// closeDB closes and removes a scenario's database, warning on failure.
func (b *bench) closeDB(f *freshDB) {
	if err := f.Close(); err != nil {
		b.warn("cleanup: %v", err)
	}
}

// warn prints a warning line on stderr.
func (b *bench) warn(format string, args ...any) {
	fmt.Fprintf(b.stderr, "outbox-bench: warning: "+format+"\n", args...)
}
