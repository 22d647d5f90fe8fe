package prometheus

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	prom "github.com/prometheus/client_golang/prometheus"
)

// boundedLabels maps the values of a label (event types, inbox topics) to
// their entries, bounded: once max distinct values have an entry of their
// own, the others share other, whose label is OtherEventType. A value seen
// before is looked up without locking or allocating.
type boundedLabels[E any] struct {
	max      int
	newEntry func(label string) E

	known sync.Map // value → E
	mu    sync.Mutex
	n     int         // values in known, under mu
	full  atomic.Bool // n reached max: unknown values are "other" without locking
	other E
}

func (b *boundedLabels[E]) init(max int, newEntry func(label string) E) {
	b.max, b.newEntry = max, newEntry
	b.other = newEntry(OtherEventType)
}

// entry returns the entry of value. The value OtherEventType itself is
// other's, taking no place of its own.
func (b *boundedLabels[E]) entry(value string) E {
	if value == OtherEventType {
		return b.other
	}
	if e, ok := b.known.Load(value); ok {
		return e.(E)
	}
	if b.full.Load() {
		return b.other
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.known.Load(value); ok {
		return e.(E)
	}
	if b.n >= b.max {
		b.full.Store(true)
		return b.other
	}
	e := b.newEntry(validLabel(value))
	b.known.Store(value, e)
	b.n++
	return e
}

// typeLabels maps event types to their event_type label, bounded by
// Config.MaxEventTypes. Each label comes with its publish counters
// resolved and the function Observer.Publish returns, so that a publish
// allocates nothing here.
type typeLabels struct {
	boundedLabels[*typeEntry]
	published, publishErrors *prom.CounterVec
}

// typeEntry is one event_type label and what hangs off it.
type typeEntry struct {
	label string
	done  func(error) // what Observer.Publish returns for the type
}

func newTypeLabels(max int, published, publishErrors *prom.CounterVec) *typeLabels {
	t := &typeLabels{published: published, publishErrors: publishErrors}
	t.init(max, t.newEntry)
	return t
}

func (t *typeLabels) newEntry(label string) *typeEntry {
	e := &typeEntry{label: label}
	// The type's two publish series are created together by its first
	// Publish, so that a type that is only ever delivered has none, and
	// the first failed Publish of a type published before is an increment
	// rate() sees (a series born at 1 shows none).
	var (
		once              sync.Once
		published, failed prom.Counter
	)
	e.done = func(err error) {
		once.Do(func() {
			published = t.published.WithLabelValues(label)
			failed = t.publishErrors.WithLabelValues(label)
		})
		if err != nil {
			failed.Inc()
			return
		}
		published.Inc()
	}
	return e
}

// topicLabels maps inbox topics to their topic label, bounded by
// Config.MaxEventTypes as event types are, but apart from them: a program
// with many event types keeps its topics' labels all the same.
type topicLabels struct {
	boundedLabels[string]
}

func newTopicLabels(max int) *topicLabels {
	t := &topicLabels{}
	t.init(max, func(label string) string { return label })
	return t
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
