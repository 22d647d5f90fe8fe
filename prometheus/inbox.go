package prometheus

import (
	"context"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-go/outbox/core"
)

// ProcessInbox implements core.InboxObserver: it returns ctx unchanged,
// observes outbox_inbox_enqueue_to_handler_seconds{store,topic} for the
// first handling of a queued message whose enqueue time is known, and
// when the processing ends counts
// outbox_inbox_processed_total{store,topic,mode,outcome} and observes
// outbox_inbox_process_duration_seconds{store,topic,mode} (not for the
// outcomes duplicate and unhandled, nor a processing that ended before
// anything ran, core.InboxResult.NotRun).
func (c *Collector) ProcessInbox(ctx context.Context, m core.InboxMessage) (context.Context, func(core.InboxResult)) {
	s := c.inboxView(m.Store).inboxSeries(c.topics.entry(m.Topic), m.Mode)
	if s.wait != nil && m.Attempt <= 1 && !m.Redelivered && !m.Enqueued.IsZero() {
		// A message enqueued on another node may carry its clock: never
		// observe a negative wait.
		s.wait.Observe(max(0, time.Since(m.Enqueued).Seconds()))
	}
	return ctx, s.end
}

// inboxSeries are the series of one store, topic label and mode, resolved
// once, with the function ProcessInbox returns: a processing of a known
// topic allocates nothing here.
type inboxSeries struct {
	c         *Collector
	view      *inboxView     // its store's, whose label view.store is
	inboxMode core.InboxMode // and mode, its label
	topic     string
	mode      string

	outcomes [core.InboxInterrupted + 1]prom.Counter // by core.InboxOutcome; nil: created on use
	duration prom.Observer
	wait     prom.Observer // queued mode only
	end      func(core.InboxResult)
}

// modeOutcomes are the outcomes each mode reports, whose series are
// created at 0 with the others of their store, topic and mode: rate() and
// increase() see the first failure only when its series existed before.
var modeOutcomes = [...][]core.InboxOutcome{
	core.InboxTransactional: {core.InboxProcessed, core.InboxDuplicate, core.InboxFailed},
	core.InboxQueued:        {core.InboxProcessed, core.InboxRetry, core.InboxDead, core.InboxUnhandled, core.InboxInterrupted},
}

// inboxSeries returns the series of topic (a label of c.topics) in mode.
func (v *inboxView) inboxSeries(topic string, mode core.InboxMode) *inboxSeries {
	if int(mode) >= len(v.series) {
		return v.newInboxSeries(topic, mode) // a mode added to core later: not cached
	}
	if s, ok := v.series[mode].Load(topic); ok {
		return s.(*inboxSeries)
	}
	s, _ := v.series[mode].LoadOrStore(topic, v.newInboxSeries(topic, mode))
	return s.(*inboxSeries)
}

func (v *inboxView) newInboxSeries(topic string, mode core.InboxMode) *inboxSeries {
	c := v.c
	s := &inboxSeries{c: c, view: v, inboxMode: mode, topic: topic, mode: mode.String()}
	s.duration = c.inboxDuration.WithLabelValues(v.store, topic, s.mode)
	if mode == core.InboxQueued {
		s.wait = c.inboxWait.WithLabelValues(v.store, topic)
	}
	if int(mode) < len(modeOutcomes) {
		for _, o := range modeOutcomes[mode] {
			s.outcomes[o] = c.inboxProcessed.WithLabelValues(v.store, topic, s.mode, o.String())
		}
	}
	s.end = s.record
	return s
}

// record counts the outcome of one processing: on the series of the
// store's current view when ForgetStore deleted s's meanwhile (they would
// count on series no scrape sees).
func (s *inboxSeries) record(r core.InboxResult) {
	if s.view.forgotten.Load() {
		s.c.inboxView(s.view.id).inboxSeries(s.topic, s.inboxMode).record(r)
		return
	}
	if int(r.Outcome) < len(s.outcomes) && s.outcomes[r.Outcome] != nil {
		s.outcomes[r.Outcome].Inc()
	} else {
		s.c.inboxProcessed.WithLabelValues(s.view.store, s.topic, s.mode, r.Outcome.String()).Inc()
	}
	if !r.NotRun && r.Outcome != core.InboxDuplicate && r.Outcome != core.InboxUnhandled { // else nothing ran
		s.duration.Observe(max(0, r.Took.Seconds()))
	}
}
