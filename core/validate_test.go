package core_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// jsonOfSize returns a valid JSON document (a string literal) of exactly n bytes.
func jsonOfSize(n int) []byte {
	doc := make([]byte, n)
	doc[0], doc[n-1] = '"', '"'
	for i := 1; i < n-1; i++ {
		doc[i] = 'a'
	}
	return doc
}

// ev starts a builder whose only problem, if any, is what the case adds.
func ev() *core.Builder { return core.NewEvent("UserCreated").PayloadJSONString(`{}`) }

// Text fields checked for valid UTF-8, NUL and length. set applies a value
// to a builder that is otherwise valid.
var textFields = []struct {
	field  string
	max    int
	tooLng error
	set    func(b *core.Builder, v string) *core.Builder
}{
	{"event_id", core.MaxEventIDLen, core.ErrInvalidEventID, func(b *core.Builder, v string) *core.Builder { return b.ID(v) }},
	{"event_type", core.MaxEventTypeLen, core.ErrEventTypeTooLong, func(_ *core.Builder, v string) *core.Builder {
		return core.NewEvent(v).PayloadJSONString(`{}`)
	}},
	{"aggregate_type", core.MaxAggregateTypeLen, core.ErrAggregateTypeTooLong, func(b *core.Builder, v string) *core.Builder { return b.AggregateType(v) }},
	{"aggregate_id", core.MaxAggregateIDLen, core.ErrAggregateIDTooLong, func(b *core.Builder, v string) *core.Builder { return b.AggregateID(v) }},
	{"tenant_id", core.MaxTenantIDLen, core.ErrTenantIDTooLong, func(b *core.Builder, v string) *core.Builder { return b.TenantID(v) }},
}

func TestLimitsMatchSchema(t *testing.T) {
	// Column widths VARCHAR(36), (128), (64), (128), (64); a 1 MB payload.
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"MaxEventIDLen", core.MaxEventIDLen, 36},
		{"MaxEventTypeLen", core.MaxEventTypeLen, 128},
		{"MaxAggregateTypeLen", core.MaxAggregateTypeLen, 64},
		{"MaxAggregateIDLen", core.MaxAggregateIDLen, 128},
		{"MaxTenantIDLen", core.MaxTenantIDLen, 64},
		{"MaxPayloadBytes", core.MaxPayloadBytes, 1_048_576},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestTextFieldLimits(t *testing.T) {
	for _, f := range textFields {
		for _, r := range []string{"a", "é", "€", "😀"} { // 1-, 2-, 3- and 4-byte runes
			t.Run(f.field+"/"+r, func(t *testing.T) {
				atLimit := strings.Repeat(r, f.max)
				env, err := f.set(ev(), atLimit).Build()
				if err != nil {
					t.Fatalf("%d runes of %q (%d bytes): %v", f.max, r, len(atLimit), err)
				}
				if err := env.Validate(); err != nil {
					t.Fatalf("Validate of built envelope: %v", err)
				}
				_, err = f.set(ev(), atLimit+r).Build()
				requireValidationError(t, err, f.tooLng, f.field)
			})
		}
	}
}

func TestTextFieldInvalidUTF8AndNUL(t *testing.T) {
	bad := map[string]string{
		"invalid UTF-8":  "ab\xffcd",
		"truncated rune": "caf\xc3",
		"surrogate":      "\xed\xa0\x80",
		"NUL":            "ab\x00cd",
		"only NUL":       "\x00",
		"NUL after text": strings.Repeat("a", 10) + "\x00",
	}
	for _, f := range textFields {
		for name, v := range bad {
			t.Run(f.field+"/"+name, func(t *testing.T) {
				_, err := f.set(ev(), v).Build()
				requireValidationError(t, err, core.ErrInvalidText, f.field)
				if strings.Contains(err.Error(), v) {
					t.Errorf("error message echoes the field content: %q", err.Error())
				}
			})
		}
	}
}

