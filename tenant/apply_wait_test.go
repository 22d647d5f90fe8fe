package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/tenant"
)

// SetDatabases waits for an apply under way (one opening a database that
// does not answer, say) only as long as its ctx: it waited for the other
// apply to end, whatever its ctx, and then applied its own set; and one
// whose ctx ended meanwhile changes nothing.
func TestSetDatabasesWaitsForAnotherApplyWithinItsContext(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 3)
	opening, release := make(chan struct{}), make(chan struct{})
	open := func(ctx context.Context, d tenant.Database) (*sqlx.DB, error) {
		if d.ID == "s3" {
			close(opening)
			select { // a database that does not answer
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return tenant.Open(ctx, d)
	}
	ob, err := tenant.New(ctx, tenant.Config{Databases: dbs[:1], Open: open, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	slow := make(chan error, 1)
	go func() {
		_, err := ob.SetDatabases(ctx, []tenant.Database{dbs[0], dbs[2]})
		slow <- err
	}()
	select {
	case <-opening:
	case <-time.After(waitTimeout):
		t.Fatal("the first apply never opened s3")
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = ob.SetDatabases(short, []tenant.Database{dbs[0], dbs[1]})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SetDatabases behind a stuck apply = %v, want its ctx's error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("SetDatabases with a 200ms ctx took %v behind a stuck apply", took)
	}
	close(release)
	select {
	case err := <-slow:
		if err != nil {
			t.Fatalf("the first apply: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the first apply never ended")
	}
	if got := ob.StoreIDs(); len(got) != 2 || got[0] != "s1" || got[1] != "s3" {
		t.Errorf("StoreIDs = %v, want [s1 s3]: the timed-out call changed nothing", got)
	}
}
