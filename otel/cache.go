package otel

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"sync"

	"github.com/outbox-go/outbox/core"
)

// The span start options every span of a kind shares, built once: an
// option converted to its interface per span would cost an allocation.
var (
	kindProducer = trace.WithSpanKind(trace.SpanKindProducer)
	kindConsumer = trace.WithSpanKind(trace.SpanKindConsumer)
	newRoot      = trace.WithNewRoot()
)

// outcomes is the number of core.Outcome values known to this package.
const outcomes = int(core.OutcomeInterrupted) + 1

// paths is the number of core.Path values known to this package.
const paths = int(core.PathRetry) + 1

// outcomeValue is an outcome type whose values are small integers from 0:
// core.Outcome, core.InboxOutcome.
type outcomeValue interface {
	~uint8
	String() string
}

// outcomeTable returns the outbox.outcome attribute of each of the first n
// values of T, each in a slice of its own so that setting it allocates
// nothing.
func outcomeTable[T outcomeValue](n int) [][]attribute.KeyValue {
	a := make([][]attribute.KeyValue, n)
	for i := range a {
		a[i] = []attribute.KeyValue{AttrOutcome.String(T(i).String())}
	}
	return a
}

// outcomeOf returns the outbox.outcome attribute of o from table, as a
// slice; a value the table lacks gets one of its own.
func outcomeOf[T outcomeValue](table [][]attribute.KeyValue, o T) []attribute.KeyValue {
	if int(o) < len(table) {
		return table[o]
	}
	return []attribute.KeyValue{AttrOutcome.String(o.String())}
}

// outcomeAttrs and inboxOutcomeAttrs are the outbox.outcome attributes of
// a delivery's and an inbox processing's outcomes.
var (
	outcomeAttrs      = outcomeTable[core.Outcome](outcomes)
	inboxOutcomeAttrs = outcomeTable[core.InboxOutcome](inboxOutcomes)
)

// outcomeAttr returns the outbox.outcome attribute of o, as a slice.
func outcomeAttr(o core.Outcome) []attribute.KeyValue { return outcomeOf(outcomeAttrs, o) }

// inboxOutcomeAttr returns the outbox.outcome attribute of an inbox's
// outcome o, as a slice.
func inboxOutcomeAttr(o core.InboxOutcome) []attribute.KeyValue {
	return outcomeOf(inboxOutcomeAttrs, o)
}

// typeInfo is what the spans and measurements of one event type share,
// built on the type's first event: the span names, the span attributes
// that do not change from one event to the next, and the attribute sets
// of the outbox's own store.
type typeInfo struct {
	typ                     string
	sendName, processName   string
	sendAttrs, processAttrs trace.SpanStartOption
	sent                    *measureSet      // messaging.client.sent.messages, no error
	own                     [paths]*pathSets // store "", by path
}

// pathSets are the attribute sets of a delivery of one event type, store
// and path.
type pathSets struct {
	spanAttrs trace.SpanStartOption // outbox.path, outbox.store
	lag       *measureSet           // outbox.delivery.lag
	outcome   [outcomes]*measureSet // process duration and deliveries, by outcome
}

// pathKey identifies the pathSets of a store of a set of databases.
type pathKey struct {
	typ, store string
	path       core.Path
}

// typeOf returns the typeInfo of the event type typ.
func (o *Observer) typeOf(typ string) *typeInfo {
	return cached(&o.types, typ, func() *typeInfo { return o.newTypeInfo(typ) })
}

