package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Targets checked by the summary.
const (
	targetPublishRatio  = 1.05 // floor rate / publish rate, at most
	targetEndToEndRatio = 0.95 // end_to_end rate / floor rate, at least
	targetBatchSpeedup  = 5.0  // batch rate / publish rate (events/s), at least
	targetPeakRSSMiB    = 64   // overload peak RSS, at most (small payloads)
	// With -payload, overload's peak RSS may be at most
	// targetRSSBudgetFactor × the dispatcher's payload budget
	// (MaxHeldBytes) + targetRSSOverheadMiB. The factor is the garbage
	// collector's headroom: with GOGC=100 the Go heap grows to about twice
	// its live data before a collection, and payloads read by the poller
	// for rows it skips are garbage on top. The overhead is the process's
	// fixed cost (runtime, driver, SQLite's memory) and the payloads of the
	// W transactions being published. Measured on SQLite with 1 MiB
	// payloads: peak RSS ≈ 80 MiB + 2.4 × the budget.
	targetRSSBudgetFactor = 2.5
	targetRSSOverheadMiB  = 128
	targetP99us           = 100   // latency p99 in microseconds, at most
	targetWakeupP99us     = 20000 // wakeup p99 in microseconds, at most
	targetOrderedRatio    = 0.7   // ordered_end_to_end rate / end_to_end rate, at least
	targetOrderedP99us    = 1000  // ordered_latency p99 in microseconds, at most
	targetRelayRatio      = 0.7   // relay rate / end_to_end rate, at least
	targetRelayP99us      = 5000  // relay_latency p99 in microseconds, at most
	targetDrainRatio      = 0.8   // recovery drain rate / end_to_end rate, at least
	// targetObservabilityCost bounds 1 - observed_end_to_end rate /
	// end_to_end rate: OpenTelemetry may cost at most this share of the
	// throughput.
	targetObservabilityCost = 0.05
	// targetMultinodeRatio bounds (multinode rate / multinode_floor
	// rate) / (end_to_end rate / floor rate) from below.
	targetMultinodeRatio = 0.9
)

// result is one scenario's measurement: one JSON line with -json, one
// table line otherwise. Fields that do not apply are nil and omitted.
type result struct {
	DB           string   `json:"db"`
	Scenario     string   `json:"scenario"`
	N            int      `json:"n"`
	EventsPerS   *float64 `json:"events_per_s,omitempty"`
	RatioToFloor *float64 `json:"ratio_to_floor,omitempty"`
	P50us        *float64 `json:"p50_us,omitempty"`
	P90us        *float64 `json:"p90_us,omitempty"`
	P99us        *float64 `json:"p99_us,omitempty"`
	MaxUs        *float64 `json:"max_us,omitempty"`
	PeakRSSMB    *float64 `json:"peak_rss_mb,omitempty"`

	// Extra fields.
	Workers        int      `json:"workers"`
	CPUusPerEvent  *float64 `json:"cpu_us_per_event,omitempty"`    // process CPU (user+sys) per event in the timed part
	TargetPerS     *float64 `json:"target_events_per_s,omitempty"` // latency: the paced rate aimed at
	ZeroClamped    *int     `json:"zero_clamped,omitempty"`        // latency: listener ran before InTx returned
	TimeToDoneS    *float64 `json:"time_to_done_s,omitempty"`      // overload: first publish → all DONE
	PublishS       *float64 `json:"publish_s,omitempty"`           // overload: time to publish all
	PublishPerS    *float64 `json:"publish_events_per_s,omitempty"`
	ListenerSlowUs *float64 `json:"listener_slow_us,omitempty"` // overload: listener time per event
	Lost           *int     `json:"lost,omitempty"`
	Duplicates     *int     `json:"duplicates,omitempty"`
	HotDropped     *int64   `json:"hot_dropped,omitempty"`    // events left to the poller by a full hot queue
	ColdEnqueued   *int64   `json:"cold_enqueued,omitempty"`  // events the poller queued
	OrderKeys      *int     `json:"order_keys,omitempty"`     // ordered scenarios: keys the events are spread over
	PayloadBytes   *int     `json:"payload_bytes,omitempty"`  // overload: -payload
	MaxHeldMiB     *float64 `json:"max_held_mib,omitempty"`   // overload: Dispatcher.MaxHeldBytes
	RSSTargetMiB   *int     `json:"rss_target_mib,omitempty"` // overload: peak RSS target (0: none)
	Relay          string   `json:"relay,omitempty"`          // relay scenarios: the broker
	// The history scenario: the rows seeded, how long that took, and the
	// median rates of its parts (events_per_s is its publish rate).
	HistoryRows      *int     `json:"history_rows,omitempty"`
	SeedS            *float64 `json:"seed_s,omitempty"`
	HistoryE2EPerS   *float64 `json:"history_e2e_per_s,omitempty"`
	PublishPurgePerS *float64 `json:"publish_purge_per_s,omitempty"`
	PurgePerS        *float64 `json:"purge_rows_per_s,omitempty"`
	PurgeAlonePerS   *float64 `json:"purge_alone_rows_per_s,omitempty"`
	Nodes            *int     `json:"nodes,omitempty"` // multinode: processes
	// Notes say what a scenario set up differently from the others (the
	// relay scenarios: the broker destination, the dispatcher settings).
	Notes []string `json:"notes,omitempty"`
	// Rounds are the rates of every round of a throughput scenario
	// (with -rounds > 1); the line reports the median round.
	Rounds []float64 `json:"rounds_events_per_s,omitempty"`
	// Dashboard holds the dashboard scenario's page times and rates.
	Dashboard *dashboardResult `json:"dashboard,omitempty"`

	rate       float64 // unrounded events/s of a throughput scenario
	relayFloor float64 // relay: the broker floor measured in the same round, messages/s
}

