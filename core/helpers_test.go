package core_test

import (
	"bytes"
	"errors"
	"maps"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// validationSentinels lists every sentinel a *core.ValidationError may wrap.
var validationSentinels = []error{
	core.ErrEmptyEventType,
	core.ErrWildcardEventType,
	core.ErrEventTypeTooLong,
	core.ErrAggregateTypeTooLong,
	core.ErrAggregateIDTooLong,
	core.ErrTenantIDTooLong,
	core.ErrInvalidEventID,
	core.ErrInvalidText,
	core.ErrInvalidHeader,
	core.ErrNoPayload,
	core.ErrBothPayloads,
	core.ErrInvalidJSON,
	core.ErrPayloadTooLarge,
	core.ErrHeaderKeyTooLong,
	core.ErrHeadersTooLarge,
	core.ErrTimeOutOfRange,
}

// matchedSentinels returns the validation sentinels err wraps.
func matchedSentinels(err error) []error {
	var out []error
	for _, s := range validationSentinels {
		if errors.Is(err, s) {
			out = append(out, s)
		}
	}
	return out
}

// requireValidationError fails t unless err wraps want (and no other
// validation sentinel) and is a *core.ValidationError for field.
func requireValidationError(t testing.TB, err, want error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %v (field %s)", want, field)
	}
	if !errors.Is(err, want) {
		t.Fatalf("errors.Is(%v, %v) = false", err, want)
	}
	if got := matchedSentinels(err); len(got) != 1 {
		t.Fatalf("error %v wraps %d validation sentinels %v, want exactly 1", err, len(got), got)
	}
	var ve *core.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("errors.As(%v, *core.ValidationError) = false (type %T)", err, err)
	}
	if ve.Field != field {
		t.Fatalf("ValidationError.Field = %q, want %q (err: %v)", ve.Field, field, err)
	}
	if ve.Err != want {
		t.Fatalf("ValidationError.Err = %v, want %v", ve.Err, want)
	}
}

// toRecord copies env into a core.Record the way a store would write and
// read it back, using only the public API.
func toRecord(t testing.TB, env core.Envelope) core.Record {
	t.Helper()
	h, err := core.EncodeHeaders(env.Headers())
	if err != nil {
		t.Fatalf("EncodeHeaders: %v", err)
	}
	return core.Record{
		ID:            env.ID(),
		Type:          env.Type(),
		OccurredAt:    env.OccurredAt(),
		AggregateType: env.AggregateType(),
		AggregateID:   env.AggregateID(),
		TenantID:      env.TenantID(),
		HeadersJSON:   h,
		Payload:       env.Payload(),
		PayloadKind:   env.PayloadKind(),
		Status:        core.StatusNew,
	}
}

// diffEnvelopes returns a description of the first observable difference
// between a and b, or "" when they are equal through every accessor.
func diffEnvelopes(a, b core.Envelope) string {
	switch {
	case a.ID() != b.ID():
		return "ID: " + a.ID() + " != " + b.ID()
	case a.Type() != b.Type():
		return "Type: " + a.Type() + " != " + b.Type()
	case !a.OccurredAt().Equal(b.OccurredAt()):
		return "OccurredAt: " + a.OccurredAt().String() + " != " + b.OccurredAt().String()
	case a.OccurredAt().Location() != b.OccurredAt().Location():
		return "OccurredAt location: " + a.OccurredAt().Location().String() + " != " + b.OccurredAt().Location().String()
	case a.AggregateType() != b.AggregateType():
		return "AggregateType: " + a.AggregateType() + " != " + b.AggregateType()
	case a.AggregateID() != b.AggregateID():
		return "AggregateID: " + a.AggregateID() + " != " + b.AggregateID()
	case a.TenantID() != b.TenantID():
		return "TenantID: " + a.TenantID() + " != " + b.TenantID()
	case !maps.Equal(a.Headers(), b.Headers()):
		return "Headers differ"
	case a.PayloadKind() != b.PayloadKind():
		return "PayloadKind: " + a.PayloadKind().String() + " != " + b.PayloadKind().String()
	case !bytes.Equal(a.Payload(), b.Payload()):
		return "Payload differs"
	}
	return ""
}

// mustBuild builds or fails the test.
func mustBuild(t testing.TB, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return env
}
