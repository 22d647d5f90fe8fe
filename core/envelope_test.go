package core_test

import (
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/outbox-go/outbox/core"
)

func TestDefaultIDIsULID(t *testing.T) {
	before := time.Now()
	env := mustBuild(t, ev())
	after := time.Now()

	if len(env.ID()) != ulid.EncodedSize {
		t.Fatalf("ID %q has %d characters, want %d", env.ID(), len(env.ID()), ulid.EncodedSize)
	}
	id, err := ulid.ParseStrict(env.ID())
	if err != nil {
		t.Fatalf("ID %q is not a ULID: %v", env.ID(), err)
	}
	if id.String() != env.ID() {
		t.Errorf("ID %q is not canonical (re-encodes as %q)", env.ID(), id.String())
	}
	ms := int64(id.Time())
	if ms < before.UnixMilli() || ms > after.UnixMilli() {
		t.Errorf("ULID time %d ms outside [%d, %d]", ms, before.UnixMilli(), after.UnixMilli())
	}
}

// Default ids grow, build after build.
func TestDefaultIDsMonotonic(t *testing.T) {
	const n = 10_000
	b := ev()
	prev := ""
	var prevID ulid.ULID
	for i := range n {
		env := mustBuild(t, b)
		id := ulid.MustParseStrict(env.ID())
		if i > 0 {
			if env.ID() <= prev {
				t.Fatalf("build %d: id %s not greater than previous %s", i, env.ID(), prev)
			}
			if id.Compare(prevID) <= 0 {
				t.Fatalf("build %d: ulid %s not greater than previous %s", i, id, prevID)
			}
		}
		prev, prevID = env.ID(), id
	}
}

func TestDefaultIDsUniqueAcrossGoroutines(t *testing.T) {
	const goroutines, perG = 8, 1000
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			b := core.NewEvent("E").PayloadJSONString(`{}`)
			out := make([]string, 0, perG)
			for range perG {
				env, err := b.Build()
				if err != nil {
					t.Error(err)
					return
				}
				out = append(out, env.ID())
			}
			ids[g] = out
		})
	}
	wg.Wait()
	seen := make(map[string]bool, goroutines*perG)
	for _, out := range ids {
		for _, id := range out {
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != goroutines*perG {
		t.Fatalf("%d ids, want %d", len(seen), goroutines*perG)
	}
}

func TestOccurredAtDefaultsToNow(t *testing.T) {
	before := time.Now()
	env := mustBuild(t, ev())
	after := time.Now()

	got := env.OccurredAt()
	if got.Location() != time.UTC {
		t.Errorf("location = %v, want UTC", got.Location())
	}
	if got.Nanosecond()%int(time.Microsecond) != 0 {
		t.Errorf("OccurredAt %v not truncated to microseconds", got)
	}
	if got.Before(before.Truncate(time.Microsecond)) || got.After(after) {
		t.Errorf("OccurredAt %v outside [%v, %v]", got, before, after)
	}
	if strings.Contains(got.String(), "m=") {
		t.Errorf("OccurredAt %v keeps a monotonic clock reading", got)
	}
}

func TestOccurredAtExplicitBecomesUTC(t *testing.T) {
	zone := time.FixedZone("UTC+05:30", 5*3600+30*60)
	in := time.Date(2024, 2, 29, 23, 59, 58, 123_456_789, zone)
	env := mustBuild(t, ev().OccurredAt(in))
	got := env.OccurredAt()

	want := time.Date(2024, 2, 29, 18, 29, 58, 123_456_000, time.UTC)
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("OccurredAt = %v, want %v", got, want)
	}
	if got != want { // same wall, location and no monotonic reading
		t.Errorf("OccurredAt = %#v, want exactly %#v", got, want)
	}
}

func TestOccurredAtZeroMeansNow(t *testing.T) {
	before := time.Now()
	env := mustBuild(t, ev().OccurredAt(time.Time{}))
	if env.OccurredAt().Before(before.Truncate(time.Microsecond)) {
		t.Errorf("zero OccurredAt not defaulted: %v", env.OccurredAt())
	}
}

func TestDefensiveCopiesOfInputs(t *testing.T) {
	payload := []byte(`{"name":"John"}`)
	raw := []byte{1, 2, 3}
	headers := map[string]string{"a": "1", "b": "2"}

	jsonEnv := mustBuild(t, core.NewEvent("E").PayloadJSON(payload).Headers(headers))
	bytesEnv := mustBuild(t, core.NewEvent("E").PayloadBytes(raw).Headers(headers))

	copy(payload, `{"name":"Evil"}`)
	raw[0] = 9
	headers["a"] = "changed"
	headers["c"] = "added"
	delete(headers, "b")

	if got := jsonEnv.PayloadString(); got != `{"name":"John"}` {
		t.Errorf("JSON payload changed to %s", got)
	}
	if got := bytesEnv.Payload(); string(got) != "\x01\x02\x03" {
		t.Errorf("bytes payload changed to %v", got)
	}
	for _, env := range []core.Envelope{jsonEnv, bytesEnv} {
		if got, want := env.Headers(), map[string]string{"a": "1", "b": "2"}; !maps.Equal(got, want) {
			t.Errorf("headers changed to %v", got)
		}
	}
}

