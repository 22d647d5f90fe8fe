package core_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

// headersOfSize returns one header {"h": v} whose JSON encoding is exactly
// n bytes: {"h":"…"} is 8 bytes besides the value.
func headersOfSize(n int) map[string]string {
	return map[string]string{"h": strings.Repeat("v", n-8)}
}

func encodedLen(t *testing.T, h map[string]string) int {
	t.Helper()
	s, err := core.EncodeHeaders(h)
	if err != nil {
		t.Fatal(err)
	}
	return len(s)
}

func TestHeaderLimitConstants(t *testing.T) {
	if core.MaxHeaderKeyLen != 128 || core.MaxHeadersBytes != 65536 {
		t.Fatalf("MaxHeaderKeyLen = %d, MaxHeadersBytes = %d; want 128 and 65536", core.MaxHeaderKeyLen, core.MaxHeadersBytes)
	}
	if n := encodedLen(t, headersOfSize(core.MaxHeadersBytes)); n != core.MaxHeadersBytes {
		t.Fatalf("headersOfSize helper: encoded %d bytes", n)
	}
}

// The header limits are checked by Build, by a full Validate and by
// WithHeaders (the observer's headers are added with it at publish).
func TestHeaderLimits(t *testing.T) {
	max := core.MaxHeadersBytes
	// 11,000 '<' encode as \u003c: 66,000 bytes, though 11 KB raw.
	html := map[string]string{"h": strings.Repeat("<", 11000)}
	// Many small headers adding up.
	many := map[string]string{}
	for i := 0; len(many) < 3000; i++ {
		many[strings.Repeat("k", 1+i%100)+string(rune('a'+i%26))+strings.Repeat("x", i/2600)+string(rune('A'+i/100%26))] = strings.Repeat("v", 20)
	}
	if encodedLen(t, many) <= max {
		t.Fatalf("many headers encode to %d bytes, want over %d", encodedLen(t, many), max)
	}
	tests := []struct {
		name  string
		h     map[string]string
		want  error
		field string
	}{
		{"key 128 characters", map[string]string{strings.Repeat("k", 128): "v"}, nil, ""},
		{"key 128 four-byte characters", map[string]string{strings.Repeat("😀", 128): "v"}, nil, ""},
		{"key 129 characters", map[string]string{strings.Repeat("k", 129): "v"}, core.ErrHeaderKeyTooLong, "headers"},
		{"key 129 two-byte characters", map[string]string{strings.Repeat("é", 129): "v"}, core.ErrHeaderKeyTooLong, "headers"},
		{"key of 1 MiB", map[string]string{strings.Repeat("k", 1<<20): "v"}, core.ErrHeaderKeyTooLong, "headers"},
		{"encoded at the limit", headersOfSize(max), nil, ""},
		{"encoded one byte over", headersOfSize(max + 1), core.ErrHeadersTooLarge, "headers"},
		{"value of 20 MiB", map[string]string{"h": strings.Repeat("a", 20<<20)}, core.ErrHeadersTooLarge, "headers"},
		{"escapes count", html, core.ErrHeadersTooLarge, "headers"},
		{"many headers", many, core.ErrHeadersTooLarge, "headers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, err := ev().Headers(tc.h).Build()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				if err := core.Unvalidated(env).Validate(); err != nil {
					t.Fatalf("full Validate: %v", err)
				}
			} else {
				requireValidationError(t, err, tc.want, tc.field)
				if len(err.Error()) > 200 {
					t.Errorf("error message of %d bytes echoes the headers", len(err.Error()))
				}
			}

			// WithHeaders on a valid envelope, the observer's path.
			base := mustBuild(t, ev())
			got, err := base.WithHeaders(tc.h)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("WithHeaders: %v", err)
				}
				if err := core.Unvalidated(got).Validate(); err != nil {
					t.Fatalf("full Validate after WithHeaders: %v", err)
				}
			} else {
				requireValidationError(t, err, tc.want, tc.field)
			}

			// Validate of an envelope read back from a store with these
			// headers: the read succeeds (an event stored before the
			// limits stays deliverable), Validate refuses to publish it.
			if tc.want == nil {
				return
			}
			rec := toRecord(t, base)
			b, _ := json.Marshal(tc.h)
			rec.HeadersJSON = string(b)
			read, err := rec.Envelope()
			if err != nil {
				t.Fatalf("Record.Envelope: %v", err)
			}
			requireValidationError(t, read.Validate(), tc.want, tc.field)
			requireValidationError(t, core.Unvalidated(read).Validate(), tc.want, tc.field)
		})
	}
}