// newTypeInfo builds the typeInfo of the event type typ.
func (o *Observer) newTypeInfo(typ string) *typeInfo {
	dest := semconv.MessagingDestinationName(typ)
	ti := &typeInfo{
		typ:         typ,
		sendName:    "send " + typ,
		processName: "process " + typ,
		sendAttrs: trace.WithAttributes(systemAttr, semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"), dest),
		processAttrs: trace.WithAttributes(systemAttr, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"), dest),
		sent: o.set(setKey{kind: kindSent, typ: typ}),
	}
	for p := range ti.own {
		ti.own[p] = o.newPathSets(typ, "", core.Path(p))
	}
	return ti
}

// deliverySets returns the pathSets of a delivery of ti's type from store
// by path.
func (o *Observer) deliverySets(ti *typeInfo, store string, path core.Path) *pathSets {
	if store == "" && int(path) < paths {
		return ti.own[path]
	}
	return cached(&o.paths, pathKey{typ: ti.typ, store: store, path: path}, func() *pathSets { return o.newPathSets(ti.typ, store, path) })
}

func (o *Observer) newPathSets(typ, store string, path core.Path) *pathSets {
	ps := &pathSets{
		spanAttrs: trace.WithAttributes(AttrPath.String(path.String()), AttrStore.String(store)),
		lag:       o.set(setKey{kind: kindLag, typ: typ, store: store, path: path}),
	}
	for i := range ps.outcome {
		ps.outcome[i] = o.set(setKey{kind: kindOutcome, typ: typ, store: store, path: path, outcome: core.Outcome(i)})
	}
	return ps
}

// outcomeSet returns the attribute set of a delivery attempt's outcome;
// errType is the error.type of a failed attempt, "" for the others, whose
// sets are cached in ps.
func (o *Observer) outcomeSet(ps *pathSets, ti *typeInfo, store string, path core.Path, out core.Outcome, errType string) *measureSet {
	if int(out) < outcomes && errType == "" {
		return ps.outcome[out]
	}
	return o.set(setKey{kind: kindOutcome, typ: ti.typ, store: store, path: path, outcome: out, errType: errType})
}

// storeSet returns the attribute set of a DONE write or a claim of store
// that failed with err (nil: succeeded).
func (o *Observer) storeSet(store string, err error) *measureSet {
	if store == "" && err == nil {
		return o.ownStore
	}
	return o.set(setKey{kind: kindStore, store: store, errType: errorType(err)})
}

// inboxOutcomes is the number of core.InboxOutcome values known to this
// package.
const inboxOutcomes = int(core.InboxInterrupted) + 1

// inboxModes is the number of core.InboxMode values known to this package.
const inboxModes = int(core.InboxQueued) + 1

// topicInfo is what the spans and measurements of one inbox topic share,
// built on the topic's first message: the span name, the span attributes
// that do not change from one message to the next, and the attribute
// sets of store "" by mode.
type topicInfo struct {
	topic        string
	processName  string
	processAttrs trace.SpanStartOption
	own          [inboxModes]*inboxSets // store "", by mode
}

// inboxSets are the attribute sets of the processings of one topic,
// store and mode.
type inboxSets struct {
	spanAttrs trace.SpanStartOption      // outbox.inbox.mode, outbox.store when set
	lag       *measureSet                // outbox.inbox.lag
	outcome   [inboxOutcomes]*measureSet // process duration and processed, by outcome
}

// inboxKey identifies the inboxSets of a store of a dispatcher of several
// inboxes (or of a mode this package does not know).
type inboxKey struct {
	topic, store string
	mode         core.InboxMode
}

// topicOf returns the topicInfo of the inbox topic topic.
func (o *Observer) topicOf(topic string) *topicInfo {
	return cached(&o.topics, topic, func() *topicInfo { return o.newTopicInfo(topic) })
}

// newTopicInfo builds the topicInfo of the inbox topic topic.
func (o *Observer) newTopicInfo(topic string) *topicInfo {
	ti := &topicInfo{topic: topic}
	if topic == "" {
		ti.processName = "process inbox"
		ti.processAttrs = trace.WithAttributes(systemAttr, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"))
	} else {
		ti.processName = "process " + topic
		ti.processAttrs = trace.WithAttributes(systemAttr, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"), semconv.MessagingDestinationName(topic))
	}
	for m := range ti.own {
		ti.own[m] = o.newInboxSets(topic, "", core.InboxMode(m))
	}
	return ti
}

// inboxSetsOf returns the inboxSets of a processing of ti's topic from
// store in mode.
func (o *Observer) inboxSetsOf(ti *topicInfo, store string, mode core.InboxMode) *inboxSets {
	if store == "" && int(mode) < inboxModes {
		return ti.own[mode]
	}
	return cached(&o.inbox, inboxKey{topic: ti.topic, store: store, mode: mode}, func() *inboxSets { return o.newInboxSets(ti.topic, store, mode) })
}

func (o *Observer) newInboxSets(topic, store string, mode core.InboxMode) *inboxSets {
	span := []attribute.KeyValue{AttrInboxMode.String(mode.String())}
	if store != "" {
		span = append(span, AttrStore.String(store))
	}
	is := &inboxSets{
		spanAttrs: trace.WithAttributes(span...),
		lag:       o.set(setKey{kind: kindInboxLag, typ: topic, store: store, mode: mode}),
	}
	for i := range is.outcome {
		is.outcome[i] = o.set(setKey{kind: kindInboxOutcome, typ: topic, store: store, mode: mode, inboxOutcome: core.InboxOutcome(i)})
	}
	return is
}

// inboxOutcomeSet returns the attribute set of an inbox processing's
// outcome; errType is the error.type of a failed processing, "" for the
// others, whose sets are cached in is.
func (o *Observer) inboxOutcomeSet(is *inboxSets, ti *topicInfo, store string, mode core.InboxMode, out core.InboxOutcome, errType string) *measureSet {
	if int(out) < inboxOutcomes && errType == "" {
		return is.outcome[out]
	}
	return o.set(setKey{kind: kindInboxOutcome, typ: ti.topic, store: store, mode: mode, inboxOutcome: out, errType: errType})
}

// cached returns m's value for k, built by build and stored on k's first
// use. Concurrent first uses may each build one; all get the stored one.
func cached[K comparable, V any](m *sync.Map, k K, build func() V) V {
	if v, ok := m.Load(k); ok {
		return v.(V)
	}
	v, _ := m.LoadOrStore(k, build())
	return v.(V)
}
