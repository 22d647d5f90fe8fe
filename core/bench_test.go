package core_test

import (
	"testing"

	"github.com/outbox-go/outbox/core"
)

func BenchmarkBuildJSON(b *testing.B) {
	payload := []byte(`{"id":123,"name":"John","email":"john@example.com"}`)
	b.ReportAllocs()
	for b.Loop() {
		_, err := core.NewEventOf(UserCreated).
			AggregateTypeOf(AggregateUser).
			AggregateID("user-123").
			Header("trace", "4bf92f3577b34da6").
			Header("source", "signup").
			PayloadJSON(payload).
			Build()
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildBytes1KiB(b *testing.B) {
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte(i)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := core.NewEvent("BlobStored").PayloadBytes(payload).Build(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate measures the full rule set on an envelope read back from
// a Record (with its "already validated" mark cleared).
func BenchmarkValidate(b *testing.B) {
	hdr, _ := core.EncodeHeaders(map[string]string{"trace": "4bf92f3577b34da6", "source": "signup"})
	rec := core.Record{
		ID:            "01JABCDEFGHJKMNPQRSTVWXYZ0",
		Type:          "USER_CREATED",
		AggregateType: "USER",
		AggregateID:   "user-123",
		TenantID:      "tenant-1",
		HeadersJSON:   hdr,
		Payload:       []byte(`{"id":123,"name":"John","email":"john@example.com"}`),
		PayloadKind:   core.PayloadJSON,
	}
	env, err := rec.Envelope()
	if err != nil {
		b.Fatal(err)
	}
	env = core.Unvalidated(env)
	b.ReportAllocs()
	for b.Loop() {
		if err := env.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeHeaders encodes the trace context an Observer adds to
// every event.
func BenchmarkEncodeHeaders(b *testing.B) {
	h := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := core.EncodeHeaders(h); err != nil {
			b.Fatal(err)
		}
	}
}