func TestHeadersMapCopiedWhenSet(t *testing.T) {
	// Headers copies entries at the call; later changes to the map are not seen.
	h := map[string]string{"a": "1"}
	b := ev().Headers(h)
	h["a"] = "2"
	h["z"] = "26"
	env := mustBuild(t, b)
	if got := env.Headers(); !maps.Equal(got, map[string]string{"a": "1"}) {
		t.Errorf("headers = %v", got)
	}
}

func TestPayloadCopiedAtBuild(t *testing.T) {
	// Documented: the payload slice is copied at Build, not when set.
	p := []byte(`"a"`)
	b := core.NewEvent("E").PayloadJSON(p)
	p[1] = 'b'
	env := mustBuild(t, b)
	if env.PayloadString() != `"b"` {
		t.Errorf("payload = %s, want the content at Build time", env.PayloadString())
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	env := mustBuild(t, core.NewEvent("E").PayloadJSONString(`{"k":1}`).Header("h", "v"))

	p := env.Payload()
	p[0] = 'X'
	h := env.Headers()
	h["h"] = "changed"
	h["new"] = "x"

	if env.PayloadString() != `{"k":1}` {
		t.Errorf("payload changed through Payload(): %s", env.PayloadString())
	}
	if got := env.Headers(); !maps.Equal(got, map[string]string{"h": "v"}) {
		t.Errorf("headers changed through Headers(): %v", got)
	}
	if v, ok := env.Header("h"); !ok || v != "v" {
		t.Errorf("Header(h) = %q, %v", v, ok)
	}
	if _, ok := env.Header("new"); ok {
		t.Error("Header(new) found")
	}
	// Copies of the envelope value share nothing mutable through accessors.
	cp := env
	cp.Headers()["h"] = "x"
	if v, _ := env.Header("h"); v != "v" {
		t.Error("copy of envelope changed the original")
	}
}

func TestHeadersNeverNil(t *testing.T) {
	env := mustBuild(t, ev())
	if h := env.Headers(); h == nil || len(h) != 0 {
		t.Errorf("Headers() = %#v, want empty non-nil map", h)
	}
	env.Headers()["x"] = "y" // must not panic nor stick
	if len(env.Headers()) != 0 {
		t.Error("write to Headers() result stuck")
	}
	if _, ok := env.Header("x"); ok {
		t.Error("Header(x) found on an envelope without headers")
	}
	if h := (core.Envelope{}).Headers(); h == nil {
		t.Error("zero Envelope Headers() is nil")
	}
}

func TestReusedBuilderDoesNotShareHeaders(t *testing.T) {
	b := core.NewEvent("E").PayloadJSONString(`{}`).Header("a", "1")
	e1 := mustBuild(t, b)
	b.Header("b", "2")
	e2 := mustBuild(t, b)
	b.Header("a", "overwritten")
	e3 := mustBuild(t, b)

	if got := e1.Headers(); !maps.Equal(got, map[string]string{"a": "1"}) {
		t.Errorf("e1 headers = %v", got)
	}
	if got := e2.Headers(); !maps.Equal(got, map[string]string{"a": "1", "b": "2"}) {
		t.Errorf("e2 headers = %v", got)
	}
	if got := e3.Headers(); !maps.Equal(got, map[string]string{"a": "overwritten", "b": "2"}) {
		t.Errorf("e3 headers = %v", got)
	}
	if e1.ID() == e2.ID() || e2.ID() == e3.ID() {
		t.Error("reused builder gave the same default id twice")
	}
	// A failed Build leaves the builder usable.
	b.Header("", "bad")
	if _, err := b.Build(); !errors.Is(err, core.ErrInvalidHeader) {
		t.Fatalf("err = %v", err)
	}
	if got := e3.Headers(); len(got) != 2 {
		t.Errorf("failed Build changed an earlier envelope: %v", got)
	}
}

func TestReusedBuilderDoesNotSharePayload(t *testing.T) {
	buf := []byte(`{"n":1}`)
	b := core.NewEvent("E").PayloadJSON(buf)
	e1 := mustBuild(t, b)
	copy(buf, `{"n":2}`)
	e2 := mustBuild(t, b)
	if e1.PayloadString() != `{"n":1}` || e2.PayloadString() != `{"n":2}` {
		t.Errorf("payloads = %s, %s", e1.PayloadString(), e2.PayloadString())
	}
}

func TestBuilderSettersAndAccessors(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	env := mustBuild(t, core.NewEvent("OrderCreated").
		ID("evt-1").
		OccurredAt(at).
		AggregateType("ORDER").
		AggregateID("order-456").
		TenantID("tenant-123").
		Header("trace", "abc").
		Headers(map[string]string{"x": "y"}).
		PayloadJSONString(`{"total":10}`))

	checks := []struct{ name, got, want string }{
		{"ID", env.ID(), "evt-1"},
		{"Type", env.Type(), "OrderCreated"},
		{"AggregateType", env.AggregateType(), "ORDER"},
		{"AggregateID", env.AggregateID(), "order-456"},
		{"TenantID", env.TenantID(), "tenant-123"},
		{"PayloadString", env.PayloadString(), `{"total":10}`},
		{"PayloadKind", env.PayloadKind().String(), "json"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !env.OccurredAt().Equal(at) {
		t.Errorf("OccurredAt = %v", env.OccurredAt())
	}
	if !env.IsJSON() || env.PayloadLen() != len(`{"total":10}`) {
		t.Errorf("IsJSON=%v PayloadLen=%d", env.IsJSON(), env.PayloadLen())
	}
	if string(env.RawPayload()) != `{"total":10}` || !maps.Equal(env.RawHeaders(), env.Headers()) {
		t.Error("raw accessors disagree with copying accessors")
	}
	if !maps.Equal(env.Headers(), map[string]string{"trace": "abc", "x": "y"}) {
		t.Errorf("Headers = %v", env.Headers())
	}
}

func TestOptionalFieldsDefaultEmpty(t *testing.T) {
	env := mustBuild(t, ev())
	if env.AggregateType() != "" || env.AggregateID() != "" || env.TenantID() != "" {
		t.Errorf("optional fields not empty: %q %q %q", env.AggregateType(), env.AggregateID(), env.TenantID())
	}
}

func TestJSONEvent(t *testing.T) {
	env, err := core.JSONEvent("UserCreated", `{"name":"John"}`)
	if err != nil {
		t.Fatal(err)
	}
	if env.Type() != "UserCreated" || env.PayloadString() != `{"name":"John"}` || !env.IsJSON() || len(env.ID()) != 26 {
		t.Errorf("JSONEvent: type=%q payload=%s json=%v id=%q", env.Type(), env.PayloadString(), env.IsJSON(), env.ID())
	}
	_, err = core.JSONEvent("UserCreated", `{`)
	requireValidationError(t, err, core.ErrInvalidJSON, "payload")
	_, err = core.JSONEvent("", `{}`)
	requireValidationError(t, err, core.ErrEmptyEventType, "event_type")
	// The listeners' wildcard is no type: no listener could be registered
	// for such an event alone (it was built and published).
	_, err = core.JSONEvent("*", `{}`)
	requireValidationError(t, err, core.ErrWildcardEventType, "event_type")
	requireValidationError(t, core.CheckEventType("*"), core.ErrWildcardEventType, "event_type")
}

func TestDecode(t *testing.T) {
	type user struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
	}
	env := mustBuild(t, core.NewEvent("UserCreated").PayloadValue(user{Name: "John", Age: 42}))
	var got user
	if err := env.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got != (user{Name: "John", Age: 42}) {
		t.Errorf("Decode = %+v", got)
	}
	var wrong struct {
		Name int `json:"name"`
	}
	if err := env.Decode(&wrong); err == nil {
		t.Error("Decode into a mismatched type succeeded")
	}
}

func TestDecodeBytesPayloadFails(t *testing.T) {
	env := mustBuild(t, core.NewEvent("E").PayloadBytes([]byte(`{"name":"John"}`)))
	var v map[string]any
	err := env.Decode(&v)
	requireValidationError(t, err, core.ErrInvalidJSON, "payload")
	if v != nil {
		t.Errorf("Decode filled %v", v)
	}
}

// Each goroutine's default ids grow while other goroutines build theirs:
// ulid.Make read the clock before its lock, so a goroutine still holding
// the previous millisecond could reseed the random part and be handed an
// id lower than one it had before (about 1 in 10,000 here).
func TestDefaultIDsMonotonicPerGoroutine(t *testing.T) {
	const goroutines, perG = 4, 50_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			b := core.NewEvent("E").PayloadJSONString(`{}`)
			prev := ""
			for i := range perG {
				env, err := b.Build()
				if err != nil {
					t.Error(err)
					return
				}
				if env.ID() <= prev {
					t.Errorf("goroutine %d, build %d: id %s not greater than its previous %s", g, i, env.ID(), prev)
					return
				}
				prev = env.ID()
			}
		})
	}
	wg.Wait()
}

// A wall clock stepped back does not take default ids back: they keep
// the last millisecond until the clock catches up.
func TestDefaultIDsMonotonicWhenTheClockStepsBack(t *testing.T) {
	now := time.Now()
	clock := now
	restore := core.SetIDClock(func() time.Time { return clock })
	defer restore()
	first := ulid.MustParseStrict(mustBuild(t, ev()).ID())
	clock = now.Add(-time.Hour)
	second := ulid.MustParseStrict(mustBuild(t, ev()).ID())
	if second.Compare(first) <= 0 {
		t.Fatalf("after the clock stepped back an hour: %s not greater than %s", second, first)
	}
	if second.Time() != first.Time() {
		t.Errorf("id time %d, want the last millisecond %d", second.Time(), first.Time())
	}
	clock = now.Add(time.Second)
	if third := ulid.MustParseStrict(mustBuild(t, ev()).ID()); third.Time() != ulid.Timestamp(clock) {
		t.Errorf("once the clock is ahead again: id time %d, want %d", third.Time(), ulid.Timestamp(clock))
	}
}
