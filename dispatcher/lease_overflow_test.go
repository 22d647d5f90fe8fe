package dispatcher_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
)

// The lease must exceed ListenerTimeout + ListenerGrace + StatusTimeout
// even when that sum would overflow: it used to wrap around to a negative
// duration, so any lease passed, and the listeners' contexts then ended at
// once (every attempt failed as hung) or never before the lease.
func TestLeaseCheckDoesNotOverflow(t *testing.T) {
	for _, cfg := range []dispatcher.Config{
		{ListenerTimeout: 1 << 62, ListenerGrace: 1 << 62},
		{ListenerTimeout: math.MaxInt64 - time.Second, Lease: 2 * time.Second},
		{ListenerTimeout: math.MaxInt64},
		{StatusTimeout: math.MaxInt64, Lease: math.MaxInt64},
	} {
		err := cfg.Validate()
		var ce *core.ConfigError
		if !errors.Is(err, core.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != "Lease" {
			t.Errorf("%+v: Validate = %v, want a Lease error", cfg, err)
		}
	}
	// The largest lease still passes with the defaults.
	if err := (dispatcher.Config{Lease: math.MaxInt64}).Validate(); err != nil {
		t.Errorf("Lease = MaxInt64: %v", err)
	}
}
