package core_test

import (
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

func buildDelayed(t *testing.T, mod func(*core.Builder)) core.Envelope {
	t.Helper()
	b := core.NewEvent("E").PayloadJSONString(`{}`)
	mod(b)
	env, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return env
}

func TestNotBeforeDefaultsToZero(t *testing.T) {
	env := buildDelayed(t, func(*core.Builder) {})
	if !env.NotBefore().IsZero() {
		t.Fatalf("NotBefore without a delay = %v, want the zero time", env.NotBefore())
	}
}

func TestNotBeforeIsUTCAndTruncatedToMicroseconds(t *testing.T) {
	zone := time.FixedZone("UTC+5", 5*3600)
	in := time.Date(2031, 6, 7, 8, 9, 10, 123456789, zone)
	env := buildDelayed(t, func(b *core.Builder) { b.NotBefore(in) })
	got := env.NotBefore()
	if got.Location() != time.UTC {
		t.Errorf("NotBefore location = %v, want UTC", got.Location())
	}
	if want := in.UTC().Truncate(time.Microsecond); !got.Equal(want) || got.Nanosecond() != 123456000 {
		t.Errorf("NotBefore = %v, want %v (truncated to µs)", got, want)
	}
}

// A time in the past is kept as given: delivery treats it as now (the
// store makes the row due at once, the dispatcher does not wait).
func TestNotBeforeInThePastIsKept(t *testing.T) {
	past := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	env := buildDelayed(t, func(b *core.Builder) { b.NotBefore(past) })
	if !env.NotBefore().Equal(past) {
		t.Fatalf("NotBefore = %v, want %v as given", env.NotBefore(), past)
	}
}

func TestDelayIsRelativeToBuild(t *testing.T) {
	const d = 90 * time.Second
	b := core.NewEvent("E").PayloadJSONString(`{}`).Delay(d)
	before := time.Now()
	env, err := b.Build()
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	got := env.NotBefore()
	if lo, hi := before.Add(d).Truncate(time.Microsecond), after.Add(d); got.Before(lo) || got.After(hi) {
		t.Fatalf("Delay(%v): NotBefore = %v, want within [%v, %v] (Build time + d)", d, got, lo, hi)
	}
	if got.Location() != time.UTC || got.Nanosecond()%1000 != 0 {
		t.Errorf("Delay: NotBefore = %v, want UTC truncated to µs", got)
	}
	// A reused builder computes the delay again at each Build.
	env2, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if env2.NotBefore().Before(got) {
		t.Errorf("second Build: NotBefore %v before the first %v", env2.NotBefore(), got)
	}
}

func TestDelayNotPositiveMeansNow(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		env := buildDelayed(t, func(b *core.Builder) { b.Delay(d) })
		if !env.NotBefore().IsZero() {
			t.Errorf("Delay(%v): NotBefore = %v, want zero (deliver at once)", d, env.NotBefore())
		}
	}
}

func TestDelayAndNotBeforeClearEachOther(t *testing.T) {
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

	// Delay after NotBefore: the delay wins.
	before := time.Now()
	env := buildDelayed(t, func(b *core.Builder) { b.NotBefore(at).Delay(time.Hour) })
	if got := env.NotBefore(); got.Equal(at) || got.Before(before.Add(time.Hour).Truncate(time.Microsecond)) {
		t.Errorf("NotBefore(t).Delay(1h): NotBefore = %v, want about now+1h", got)
	}

	// NotBefore after Delay: the time wins.
	env = buildDelayed(t, func(b *core.Builder) { b.Delay(time.Hour).NotBefore(at) })
	if got := env.NotBefore(); !got.Equal(at) {
		t.Errorf("Delay(1h).NotBefore(t): NotBefore = %v, want %v", got, at)
	}

	// Delay(0) after NotBefore clears it.
	env = buildDelayed(t, func(b *core.Builder) { b.NotBefore(at).Delay(0) })
	if got := env.NotBefore(); !got.IsZero() {
		t.Errorf("NotBefore(t).Delay(0): NotBefore = %v, want zero", got)
	}

	// NotBefore(zero) after Delay clears it.
	env = buildDelayed(t, func(b *core.Builder) { b.Delay(time.Hour).NotBefore(time.Time{}) })
	if got := env.NotBefore(); !got.IsZero() {
		t.Errorf("Delay(1h).NotBefore(zero): NotBefore = %v, want zero", got)
	}
}

func TestRecordEnvelopeHasZeroNotBefore(t *testing.T) {
	due := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := core.Record{
		ID: "r1", Type: "E", OccurredAt: due.Add(-time.Hour), Payload: []byte(`{}`), PayloadKind: core.PayloadJSON,
		Status: core.StatusNew, AvailableAt: due, CreatedAt: due.Add(-time.Hour),
	}
	env, err := rec.Envelope()
	if err != nil {
		t.Fatal(err)
	}
	if !env.NotBefore().IsZero() {
		t.Fatalf("Record.Envelope().NotBefore() = %v, want zero (the row's available_at is its due time)", env.NotBefore())
	}
}
