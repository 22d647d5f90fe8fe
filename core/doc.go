// Package core holds the vocabulary of the outbox framework: the immutable
// event [Envelope] and its [Builder], the type-safe [EventType] and
// [AggregateType] interfaces, the stored [Status] values, the [Listener]
// contract, the [Store] and [Tx] seams, the [Metrics] hook and the publish path's seams.
//
// core is a leaf: it imports no other package of this module, so adapters,
// stores and dispatchers can depend on it without cycles.
//
// Delivery is at least once: a listener may see the same event more than
// once (after a crash, a lost status write or a retry) and must deduplicate by
// [Envelope.ID].
package core