func TestValidationErrors(t *testing.T) {
	mib := core.MaxPayloadBytes
	tests := []struct {
		name  string
		b     func() *core.Builder
		want  error // nil: Build must succeed
		field string
	}{
		// event type
		{"empty event type", func() *core.Builder { return core.NewEvent("").PayloadJSONString(`{}`) }, core.ErrEmptyEventType, "event_type"},
		{"NewEventOf(nil)", func() *core.Builder { return core.NewEventOf(nil).PayloadJSONString(`{}`) }, core.ErrEmptyEventType, "event_type"},
		{"NewEventOf empty name", func() *core.Builder { return core.NewEventOf(core.StringEventType("")).PayloadJSONString(`{}`) }, core.ErrEmptyEventType, "event_type"},
		{"event type 128", func() *core.Builder { return core.NewEvent(strings.Repeat("t", 128)).PayloadJSONString(`{}`) }, nil, ""},
		{"event type 129", func() *core.Builder { return core.NewEvent(strings.Repeat("t", 129)).PayloadJSONString(`{}`) }, core.ErrEventTypeTooLong, "event_type"},
		{"event type 128 runes é", func() *core.Builder { return core.NewEvent(strings.Repeat("é", 128)).PayloadJSONString(`{}`) }, nil, ""},
		{"event type 129 runes é", func() *core.Builder { return core.NewEvent(strings.Repeat("é", 129)).PayloadJSONString(`{}`) }, core.ErrEventTypeTooLong, "event_type"},
		// aggregate type / id, tenant
		{"aggregate type 64", func() *core.Builder { return ev().AggregateType(strings.Repeat("a", 64)) }, nil, ""},
		{"aggregate type 65", func() *core.Builder { return ev().AggregateType(strings.Repeat("a", 65)) }, core.ErrAggregateTypeTooLong, "aggregate_type"},
		{"aggregate type via AggregateTypeOf 65", func() *core.Builder {
			return ev().AggregateTypeOf(core.StringAggregateType(strings.Repeat("a", 65)))
		}, core.ErrAggregateTypeTooLong, "aggregate_type"},
		{"aggregate id 128", func() *core.Builder { return ev().AggregateID(strings.Repeat("i", 128)) }, nil, ""},
		{"aggregate id 129", func() *core.Builder { return ev().AggregateID(strings.Repeat("i", 129)) }, core.ErrAggregateIDTooLong, "aggregate_id"},
		{"tenant id 64", func() *core.Builder { return ev().TenantID(strings.Repeat("t", 64)) }, nil, ""},
		{"tenant id 65", func() *core.Builder { return ev().TenantID(strings.Repeat("t", 65)) }, core.ErrTenantIDTooLong, "tenant_id"},
		// event id
		{"event id 36", func() *core.Builder { return ev().ID(strings.Repeat("x", 36)) }, nil, ""},
		{"event id uuid", func() *core.Builder { return ev().ID("0b5a3c1e-8d7f-4e2a-9c6b-1f0e2d3c4b5a") }, nil, ""},
		{"event id 37", func() *core.Builder { return ev().ID(strings.Repeat("x", 37)) }, core.ErrInvalidEventID, "event_id"},
		{"event id empty means default", func() *core.Builder { return ev().ID("") }, nil, ""},
		{"event id reset to empty", func() *core.Builder { return ev().ID("explicit").ID("") }, nil, ""},
		// headers
		{"header empty key", func() *core.Builder { return ev().Header("", "v") }, core.ErrInvalidHeader, "headers"},
		{"header empty key and value", func() *core.Builder { return ev().Header("", "") }, core.ErrInvalidHeader, "headers"},
		{"headers map empty key", func() *core.Builder { return ev().Headers(map[string]string{"ok": "1", "": "v"}) }, core.ErrInvalidHeader, "headers"},
		{"header invalid UTF-8 key", func() *core.Builder { return ev().Header("k\xff", "v") }, core.ErrInvalidHeader, "headers"},
		{"header invalid UTF-8 value", func() *core.Builder { return ev().Header("k", "v\xc3") }, core.ErrInvalidHeader, "headers"},
		{"header NUL key", func() *core.Builder { return ev().Header("k\x00", "v") }, core.ErrInvalidHeader, "headers"},
		{"header NUL value", func() *core.Builder { return ev().Header("k", "\x00") }, core.ErrInvalidHeader, "headers"},
		{"header empty value OK", func() *core.Builder { return ev().Header("k", "") }, nil, ""},
		{"header unicode OK", func() *core.Builder { return ev().Header("clé", "välue 😀") }, nil, ""},
		// payload presence
		{"no payload", func() *core.Builder { return core.NewEvent("E") }, core.ErrNoPayload, "payload"},
		{"both payloads json first", func() *core.Builder { return ev().PayloadBytes([]byte("x")) }, core.ErrBothPayloads, "payload"},
		{"both payloads bytes first", func() *core.Builder {
			return core.NewEvent("E").PayloadBytes([]byte("x")).PayloadJSONString(`{}`)
		}, core.ErrBothPayloads, "payload"},
		{"both payloads value", func() *core.Builder { return core.NewEvent("E").PayloadValue(1).PayloadBytes([]byte("x")) }, core.ErrBothPayloads, "payload"},
		// JSON
		{"invalid JSON", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(`{"a":`) }, core.ErrInvalidJSON, "payload"},
		{"invalid JSON trailing garbage", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(`{} x`) }, core.ErrInvalidJSON, "payload"},
		{"empty JSON string", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(``) }, core.ErrInvalidJSON, "payload"},
		{"nil JSON", func() *core.Builder { return core.NewEvent("E").PayloadJSON(nil) }, core.ErrInvalidJSON, "payload"},
		{"JSON string not UTF-8", func() *core.Builder { return core.NewEvent("E").PayloadJSON([]byte("{\"n\":\"caf\xe9\"}")) }, core.ErrInvalidJSON, "payload"},
		{"JSON key not UTF-8", func() *core.Builder { return core.NewEvent("E").PayloadJSONString("{\"\xff\":1}") }, core.ErrInvalidJSON, "payload"},
		{"JSON UTF-8 OK", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(`{"n":"café 😀"}`) }, nil, ""},
		{"JSON scalar OK", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(` 42 `) }, nil, ""},
		{"JSON null OK", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(`null`) }, nil, ""},
		{"PayloadValue channel", func() *core.Builder { return core.NewEvent("E").PayloadValue(make(chan int)) }, core.ErrInvalidJSON, "payload"},
		{"PayloadValue func", func() *core.Builder { return core.NewEvent("E").PayloadValue(func() {}) }, core.ErrInvalidJSON, "payload"},
		{"PayloadValue NaN", func() *core.Builder { return core.NewEvent("E").PayloadValue(math.NaN()) }, core.ErrInvalidJSON, "payload"},
		{"PayloadValue struct OK", func() *core.Builder {
			return core.NewEvent("E").PayloadValue(struct{ Name string }{"John"})
		}, nil, ""},
		{"PayloadValue nil is JSON null", func() *core.Builder { return core.NewEvent("E").PayloadValue(nil) }, nil, ""},
		// size
		{"bytes payload 1 MiB", func() *core.Builder { return core.NewEvent("E").PayloadBytes(make([]byte, mib)) }, nil, ""},
		{"bytes payload 1 MiB + 1", func() *core.Builder { return core.NewEvent("E").PayloadBytes(make([]byte, mib+1)) }, core.ErrPayloadTooLarge, "payload"},
		{"JSON payload 1 MiB", func() *core.Builder { return core.NewEvent("E").PayloadJSON(jsonOfSize(mib)) }, nil, ""},
		{"JSON payload 1 MiB + 1", func() *core.Builder { return core.NewEvent("E").PayloadJSON(jsonOfSize(mib + 1)) }, core.ErrPayloadTooLarge, "payload"},
		{"invalid JSON 1 MiB + 1 reports size", func() *core.Builder {
			return core.NewEvent("E").PayloadJSON(make([]byte, mib+1))
		}, core.ErrPayloadTooLarge, "payload"},
		// Observed: a nil bytes payload counts as "no payload", an empty
		// non-nil one is a valid zero-length payload.
		{"PayloadBytes(nil)", func() *core.Builder { return core.NewEvent("E").PayloadBytes(nil) }, core.ErrNoPayload, "payload"},
		{"PayloadBytes(empty)", func() *core.Builder { return core.NewEvent("E").PayloadBytes([]byte{}) }, nil, ""},
		{"PayloadBytes(nil) after JSON", func() *core.Builder { return core.NewEvent("E").PayloadJSONString(`{}`).PayloadBytes(nil) }, nil, ""},
		{"PayloadBytes(nil) clears bytes", func() *core.Builder { return core.NewEvent("E").PayloadBytes([]byte("x")).PayloadBytes(nil) }, core.ErrNoPayload, "payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := tc.b().Build()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				if err := env.Validate(); err != nil {
					t.Fatalf("Validate of built envelope: %v", err)
				}
				if err := core.Unvalidated(env).Validate(); err != nil {
					t.Fatalf("full re-validation of built envelope: %v", err)
				}
				return
			}
			requireValidationError(t, err, tc.want, tc.field)
			if env.ID() != "" || env.Type() != "" || env.PayloadLen() != 0 {
				t.Errorf("failed Build returned a non-zero envelope: id=%q type=%q", env.ID(), env.Type())
			}
		})
	}
}

