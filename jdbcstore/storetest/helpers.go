package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// t0 is the suite's reference instant. Its nanoseconds check that stores
// truncate (never round) to microseconds.
var t0 = time.Date(2024, 3, 15, 10, 30, 0, 123456789, time.UTC)

// micro is how a store must give back an instant: UTC, truncated to
// microseconds.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// clock is a settable Config.Now.
type clock = testsupport.Clock

func newClock(t time.Time) *clock { return testsupport.NewClock(t) }

// newStore returns a fresh store using clk (when not nil) as its clock.
func (s *suite) newStore(t *testing.T, clk *clock, cfg jdbcstore.Config) *jdbcstore.Store {
	t.Helper()
	if clk != nil {
		cfg.Now = clk.Now
	}
	st := s.h.NewStore(t, cfg)
	if st == nil {
		t.Fatal("storetest: Harness.NewStore returned nil")
	}
	return st
}

// build builds an envelope or fails the test.
func build(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatalf("build envelope: %v", err)
	}
	return env
}

// jsonEvent is a minimal JSON envelope with the given id.
func jsonEvent(t *testing.T, id string) core.Envelope {
	t.Helper()
	return build(t, core.NewEvent("TestEvent").ID(id).PayloadJSONString(`{"id":"`+id+`"}`))
}

// insert stores env in its own committed transaction.
func insert(t *testing.T, st *jdbcstore.Store, env core.Envelope) {
	t.Helper()
	ctx := t.Context()
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := st.Insert(ctx, tx, env, testLease); err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert %s: %v", env.ID(), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit %s: %v", env.ID(), err)
	}
}

// get reads a record or fails the test.
func get(t *testing.T, st *jdbcstore.Store, id string) core.Record {
	t.Helper()
	rec, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	if rec.DecodeErr != nil {
		t.Fatalf("get %s: decode error: %v", id, rec.DecodeErr)
	}
	return rec
}

// mark runs a mark method and checks whether it changed a row.
func mark(t *testing.T, what string, want bool, changed bool, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if changed != want {
		t.Fatalf("%s: changed = %v, want %v", what, changed, want)
	}
}

// poll runs PollPending and returns the ids in order.
func poll(t *testing.T, st *jdbcstore.Store, now time.Time, skip time.Duration, limit int) ([]string, []core.Record) {
	t.Helper()
	recs, err := st.PollPending(t.Context(), now, skip, limit)
	if err != nil {
		t.Fatalf("PollPending(now=%s, skip=%s, limit=%d): %v", now, skip, limit, err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		if r.DecodeErr != nil {
			t.Fatalf("poll: record %s: decode error: %v", r.ID, r.DecodeErr)
		}
		ids[i] = r.ID
	}
	return ids, recs
}

// sameIDs compares id lists.
func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}
}

// sameTime compares an instant read back from the store with what it
// must be: equal, and in UTC.
func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %s, want %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
	if !got.IsZero() && got.Location() != time.UTC {
		t.Errorf("%s location = %v, want UTC", what, got.Location())
	}
}

// sameEnvelope checks that a stored record decodes back to want.
func sameEnvelope(t *testing.T, rec core.Record, want core.Envelope) {
	t.Helper()
	got, err := rec.Envelope()
	if err != nil {
		t.Fatalf("record %s: Envelope(): %v", rec.ID, err)
	}
	if got.ID() != want.ID() {
		t.Errorf("ID = %q, want %q", got.ID(), want.ID())
	}
	if got.Type() != want.Type() {
		t.Errorf("Type = %q, want %q", got.Type(), want.Type())
	}
	sameTime(t, "OccurredAt", got.OccurredAt(), want.OccurredAt())
	if got.AggregateType() != want.AggregateType() {
		t.Errorf("AggregateType = %q, want %q", got.AggregateType(), want.AggregateType())
	}
	if got.AggregateID() != want.AggregateID() {
		t.Errorf("AggregateID = %q, want %q", got.AggregateID(), want.AggregateID())
	}
	if got.TenantID() != want.TenantID() {
		t.Errorf("TenantID = %q, want %q", got.TenantID(), want.TenantID())
	}
	if !maps.Equal(got.Headers(), want.Headers()) {
		t.Errorf("Headers = %q, want %q", got.Headers(), want.Headers())
	}
	if got.PayloadKind() != want.PayloadKind() {
		t.Errorf("PayloadKind = %v, want %v", got.PayloadKind(), want.PayloadKind())
	}
	samePayload(t, rec.ID, want.PayloadKind(), got.RawPayload(), want.RawPayload())
}

// samePayload compares payloads: bytes payloads byte for byte, JSON
// payloads as JSON values (a database may normalize a JSON column).
func samePayload(t *testing.T, id string, kind core.PayloadKind, got, want []byte) {
	t.Helper()
	if kind != core.PayloadJSON {
		if !bytes.Equal(got, want) {
			t.Errorf("%s: bytes payload differs: got %d bytes, want %d bytes", id, len(got), len(want))
		}
		return
	}
	if bytes.Equal(got, want) {
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: stored JSON payload does not parse: %v", id, err)
		return
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Errorf("%s: test JSON payload does not parse: %v", id, err)
		return
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: JSON payload differs:\n got %.200s\nwant %.200s", id, got, want)
	}
}

// countsOf returns CountByStatus or fails the test.
func countsOf(t *testing.T, st *jdbcstore.Store) map[core.Status]int {
	t.Helper()
	c, err := st.CountByStatus(t.Context())
	if err != nil {
		t.Fatalf("CountByStatus: %v", err)
	}
	return c
}

// canceled returns a context that is already canceled.
func canceled(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// testOwner owns every row the suite inserts (through testLease), so the
// fenced status writes of the cases that are not about leases succeed.
const testOwner = "storetest-owner"

// testLease is the lease rows are inserted with: testOwner, far ahead.
var testLease = core.Lease{Owner: testOwner, Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}

// markDone marks one event DONE as testOwner and reports whether it changed.
func markDone(ctx context.Context, st *jdbcstore.Store, id string) (bool, error) {
	n, err := st.MarkDone(ctx, testOwner, []string{id})
	return n == 1, err
}
