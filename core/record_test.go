package core_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

func fullEnvelope(t *testing.T) core.Envelope {
	t.Helper()
	return mustBuild(t, core.NewEventOf(UserCreated).
		ID("01J0000000000000000000000A").
		OccurredAt(time.Date(2025, 6, 7, 8, 9, 10, 123_456_000, time.UTC)).
		AggregateTypeOf(AggregateUser).
		AggregateID("user-123").
		TenantID("tenant-é").
		Header("trace", "abc").
		Header("html", `<a href="x">&</a>`).
		Header("unicode", "😀 \u2028").
		PayloadJSONString(`{"name":"John","tags":["a","b"]}`))
}

func TestRecordEnvelopeRoundTrip(t *testing.T) {
	for name, env := range map[string]core.Envelope{
		"json full":   fullEnvelope(t),
		"json min":    mustBuild(t, core.NewEvent("E").PayloadJSONString(`null`)),
		"bytes":       mustBuild(t, core.NewEvent("E").PayloadBytes([]byte{0, 1, 2, 0xff}).Header("k", "v")),
		"bytes empty": mustBuild(t, core.NewEvent("E").PayloadBytes([]byte{})),
		"limits": mustBuild(t, core.NewEvent(strings.Repeat("é", core.MaxEventTypeLen)).
			ID(strings.Repeat("i", core.MaxEventIDLen)).
			AggregateType(strings.Repeat("a", core.MaxAggregateTypeLen)).
			AggregateID(strings.Repeat("d", core.MaxAggregateIDLen)).
			TenantID(strings.Repeat("t", core.MaxTenantIDLen)).
			PayloadBytes(make([]byte, core.MaxPayloadBytes))),
	} {
		t.Run(name, func(t *testing.T) {
			rec := toRecord(t, env)
			got, err := rec.Envelope()
			if err != nil {
				t.Fatalf("Record.Envelope: %v", err)
			}
			if d := diffEnvelopes(env, got); d != "" {
				t.Fatalf("round trip changed the envelope: %s", d)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if err := core.Unvalidated(got).Validate(); err != nil {
				t.Fatalf("full Validate: %v", err)
			}
		})
	}
}

func TestRecordEnvelopeEveryField(t *testing.T) {
	at := time.Date(2025, 6, 7, 8, 9, 10, 123_456_000, time.FixedZone("CEST", 2*3600))
	rec := core.Record{
		ID:            "evt-1",
		Type:          "OrderCreated",
		OccurredAt:    at,
		AggregateType: "ORDER",
		AggregateID:   "order-456",
		TenantID:      "tenant-123",
		HeadersJSON:   `{"trace":"abc","x":"y"}`,
		Payload:       []byte(`{"total":10}`),
		PayloadKind:   core.PayloadJSON,
		Status:        core.StatusRetry,
		Attempts:      3,
		AvailableAt:   at.Add(time.Minute),
		CreatedAt:     at,
		LastError:     "boom",
	}
	env, err := rec.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"ID", env.ID(), "evt-1"},
		{"Type", env.Type(), "OrderCreated"},
		{"AggregateType", env.AggregateType(), "ORDER"},
		{"AggregateID", env.AggregateID(), "order-456"},
		{"TenantID", env.TenantID(), "tenant-123"},
		{"Payload", env.PayloadString(), `{"total":10}`},
		{"PayloadKind", env.PayloadKind().String(), "json"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !env.OccurredAt().Equal(at) || env.OccurredAt().Location() != time.UTC {
		t.Errorf("OccurredAt = %v, want %v in UTC", env.OccurredAt(), at)
	}
	if !maps.Equal(env.Headers(), map[string]string{"trace": "abc", "x": "y"}) {
		t.Errorf("Headers = %v", env.Headers())
	}

	rec.PayloadKind = core.PayloadBytes
	rec.Payload = []byte{0xde, 0xad}
	env, err = rec.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	if env.PayloadKind() != core.PayloadBytes || string(env.Payload()) != "\xde\xad" {
		t.Errorf("bytes record: kind=%v payload=%x", env.PayloadKind(), env.Payload())
	}
}

func TestRecordEnvelopeHeadersNullAndEmpty(t *testing.T) {
	for _, h := range []string{"", "null", "{}"} {
		rec := core.Record{ID: "e", Type: "E", Payload: []byte(`{}`), HeadersJSON: h}
		env, err := rec.Envelope()
		if err != nil {
			t.Fatalf("headers %q: %v", h, err)
		}
		if got := env.Headers(); got == nil || len(got) != 0 {
			t.Errorf("headers %q: Headers() = %#v", h, got)
		}
	}
}

func TestRecordDecodeErr(t *testing.T) {
	cause := errors.New("corrupt base64")
	rec := core.Record{ID: "evt-7", Type: "E", Payload: []byte(`{}`), DecodeErr: cause}
	env, err := rec.Envelope()
	if !errors.Is(err, core.ErrDecode) {
		t.Fatalf("err = %v, want ErrDecode", err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("err = %v does not wrap the store's DecodeErr", err)
	}
	if !strings.Contains(err.Error(), "evt-7") {
		t.Errorf("err %q does not name the event", err)
	}
	if env.ID() != "" {
		t.Error("failed decode returned a non-zero envelope")
	}
}

func TestRecordMalformedHeaders(t *testing.T) {
	for _, h := range []string{`{`, `[]`, `{"a":1}`, `{"a":["x"]}`, `"str"`, `not json`, `{"a":"b"} x`, `123`} {
		rec := core.Record{ID: "evt-8", Type: "E", Payload: []byte(`{}`), HeadersJSON: h}
		_, err := rec.Envelope()
		if !errors.Is(err, core.ErrDecode) {
			t.Errorf("headers %q: err = %v, want ErrDecode", h, err)
		}
		if len(matchedSentinels(err)) != 0 {
			t.Errorf("headers %q: malformed JSON reported as a validation error: %v", h, err)
		}
	}
}

func TestRecordViolatingValidation(t *testing.T) {
	valid := func() core.Record {
		return core.Record{ID: "evt-9", Type: "E", Payload: []byte(`{}`), PayloadKind: core.PayloadJSON}
	}
	tests := []struct {
		name   string
		mutate func(r *core.Record)
		want   error
		field  string
	}{
		{"event type too long", func(r *core.Record) { r.Type = strings.Repeat("x", 129) }, core.ErrEventTypeTooLong, "event_type"},
		{"empty event type", func(r *core.Record) { r.Type = "" }, core.ErrEmptyEventType, "event_type"},
		{"invalid JSON payload", func(r *core.Record) { r.Payload = []byte(`{"a":`) }, core.ErrInvalidJSON, "payload"},
		{"nil JSON payload", func(r *core.Record) { r.Payload = nil }, core.ErrInvalidJSON, "payload"},
		{"unknown payload kind", func(r *core.Record) { r.PayloadKind = core.PayloadKind(7) }, core.ErrNoPayload, "payload"},
		{"empty id", func(r *core.Record) { r.ID = "" }, core.ErrInvalidEventID, "event_id"},
		{"id too long", func(r *core.Record) { r.ID = strings.Repeat("i", 37) }, core.ErrInvalidEventID, "event_id"},
		{"aggregate type too long", func(r *core.Record) { r.AggregateType = strings.Repeat("a", 65) }, core.ErrAggregateTypeTooLong, "aggregate_type"},
		{"aggregate id too long", func(r *core.Record) { r.AggregateID = strings.Repeat("a", 129) }, core.ErrAggregateIDTooLong, "aggregate_id"},
		{"tenant too long", func(r *core.Record) { r.TenantID = strings.Repeat("a", 65) }, core.ErrTenantIDTooLong, "tenant_id"},
		{"NUL in tenant", func(r *core.Record) { r.TenantID = "a\x00" }, core.ErrInvalidText, "tenant_id"},
		{"invalid UTF-8 type", func(r *core.Record) { r.Type = "\xff" }, core.ErrInvalidText, "event_type"},
		{"header empty key", func(r *core.Record) { r.HeadersJSON = `{"":"v"}` }, core.ErrInvalidHeader, "headers"},
		{"header NUL value", func(r *core.Record) { r.HeadersJSON = `{"k":"\u0000"}` }, core.ErrInvalidHeader, "headers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := valid()
			if _, err := rec.Envelope(); err != nil {
				t.Fatalf("baseline record invalid: %v", err)
			}
			tc.mutate(&rec)
			_, err := rec.Envelope()
			if !errors.Is(err, core.ErrDecode) {
				t.Fatalf("err = %v, want ErrDecode", err)
			}
			requireValidationError(t, err, tc.want, tc.field)
		})
	}
}

// A payload read back longer than MaxPayloadBytes (PostgreSQL's jsonb and
// MySQL 8 write JSON back with ", " and ": ", so a document of 1 MiB can
// come back half as long again) is delivered; its envelope cannot be
// published again as it is.
func TestRecordPayloadReadBackPastTheLimit(t *testing.T) {
	doc := []byte("[" + strings.Repeat("0, ", core.MaxPayloadBytes/2) + "0]")
	for _, rec := range []core.Record{
		{ID: "evt-json", Type: "E", Payload: doc, PayloadKind: core.PayloadJSON},
		{ID: "evt-bytes", Type: "E", Payload: make([]byte, core.MaxPayloadBytes+1), PayloadKind: core.PayloadBytes},
	} {
		env, err := rec.Envelope()
		if err != nil {
			t.Fatalf("%s: Record.Envelope of a %d-byte payload: %v", rec.ID, len(rec.Payload), err)
		}
		if env.PayloadLen() != len(rec.Payload) {
			t.Errorf("%s: payload of %d bytes, want %d", rec.ID, env.PayloadLen(), len(rec.Payload))
		}
		requireValidationError(t, env.Validate(), core.ErrPayloadTooLarge, "payload")
	}
}

func TestEncodeDecodeHeaders(t *testing.T) {
	for _, h := range []map[string]string{
		{"a": "1"},
		{"trace": "abc", "empty": "", "quote": `"\`, "html": "<&>", "unicode": "é😀\u2028", "ctl": "\t\n"},
	} {
		s, err := core.EncodeHeaders(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := core.DecodeHeaders(s)
		if err != nil {
			t.Fatalf("DecodeHeaders(%q): %v", s, err)
		}
		if !maps.Equal(got, h) {
			t.Errorf("round trip of %v gave %v (via %s)", h, got, s)
		}
	}
	for _, h := range []map[string]string{nil, {}} {
		s, err := core.EncodeHeaders(h)
		if err != nil || s != "" {
			t.Errorf("EncodeHeaders(%#v) = %q, %v; want \"\", nil", h, s, err)
		}
	}
	for _, s := range []string{"", "null", "{}", " {} ", " null"} {
		got, err := core.DecodeHeaders(s)
		if err != nil || got != nil {
			t.Errorf("DecodeHeaders(%q) = %#v, %v; want nil, nil", s, got, err)
		}
	}
	if s, _ := core.EncodeHeaders(map[string]string{"b": "2", "a": "1"}); s != `{"a":"1","b":"2"}` {
		t.Errorf("EncodeHeaders is not deterministic/sorted: %s", s)
	}
}

// EncodeHeaders writes what json.Marshal writes, byte for byte, whether
// its shortcut for a few plain headers applies or not: rows written
// before and after it read the same.
func TestEncodeHeadersIsJSONMarshal(t *testing.T) {
	many := map[string]string{}
	for i := range 9 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, h := range []map[string]string{
		{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "vendor=a,b=c", "baggage": "k=v;p=1"},
		{"z": "", "": "empty key", "a b": "~ !#$%'()*+-./:;=?@[]^_`{|}"},
		{"quote": `a"b`}, {"backslash": `a\b`}, {"html": "<"}, {"html": ">"}, {"html": "&"},
		{"ctl": "\t"}, {"del": "\x7f"}, {"utf8": "é"}, {"line sep": "\u2028"}, {"é": "key"},
		many,
	} {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := core.EncodeHeaders(h); err != nil || got != string(want) {
			t.Errorf("EncodeHeaders(%q) = %s, %v; want %s", h, got, err, want)
		}
	}
}

// A store may read an empty bytes payload back as nil: it decodes as empty.
func TestRecordNilBytesPayloadIsEmpty(t *testing.T) {
	r := core.Record{ID: "id-1", Type: "T", PayloadKind: core.PayloadBytes}
	env, err := r.Envelope()
	if err != nil {
		t.Fatalf("nil bytes payload: %v", err)
	}
	if env.PayloadLen() != 0 || env.PayloadKind() != core.PayloadBytes {
		t.Fatalf("got len %d kind %v", env.PayloadLen(), env.PayloadKind())
	}
}