func TestDefaultIDWhenEmpty(t *testing.T) {
	for _, b := range []*core.Builder{ev(), ev().ID(""), ev().ID("explicit").ID("")} {
		env := mustBuild(t, b)
		if len(env.ID()) != 26 {
			t.Errorf("ID = %q, want a 26-character ULID", env.ID())
		}
	}
	env := mustBuild(t, ev().ID("order-42"))
	if env.ID() != "order-42" {
		t.Errorf("explicit ID = %q, want order-42", env.ID())
	}
}

func TestPayloadBytesNilVersusEmpty(t *testing.T) {
	// Observed behaviour, documented: PayloadBytes(nil) is "no payload"
	// (ErrNoPayload); PayloadBytes([]byte{}) is a valid empty bytes payload.
	_, err := core.NewEvent("E").PayloadBytes(nil).Build()
	requireValidationError(t, err, core.ErrNoPayload, "payload")

	env := mustBuild(t, core.NewEvent("E").PayloadBytes([]byte{}))
	if env.PayloadKind() != core.PayloadBytes || env.PayloadLen() != 0 || env.IsJSON() {
		t.Fatalf("kind=%v len=%d", env.PayloadKind(), env.PayloadLen())
	}
	if env.RawPayload() == nil {
		t.Errorf("RawPayload of an empty bytes payload is nil; it must stay non-nil to remain valid")
	}
	// A valid envelope's payload, as returned by the public accessor, must
	// build an equally valid envelope again (and survive a store round trip).
	p := env.Payload()
	if p == nil {
		t.Errorf("Payload() of a valid empty bytes payload returned nil, which PayloadBytes/Record.Envelope reject as ErrNoPayload")
	}
	if _, err := core.NewEvent("E").PayloadBytes(p).Build(); err != nil {
		t.Errorf("rebuilding from env.Payload(): %v", err)
	}
}