// WithHeaders counts the envelope's own headers with the added ones.
func TestWithHeadersCountsMergedSize(t *testing.T) {
	half := core.MaxHeadersBytes / 2
	env := mustBuild(t, ev().Header("a", strings.Repeat("x", half)))
	if _, err := env.WithHeaders(map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}); err != nil {
		t.Fatalf("small header added: %v", err)
	}
	_, err := env.WithHeaders(map[string]string{"b": strings.Repeat("y", half)})
	requireValidationError(t, err, core.ErrHeadersTooLarge, "headers")
	// A key the envelope has keeps its value: it does not count twice.
	if _, err := env.WithHeaders(map[string]string{"a": strings.Repeat("y", half)}); err != nil {
		t.Fatalf("existing key given again: %v", err)
	}
}

func TestTimeLimits(t *testing.T) {
	east := time.FixedZone("UTC+5", 5*3600)
	west := time.FixedZone("UTC-5", -5*3600)
	first := time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)             // one µs after the zero time
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) // truncated to .999999
	tests := []struct {
		name  string
		at    time.Time
		valid bool
	}{
		{"first microsecond of year 1", first, true},
		{"last microsecond of year 9999", last, true},
		{"year 0", time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{"year 1 east of UTC is year 0", time.Date(1, 1, 1, 2, 0, 0, 0, east), false},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"year 9999 west of UTC is year 10000", time.Date(9999, 12, 31, 23, 0, 0, 0, west), false},
		{"year 295000", time.Date(295000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"year -5", time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC), false},
	}
	for _, tc := range tests {
		for _, f := range []struct {
			field string
			set   func(*core.Builder, time.Time) *core.Builder
			get   func(core.Envelope) time.Time
		}{
			{"occurred_at", (*core.Builder).OccurredAt, core.Envelope.OccurredAt},
			{"not_before", (*core.Builder).NotBefore, core.Envelope.NotBefore},
		} {
			t.Run(f.field+"/"+tc.name, func(t *testing.T) {
				env, err := f.set(ev(), tc.at).Build()
				if !tc.valid {
					requireValidationError(t, err, core.ErrTimeOutOfRange, f.field)
					return
				}
				if err != nil {
					t.Fatalf("Build: %v", err)
				}
				if want := tc.at.UTC().Truncate(time.Microsecond); !f.get(env).Equal(want) {
					t.Fatalf("%s = %v, want %v", f.field, f.get(env), want)
				}
				if err := core.Unvalidated(env).Validate(); err != nil {
					t.Fatalf("full Validate: %v", err)
				}
			})
		}
	}
}

// Validate refuses a time out of range in an envelope read back from a
// store (a row written before the check), which Record.Envelope still
// returns for delivery.
func TestValidateRefusesStoredTimeOutOfRange(t *testing.T) {
	rec := toRecord(t, mustBuild(t, ev()))
	rec.OccurredAt = time.Date(-289555, 1, 1, 0, 0, 0, 0, time.UTC) // a wrapped SQLite value
	env, err := rec.Envelope()
	if err != nil {
		t.Fatalf("Record.Envelope: %v", err)
	}
	requireValidationError(t, env.Validate(), core.ErrTimeOutOfRange, "occurred_at")
}

// A Delay cannot leave the range: time.Time.Add saturates, and the longest
// Duration is about 292 years.
func TestDelayLongestDuration(t *testing.T) {
	env := mustBuild(t, ev().Delay(math.MaxInt64))
	nb := env.NotBefore()
	if want := time.Now().Add(math.MaxInt64); nb.Year() != want.Year() || nb.Year() > core.MaxTimeYear {
		t.Fatalf("Delay(max): NotBefore = %v, want about %v", nb, want)
	}
	if err := core.Unvalidated(env).Validate(); err != nil {
		t.Fatal(err)
	}
}
