package tenant_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/tenant"
)

// RefreshInterval and DrainTimeout written without a unit (5 is 5 ns) are
// refused like every other interval of the library, by New and NewInbox,
// before any database opens. (Before, RefreshInterval 5 was taken:
// Discover then ran about 200,000 times a second; a DrainTimeout of 5 ns
// gave a removed database no time to finish its events.) A negative
// RefreshInterval (only Refresh discovers) and the zero defaults stay
// valid.
func TestIntervalsWithoutAUnitRefused(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 1)
	discover := func(context.Context) ([]tenant.Database, error) { return dbs, nil }
	want := []string{"DrainTimeout", "RefreshInterval"}
	_, err := tenant.New(ctx, tenant.Config{Discover: discover, RefreshInterval: 5, DrainTimeout: 5, Logger: quietLogger()})
	if got := cfgpath.Fields(err); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(got, want) {
		t.Errorf("New: problems %q, want %q (error: %v)", got, want, err)
	}
	_, err = tenant.NewInbox(ctx, tenant.InboxConfig{Discover: discover, RefreshInterval: 5, DrainTimeout: 5, Logger: quietLogger()})
	if got := cfgpath.Fields(err); !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(got, want) {
		t.Errorf("NewInbox: problems %q, want %q (error: %v)", got, want, err)
	}

	o, err := tenant.New(ctx, tenant.Config{Discover: discover, RefreshInterval: -1, DrainTimeout: time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("New with RefreshInterval -1 and DrainTimeout 1ms: %v", err)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