func TestLaterPayloadJSONReplacesFailedPayloadValue(t *testing.T) {
	// Setters never fail and the last one wins; a JSON payload set after a
	// PayloadValue that could not be marshaled replaces it entirely.
	b := core.NewEvent("E").PayloadValue(make(chan int))
	_, err := b.Build()
	requireValidationError(t, err, core.ErrInvalidJSON, "payload")

	b.PayloadJSONString(`{"ok":true}`)
	env, err := b.Build()
	if err != nil {
		t.Fatalf("Build after replacing the failed PayloadValue with valid JSON: %v", err)
	}
	if env.PayloadString() != `{"ok":true}` {
		t.Errorf("payload = %s", env.PayloadString())
	}
}

func TestPayloadValueAfterFailureSucceeds(t *testing.T) {
	b := core.NewEvent("E").PayloadValue(make(chan int))
	b.PayloadValue(map[string]int{"n": 1})
	env := mustBuild(t, b)
	if env.PayloadString() != `{"n":1}` {
		t.Errorf("payload = %s", env.PayloadString())
	}
}

func TestZeroEnvelopeValidate(t *testing.T) {
	err := core.Envelope{}.Validate()
	requireValidationError(t, err, core.ErrEmptyEventType, "event_type")
}

func TestValidateIsCachedForBuiltEnvelopes(t *testing.T) {
	env := mustBuild(t, ev().Header("k", "v"))
	for range 3 {
		if err := env.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := core.Unvalidated(env).Validate(); err != nil {
		t.Fatalf("full validation of a built envelope: %v", err)
	}
}

func TestValidationErrorMessage(t *testing.T) {
	ve := &core.ValidationError{Field: "tenant_id", Err: core.ErrTenantIDTooLong}
	if got, want := ve.Error(), core.ErrTenantIDTooLong.Error()+" (field tenant_id)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	ve.Msg = "65 characters, limit 64"
	if got, want := ve.Error(), core.ErrTenantIDTooLong.Error()+" (field tenant_id: 65 characters, limit 64)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(ve, core.ErrTenantIDTooLong) || errors.Unwrap(ve) != core.ErrTenantIDTooLong {
		t.Error("ValidationError does not unwrap to its sentinel")
	}
	// Wrapped further, the sentinel and the type stay reachable.
	wrapped := errors.Join(errors.New("context"), ve)
	var got *core.ValidationError
	if !errors.As(wrapped, &got) || got.Field != "tenant_id" || !errors.Is(wrapped, core.ErrTenantIDTooLong) {
		t.Error("wrapped ValidationError not reachable")
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range validationSentinels {
		if seen[s.Error()] {
			t.Errorf("duplicate sentinel message %q", s.Error())
		}
		seen[s.Error()] = true
		for _, o := range validationSentinels {
			if s != o && errors.Is(s, o) {
				t.Errorf("%v matches %v", s, o)
			}
		}
	}
}

func TestJSONOfSizeHelper(t *testing.T) {
	for _, n := range []int{2, 3, 1024} {
		doc := jsonOfSize(n)
		if len(doc) != n || !json.Valid(doc) {
			t.Fatalf("jsonOfSize(%d): len %d valid %v", n, len(doc), json.Valid(doc))
		}
	}
}
