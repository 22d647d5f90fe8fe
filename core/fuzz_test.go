package core_test

import (
	"encoding/json"
	"errors"
	"maps"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// FuzzBuild builds envelopes from arbitrary input. Build must never panic;
// a successful Build must survive a store round trip through core.Record
// unchanged; a failed one must wrap exactly one validation sentinel.
func FuzzBuild(f *testing.F) {
	f.Add("UserCreated", "USER", "123", "tenant-1", "trace", "abc", []byte(`{"name":"John"}`), true)
	f.Add("E", "", "", "", "", "", []byte(`{}`), true)
	f.Add("E", "", "", "", "", "", []byte{0, 1, 2}, false)
	f.Add("", "", "", "", "", "", []byte(`{}`), true)
	f.Add("E\x00", "A\xff", "", "", "", "", []byte(`{}`), true)
	f.Add("E", "", "", "", "", "v", []byte(`{}`), true)
	f.Add("E", "", "", "", "k", "\xff", []byte(`{}`), true)
	f.Add("E", "", "", "", "", "", []byte(`{`), true)
	f.Add("E", "", "", "", "", "", []byte(nil), false)
	f.Add("éééé", "ü", "😀", "ß", "clé", "välue", []byte("\xff\xfe"), false)
	f.Fuzz(func(t *testing.T, eventType, aggType, aggID, tenant, hk, hv string, payload []byte, asJSON bool) {
		b := core.NewEvent(eventType).AggregateType(aggType).AggregateID(aggID).TenantID(tenant)
		if hk != "" || hv != "" {
			b.Header(hk, hv)
		}
		if asJSON {
			b.PayloadJSON(payload)
		} else {
			b.PayloadBytes(payload)
		}
		env, err := b.Build()
		if err != nil {
			if n := len(matchedSentinels(err)); n != 1 {
				t.Fatalf("error %v wraps %d validation sentinels, want exactly 1", err, n)
			}
			var ve *core.ValidationError
			if !errors.As(err, &ve) || ve.Field == "" {
				t.Fatalf("error %v (%T) is not a *core.ValidationError with a field", err, err)
			}
			return
		}
		if err := core.Unvalidated(env).Validate(); err != nil {
			t.Fatalf("built envelope fails full validation: %v", err)
		}
		if env.Type() != eventType || env.AggregateType() != aggType || env.AggregateID() != aggID || env.TenantID() != tenant {
			t.Fatal("Build changed a text field")
		}
		if string(env.Payload()) != string(payload) {
			t.Fatal("Build changed the payload")
		}
		if env.IsJSON() != asJSON {
			t.Fatalf("IsJSON = %v, want %v", env.IsJSON(), asJSON)
		}
		rec := toRecord(t, env)
		got, err := rec.Envelope()
		if err != nil {
			t.Fatalf("Record.Envelope of a valid envelope: %v", err)
		}
		if d := diffEnvelopes(env, got); d != "" {
			t.Fatalf("store round trip changed the envelope: %s", d)
		}
	})
}

// FuzzDecodeHeaders feeds arbitrary column contents to DecodeHeaders. It must
// never panic, and whatever it accepts must re-encode to the same map.
func FuzzDecodeHeaders(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"a":"1"}`, `{"a":"1","b":""}`, `{"a":null}`, `{"a":1}`,
		`[]`, `{`, `{"\u0000":"\ud800"}`, `{"a":"1","a":"2"}`, " {\"k\":\"v\"} ", "{\"\xff\":\"x\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := core.DecodeHeaders(s)
		if err != nil {
			if h != nil {
				t.Fatalf("DecodeHeaders(%q) returned %v with error %v", s, h, err)
			}
			return
		}
		if h != nil && len(h) == 0 {
			t.Fatalf("DecodeHeaders(%q) returned an empty non-nil map", s)
		}
		enc, err := core.EncodeHeaders(h)
		if err != nil {
			t.Fatalf("EncodeHeaders(%v): %v", h, err)
		}
		if want, _ := json.Marshal(h); h != nil && enc != string(want) {
			t.Fatalf("EncodeHeaders(%q) = %s, json.Marshal gives %s", h, enc, want)
		}
		h2, err := core.DecodeHeaders(enc)
		if err != nil {
			t.Fatalf("DecodeHeaders(EncodeHeaders(%v)) = %v (encoded %q)", h, err, enc)
		}
		if !maps.Equal(h, h2) {
			t.Fatalf("round trip of %q: %v != %v", s, h, h2)
		}
	})
}
