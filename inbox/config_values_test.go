package inbox_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
	"github.com/outbox-go/outbox/retry"
)

// A logger without a handler (the zero slog.Logger) is refused as a
// ConfigError of its field: its first line panicked, in a background
// goroutine of the dispatcher.
func TestZeroLoggerIsRefused(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "in.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	zero := new(slog.Logger)
	if _, err := inbox.New(ctx, db, inbox.Config{Logger: zero}); !slices.Equal(cfgpath.Fields(err), []string{"Logger"}) {
		t.Fatalf("New with a zero slog.Logger = %v, want a ConfigError of field Logger", err)
	}
	if err := (inbox.Config{Logger: zero}).Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Logger"}) {
		t.Fatalf("Config.Validate = %v, want a ConfigError of field Logger", err)
	}
	if err := (inbox.DispatcherConfig{Logger: zero}).Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Logger"}) {
		t.Fatalf("DispatcherConfig.Validate = %v, want a ConfigError of field Logger", err)
	}
	in, err := inbox.New(ctx, db, inbox.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.NewDispatcher(inbox.DispatcherConfig{Logger: zero}); !slices.Equal(cfgpath.Fields(err), []string{"Logger"}) {
		t.Fatalf("NewDispatcher = %v, want a ConfigError of field Logger", err)
	}
	if _, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{Logger: zero}); !slices.Equal(cfgpath.Fields(err), []string{"Logger"}) {
		t.Fatalf("NewMultiDispatcher = %v, want a ConfigError of field Logger", err)
	}
}

// A retry.Exponential literal is validated as retry.NewExponential
// validates it: a negative MaxDelay used every attempt up at once.
func TestInvalidRetryLiteralIsRefused(t *testing.T) {
	bad := retry.Exponential{MaxDelay: -time.Second}
	if err := (inbox.Config{Backoff: bad}).Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Backoff.MaxDelay"}) {
		t.Errorf("Config.Validate = %v, want a ConfigError of field Backoff.MaxDelay", err)
	}
	if err := (inbox.DispatcherConfig{Retry: bad}).Validate(); !slices.Equal(cfgpath.Fields(err), []string{"Retry.MaxDelay"}) {
		t.Errorf("DispatcherConfig.Validate = %v, want a ConfigError of field Retry.MaxDelay", err)
	}
}

// A duration given without its unit (5 is 5 ns) is refused: the least
// taken is 1 ms (a 1 ns PollInterval made the claims spin on an empty
// inbox). A negative ReapInterval or CleanupInterval disables that work.
func TestDispatcherConfigRefusesDurationsWithoutUnit(t *testing.T) {
	err := (inbox.DispatcherConfig{HandlerTimeout: 30, StatusTimeout: 5, Lease: time.Hour, PollInterval: 1,
		UnhandledDelay: time.Microsecond, ReapInterval: 30, CleanupInterval: 3600, DetachAfter: 50}).Validate()
	want := []string{"CleanupInterval", "DetachAfter", "HandlerTimeout", "PollInterval", "ReapInterval", "StatusTimeout", "UnhandledDelay"}
	if got := cfgpath.Fields(err); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(got, want) {
		t.Errorf("Validate = %v (fields %q), want %q", err, got, want)
	}
	if err := (inbox.DispatcherConfig{HandlerTimeout: time.Millisecond, StatusTimeout: time.Millisecond, PollInterval: time.Millisecond,
		ReapInterval: -1, CleanupInterval: -1, DetachAfter: -1}).Validate(); err != nil {
		t.Errorf("Validate of the shortest durations and disabled reaping and cleanup = %v", err)
	}
}

// A Lease too short is reported under Lease, whose half and quarter
// HandlerTimeout and StatusTimeout default to, not under those fields the
// caller left unset (Lease 5 was reported as HandlerTimeout 2ns and
// StatusTimeout 1ns, and not as Lease).
func TestDispatcherConfigBlamesAShortLease(t *testing.T) {
	for _, lease := range []time.Duration{5, time.Millisecond, 3 * time.Millisecond, -time.Second} {
		err := (inbox.DispatcherConfig{Lease: lease}).Validate()
		if got := cfgpath.Fields(err); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(got, []string{"Lease"}) {
			t.Errorf("Lease %v: Validate = %v (fields %q), want Lease", lease, err, got)
		}
	}
	if err := (inbox.DispatcherConfig{Lease: 4 * time.Millisecond}).Validate(); err != nil {
		t.Errorf("Lease 4ms (HandlerTimeout 2ms, StatusTimeout 1ms): %v", err)
	}
	// Set, the timeouts are checked as given.
	err := (inbox.DispatcherConfig{Lease: 3 * time.Millisecond, HandlerTimeout: time.Millisecond, StatusTimeout: 5}).Validate()
	if got := cfgpath.Fields(err); !slices.Equal(got, []string{"StatusTimeout"}) {
		t.Errorf("StatusTimeout 5ns: Validate = %v (fields %q), want StatusTimeout", err, got)
	}
}
