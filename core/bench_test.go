package core_test

import (
	"context"
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

func BenchmarkPublish(b *testing.B) {
	c, err := core.NewClient(nopInserter{}, nopHotQueue{})
	if err != nil {
		b.Fatal(err)
	}
	env, err := core.JSONEvent("USER_CREATED", `{"id":123}`)
	if err != nil {
		b.Fatal(err)
	}
	tx := &benchTx{}
	ctx := core.ContextWithTx(context.Background(), tx)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Publish(ctx, env); err != nil {
			b.Fatal(err)
		}
		tx.hooks = tx.hooks[:0]
	}
}

// Allocation-free fakes so that BenchmarkPublish measures Publish itself.

type nopInserter struct{}

func (nopInserter) Insert(context.Context, core.Execer, core.Envelope, core.Lease) error { return nil }

type nopHotQueue struct{}

func (nopHotQueue) EnqueueHot(core.Envelope, core.Lease) bool { return true }
func (nopHotQueue) HotLease(core.Envelope) core.Lease         { return core.Lease{} }

type benchTx struct {
	fakeTx
	hooks []func()
}

func (*benchTx) Active() bool             { return true }
func (tx *benchTx) AfterCommit(fn func()) { tx.hooks = append(tx.hooks, fn) }