// summary is the last line: the ratios against their targets.
type summary struct {
	Summary       bool     `json:"summary"`
	DB            string   `json:"db"`
	N             int      `json:"n"` // the -n flag: each scenario line states its own n
	Workers       int      `json:"workers"`
	FloorPerS     *float64 `json:"floor_events_per_s,omitempty"`
	EndToEndRatio *float64 `json:"end_to_end_ratio,omitempty"`
	PublishRatio  *float64 `json:"publish_ratio,omitempty"`
	P99us         *float64 `json:"p99_us,omitempty"`
	WakeupP99us   *float64 `json:"wakeup_p99_us,omitempty"`
	// BatchSpeedup is the batch rate / the publish rate (events/s).
	BatchSpeedup *float64 `json:"batch_speedup,omitempty"`
	// The ordered scenarios: ordered_end_to_end's keys, its rate / the
	// end_to_end rate, the events/s of ordered_one_key and the p99 of
	// ordered_latency.
	OrderedKeys  *int     `json:"ordered_keys,omitempty"`
	OrderedRatio *float64 `json:"ordered_ratio,omitempty"`
	OneKeyPerS   *float64 `json:"ordered_one_key_per_s,omitempty"`
	OrderedP99us *float64 `json:"ordered_p99_us,omitempty"`
	// The relay scenarios: the broker, the relay rate / the end_to_end
	// rate and the p99 of relay_latency.
	Relay      string   `json:"relay,omitempty"`
	RelayRatio *float64 `json:"relay_ratio,omitempty"`
	RelayP99us *float64 `json:"relay_p99_us,omitempty"`
	// The broker floor (a minimal publisher, no outbox, measured in the
	// relay's median round) and the relay rate / that floor.
	RelayFloorPerS  *float64 `json:"relay_floor_per_s,omitempty"`
	RelayFloorRatio *float64 `json:"relay_floor_ratio,omitempty"`
	// The observed scenario: the end_to_end and observed_end_to_end rates
	// and 1 - observed / end_to_end.
	EndToEndPerS      *float64 `json:"end_to_end_per_s,omitempty"`
	ObservedPerS      *float64 `json:"observed_per_s,omitempty"`
	ObservabilityCost *float64 `json:"observability_cost,omitempty"`
	// ObservedSampling is the sampling of observed_end_to_end's traces:
	// "always_sample" (every span), or "parentbased_ratio_R".
	ObservedSampling string `json:"observed_sampling,omitempty"`
	// The history scenario: its publish and end_to_end rates / the
	// empty-table ones, the purge's rows/s / the publish rate while both
	// run, and the publish rate with the purge / without.
	HistoryPublishRatio *float64 `json:"history_publish_ratio,omitempty"`
	HistoryE2ERatio     *float64 `json:"history_e2e_ratio,omitempty"`
	PurgeKeepsUp        *float64 `json:"purge_keeps_up,omitempty"`
	PurgeCost           *float64 `json:"purge_cost,omitempty"`
	// The multinode scenarios: processes, the multinode_floor and
	// multinode rates, multi_ratio = multinode / multinode_floor,
	// multinode_ratio = multi_ratio / end_to_end_ratio and the
	// duplicate deliveries of every round.
	Nodes               *int     `json:"nodes,omitempty"`
	MultinodeFloorPerS  *float64 `json:"multinode_floor_per_s,omitempty"`
	MultinodePerS       *float64 `json:"multinode_per_s,omitempty"`
	MultiRatio          *float64 `json:"multi_ratio,omitempty"`
	MultinodeRatio      *float64 `json:"multinode_ratio,omitempty"`
	MultinodeDuplicates *int     `json:"multinode_duplicates,omitempty"`
	// The recovery scenarios: the drain rate / the end_to_end rate, the
	// hot events' p99 during the drain, recovery's peak RSS, and the
	// ordered_recovery drain rate / the end_to_end rate.
	DrainRatio        *float64 `json:"drain_ratio,omitempty"`
	DrainHotP99us     *float64 `json:"drain_hot_p99_us,omitempty"`
	DrainPeakRSSMB    *float64 `json:"drain_peak_rss_mb,omitempty"`
	OrderedDrainRatio *float64 `json:"ordered_drain_ratio,omitempty"`
	PeakRSSMB         *float64 `json:"peak_rss_mb,omitempty"`
	RSSTargetMiB      *int     `json:"rss_target_mib,omitempty"`
	Lost              *int     `json:"lost,omitempty"`
	TargetsMet        bool     `json:"targets_met"`
	TargetsMissed     []string `json:"targets_missed,omitempty"`
	// LoadAvg is the 1-minute load average at the start and the end of
	// the run: other work on the machine skews every rate.
	LoadAvg []float64 `json:"loadavg_1m,omitempty"`
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// round returns v rounded to the given decimals, as a pointer.
func round(v float64, decimals int) *float64 {
	p := math.Pow10(decimals)
	return ptr(math.Round(v*p) / p)
}

// printer writes results as JSON lines or as an aligned table.
type printer struct {
	w      io.Writer
	json   bool
	header bool
}

// tableFormat is the layout of one table line.
const tableFormat = "%-7s %-19s %7s %10s %7s %9s %9s %9s %9s %8s  %s\n"

// result prints one scenario line.
func (p *printer) result(r result) {
	if p.json {
		p.writeJSON(r)
		return
	}
	if !p.header {
		p.header = true
		fmt.Fprintf(p.w, tableFormat, "db", "scenario", "n", "events/s", "ratio", "p50_us", "p90_us", "p99_us", "max_us", "rss_MiB", "notes")
	}
	var notes []string
	add := func(name string, v any) { notes = append(notes, fmt.Sprintf("%s=%v", name, v)) }
	if r.CPUusPerEvent != nil {
		add("cpu_us/event", *r.CPUusPerEvent)
	}
	if r.TargetPerS != nil {
		add("target/s", *r.TargetPerS)
	}
	if r.ZeroClamped != nil && *r.ZeroClamped > 0 {
		add("zero_clamped", *r.ZeroClamped)
	}
	if r.TimeToDoneS != nil {
		add("time_to_done_s", *r.TimeToDoneS)
	}
	if r.PublishS != nil {
		add("publish_s", *r.PublishS)
	}
	if r.ListenerSlowUs != nil {
		add("listener_us", *r.ListenerSlowUs)
	}
	if r.Lost != nil {
		add("lost", *r.Lost)
	}
	if r.Duplicates != nil {
		add("dups", *r.Duplicates)
	}
	if r.OrderKeys != nil {
		add("keys", *r.OrderKeys)
	}
	if r.HotDropped != nil {
		add("hot_dropped", *r.HotDropped)
	}
	if r.ColdEnqueued != nil {
		add("cold_enqueued", *r.ColdEnqueued)
	}
	if r.PayloadBytes != nil {
		add("payload_bytes", *r.PayloadBytes)
	}
	if r.MaxHeldMiB != nil && r.PayloadBytes != nil {
		add("max_held_mib", *r.MaxHeldMiB)
	}
	if r.Relay != "" {
		add("relay", r.Relay)
	}
	if r.HistoryRows != nil {
		add("history_rows", *r.HistoryRows)
		add("seed_s", *r.SeedS)
		add("e2e/s", *r.HistoryE2EPerS)
		add("publish+purge/s", *r.PublishPurgePerS)
		add("purge_rows/s", *r.PurgePerS)
		add("purge_alone_rows/s", *r.PurgeAlonePerS)
	}
	if r.Nodes != nil {
		add("nodes", *r.Nodes)
	}
	notes = append(notes, r.Notes...)
	fmt.Fprintf(p.w, tableFormat, r.DB, r.Scenario, fmt.Sprint(r.N), num(r.EventsPerS, 0), num(r.RatioToFloor, 3),
		num(r.P50us, 1), num(r.P90us, 1), num(r.P99us, 1), num(r.MaxUs, 1), num(r.PeakRSSMB, 1), strings.Join(notes, " "))
}

// summary prints the summary line.
func (p *printer) summary(s summary) {
	if p.json {
		p.writeJSON(s)
		return
	}
	var parts []string
	if s.PublishRatio != nil {
		parts = append(parts, fmt.Sprintf("publish_ratio %.3f (floor/publish, target <= %.2f)", *s.PublishRatio, targetPublishRatio))
	}
	if s.EndToEndRatio != nil {
		parts = append(parts, fmt.Sprintf("end_to_end_ratio %.3f (e2e/floor, target >= %.2f)", *s.EndToEndRatio, targetEndToEndRatio))
	}
	if s.BatchSpeedup != nil {
		parts = append(parts, fmt.Sprintf("batch_speedup %.2f (batch/publish events/s, %d events per tx, target >= %.0f)",
			*s.BatchSpeedup, batchSize, targetBatchSpeedup))
	}
	if s.P99us != nil {
		parts = append(parts, fmt.Sprintf("latency p99 %.1f us (target <= %d)", *s.P99us, targetP99us))
	}
	if s.OrderedRatio != nil {
		keys := ""
		if s.OrderedKeys != nil {
			keys = fmt.Sprintf(", %d keys", *s.OrderedKeys)
		}
		parts = append(parts, fmt.Sprintf("ordered_ratio %.3f (ordered/e2e%s, target >= %.2f)", *s.OrderedRatio, keys, targetOrderedRatio))
	}
	if s.OneKeyPerS != nil {
		parts = append(parts, fmt.Sprintf("one key %.1f events/s", *s.OneKeyPerS))
	}
	if s.OrderedP99us != nil {
		parts = append(parts, fmt.Sprintf("ordered latency p99 %.1f us (target <= %d)", *s.OrderedP99us, targetOrderedP99us))
	}
	if s.RelayRatio != nil {
		parts = append(parts, fmt.Sprintf("relay_ratio %.3f (%s/e2e, target >= %.2f)", *s.RelayRatio, s.Relay, targetRelayRatio))
	}
	if s.RelayFloorRatio != nil {
		parts = append(parts, fmt.Sprintf("relay_floor_ratio %.3f (%s relay/broker floor of %.0f msg/s)", *s.RelayFloorRatio, s.Relay, *s.RelayFloorPerS))
	}
	if s.RelayP99us != nil {
		parts = append(parts, fmt.Sprintf("relay latency p99 %.1f us (commit -> %s ack, target <= %d)", *s.RelayP99us, s.Relay, targetRelayP99us))
	}
	if s.ObservabilityCost != nil {
		parts = append(parts, fmt.Sprintf("observability_cost %.4f (1 - observed/e2e: %.1f vs %.1f events/s, traces %s, target <= %.2f)",
			*s.ObservabilityCost, *s.ObservedPerS, *s.EndToEndPerS, s.ObservedSampling, targetObservabilityCost))
	}
	if s.HistoryPublishRatio != nil || s.HistoryE2ERatio != nil {
		parts = append(parts, fmt.Sprintf("history_publish_ratio %s, history_e2e_ratio %s (history/empty, target >= %.2f)",
			num(s.HistoryPublishRatio, 3), num(s.HistoryE2ERatio, 3), targetHistoryRatio))
	}
	if s.PurgeKeepsUp != nil {
		parts = append(parts, fmt.Sprintf("purge_keeps_up %.3f (purge rows/s / publish rate, target >= %.1f)", *s.PurgeKeepsUp, targetPurgeKeepsUp))
	}
	if s.PurgeCost != nil {
		parts = append(parts, fmt.Sprintf("purge_cost %.3f (publish with purge / without, target >= %.2f)", *s.PurgeCost, targetPurgeCost))
	}
	if s.MultinodeRatio != nil {
		parts = append(parts, fmt.Sprintf("multinode_ratio %.3f (multi %.3f = %d nodes %.1f / floor %.1f events/s, over e2e/floor; target >= %.2f), duplicates %d",
			*s.MultinodeRatio, *s.MultiRatio, *s.Nodes, *s.MultinodePerS, *s.MultinodeFloorPerS, targetMultinodeRatio, *s.MultinodeDuplicates))
	}
	if s.WakeupP99us != nil {
		parts = append(parts, fmt.Sprintf("wakeup p99 %.1f us (target <= %d)", *s.WakeupP99us, targetWakeupP99us))
	}
	if s.PeakRSSMB != nil {
		if s.RSSTargetMiB != nil && *s.RSSTargetMiB > 0 {
			parts = append(parts, fmt.Sprintf("overload peak RSS %.1f MiB (target <= %d)", *s.PeakRSSMB, *s.RSSTargetMiB))
		} else {
			parts = append(parts, fmt.Sprintf("overload peak RSS %.1f MiB (no target without a payload budget)", *s.PeakRSSMB))
		}
	}
	if s.Lost != nil {
		parts = append(parts, fmt.Sprintf("lost %d", *s.Lost))
	}
	if s.DrainRatio != nil {
		parts = append(parts, fmt.Sprintf("drain_ratio %.3f (recovery/e2e, target >= %.2f)", *s.DrainRatio, targetDrainRatio))
	}
	if s.DrainHotP99us != nil {
		parts = append(parts, fmt.Sprintf("hot p99 during the drain %.1f us", *s.DrainHotP99us))
	}
	if s.DrainPeakRSSMB != nil {
		parts = append(parts, fmt.Sprintf("recovery peak RSS %.1f MiB (target <= %d)", *s.DrainPeakRSSMB, targetPeakRSSMiB))
	}
	if s.OrderedDrainRatio != nil {
		parts = append(parts, fmt.Sprintf("ordered_drain_ratio %.3f (ordered_recovery/e2e, no target)", *s.OrderedDrainRatio))
	}
	verdict := "all targets met"
	if !s.TargetsMet {
		verdict = "MISSED: " + strings.Join(s.TargetsMissed, ", ")
	}
	if len(s.LoadAvg) == 2 {
		parts = append(parts, fmt.Sprintf("load average %.2f -> %.2f", s.LoadAvg[0], s.LoadAvg[1]))
	}
	fmt.Fprintf(p.w, "summary %s: %s; %s\n", s.DB, strings.Join(parts, "; "), verdict)
}

// writeJSON writes v as one line.
func (p *printer) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen for these types
		fmt.Fprintf(p.w, "{\"error\":%q}\n", err.Error())
		return
	}
	fmt.Fprintf(p.w, "%s\n", b)
}

// num formats an optional number for the table ("-" when absent).
func num(v *float64, decimals int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", decimals, *v)
}
