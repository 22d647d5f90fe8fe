package prometheus

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	prom "github.com/prometheus/client_golang/prometheus"
)

// typeLabels maps event types to their event_type label, bounded: once max
// distinct types have a label of their own, the others share
// OtherEventType. Each label comes with its publish counters resolved and
// the function Observer.Publish returns, so that a publish allocates
// nothing here.
type typeLabels struct {
	max                      int
	published, publishErrors *prom.CounterVec

	known sync.Map // event type → *typeEntry
	mu    sync.Mutex
	n     int         // types in known, under mu
	full  atomic.Bool // n reached max: unknown types are "other" without locking
	other *typeEntry
}

// typeEntry is one event_type label and what hangs off it.
type typeEntry struct {
	label string
	done  func(error) // what Observer.Publish returns for the type
}

func newTypeLabels(max int, published, publishErrors *prom.CounterVec) *typeLabels {
	t := &typeLabels{max: max, published: published, publishErrors: publishErrors}
	t.other = t.newEntry(OtherEventType)
	return t
}

func (t *typeLabels) newEntry(label string) *typeEntry {
	label = validLabel(label)
	e := &typeEntry{label: label}
	// The children are created on first use, so that a type that is only
	// ever delivered has no publish series at 0.
	e.done = func(err error) {
		if err != nil {
			t.publishErrors.WithLabelValues(label).Inc()
			return
		}
		t.published.WithLabelValues(label).Inc()
	}
	return e
}

// entry returns the label of eventType.
func (t *typeLabels) entry(eventType string) *typeEntry {
	if e, ok := t.known.Load(eventType); ok {
		return e.(*typeEntry)
	}
	if t.full.Load() {
		return t.other
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.known.Load(eventType); ok {
		return e.(*typeEntry)
	}
	if t.n >= t.max {
		t.full.Store(true)
		return t.other
	}
	e := t.newEntry(eventType)
	t.known.Store(eventType, e)
	t.n++
	return e
}

// validLabel returns s with any invalid UTF-8 replaced: the client library
// panics on a label value that is not valid UTF-8, and a signal must never
// panic. The outbox validates event types and store ids already; this only
// makes sure.
func validLabel(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
