package tenant_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
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

// applyUnderWay starts an outbox over dbs[0] whose databases open with
// open, and an apply of every database of dbs, and returns once open
// signalled on opening that it opens s2; the apply's error comes on
// applied.
func applyUnderWay(t *testing.T, dbs []tenant.Database, open tenant.OpenFunc, opening <-chan struct{}) (ob *tenant.Outbox, applied <-chan error) {
	t.Helper()
	ob, err := tenant.New(context.Background(), tenant.Config{Databases: dbs[:1], Open: open, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ob.SetDatabases(context.Background(), dbs)
		done <- err
	}()
	select {
	case <-opening:
	case <-time.After(waitTimeout):
		t.Fatal("the apply never opened s2")
	}
	return ob, done
}

// Close ends an apply under way (one opening a database that does not
// answer) instead of waiting for it: it waited for the apply to give up
// on its own (30 s per silent database), whatever its ctx, both for the
// outbox and the inbox.
func TestCloseEndsAnApplyUnderWay(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 2)
	opening := make(chan struct{})
	open := func(ctx context.Context, d tenant.Database) (*sqlx.DB, error) {
		if d.ID == "s2" {
			close(opening)
			<-ctx.Done() // a database that does not answer
			return nil, ctx.Err()
		}
		return tenant.Open(ctx, d)
	}
	ob, applied := applyUnderWay(t, dbs, open, opening)
	closed := make(chan error, 1)
	go func() { closed <- ob.Close(ctx) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close waited for the apply under way")
	}
	if err := <-applied; !errors.Is(err, core.ErrClosed) {
		t.Errorf("the apply Close ended = %v, want an error matching core.ErrClosed", err)
	}
}

// A Discover that panics during a refresh, or an Open that returns
// neither a database nor an error, is an error, not a crash of the
// process: the refresh goroutine had no recover, and New dereferenced the
// nil database.
func TestDiscoverPanicAndNilOpenAreErrors(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 1)
	calls := 0
	discover := func(context.Context) ([]tenant.Database, error) {
		if calls++; calls > 1 {
			panic("discovery bug")
		}
		return dbs, nil
	}
	ob, err := tenant.New(ctx, tenant.Config{Discover: discover, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ob.Close(context.Background()) })
	if _, err := ob.Refresh(ctx); err == nil || !strings.Contains(err.Error(), "panicked: discovery bug") {
		t.Errorf("Refresh with a panicking Discover = %v", err)
	}
	if got := ob.StoreIDs(); len(got) != 1 {
		t.Errorf("StoreIDs after the failed refresh = %v, want the set kept", got)
	}

	nilOpen := func(context.Context, tenant.Database) (*sqlx.DB, error) { return nil, nil }
	if _, err := tenant.New(ctx, tenant.Config{Databases: sqliteDatabases(t, 1), Open: nilOpen, Logger: quietLogger()}); err == nil ||
		!strings.Contains(err.Error(), "neither a database nor an error") {
		t.Errorf("New with an Open returning nil, nil = %v", err)
	}
}

// A New whose first set fails closes what it opened and logs no "set of
// databases changed": it said the good databases were added.
func TestFailedNewLogsNoChange(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	dbs := sqliteDatabases(t, 2)
	open := func(ctx context.Context, d tenant.Database) (*sqlx.DB, error) {
		if d.ID == "s2" {
			return nil, errors.New("connection refused")
		}
		return tenant.Open(ctx, d)
	}
	if _, err := tenant.New(context.Background(), tenant.Config{Databases: dbs, Open: open, Logger: logger}); err == nil {
		t.Fatal("New with a database that cannot be opened succeeded")
	}
	if n := logs.Count("set of databases changed"); n != 0 {
		t.Errorf("a failed New logged a change:\n%s", logs)
	}
}

// Close ends a Refresh waiting in Discover (a directory that does not
// answer) as it ends an apply: Discover's ctx ends, and Refresh returns an
// error matching core.ErrClosed. It stayed in Discover for as long as its
// own ctx allowed.
func TestCloseEndsARefreshInDiscover(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 1)
	discovering := make(chan struct{}, 1)
	calls := 0
	discover := func(ctx context.Context) ([]tenant.Database, error) {
		if calls++; calls == 1 {
			return dbs, nil // New's
		}
		discovering <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	ob, err := tenant.New(ctx, tenant.Config{Discover: discover, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	refreshed := make(chan error, 1)
	go func() {
		_, err := ob.Refresh(ctx)
		refreshed <- err
	}()
	select {
	case <-discovering:
	case <-time.After(waitTimeout):
		t.Fatal("Refresh never called Discover")
	}
	if err := ob.Close(ctx); err != nil {
		t.Errorf("Close = %v", err)
	}
	select {
	case err := <-refreshed:
		if !errors.Is(err, core.ErrClosed) {
			t.Errorf("the Refresh Close ended = %v, want an error matching core.ErrClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close did not end the Refresh waiting in Discover")
	}
}

// An apply under way whose OpenFunc ignores its ctx (a secrets lookup
// that does not take one, say) holds Close up only until Close's ctx
// ends: Close then returns that ctx's error (it waited for the OpenFunc
// and returned nil). The database the apply opens afterwards is closed
// by the apply, which fails with core.ErrClosed, and never routed to.
func TestCloseBoundedByItsContextBehindAnOpenIgnoringIt(t *testing.T) {
	ctx := context.Background()
	dbs := sqliteDatabases(t, 2)
	opening, release := make(chan struct{}), make(chan struct{})
	opened := make(chan *sqlx.DB, 1)
	open := func(ctx context.Context, d tenant.Database) (*sqlx.DB, error) {
		if d.ID == "s2" {
			close(opening)
			<-release // ignores ctx
			db, err := tenant.Open(context.Background(), d)
			opened <- db
			return db, err
		}
		return tenant.Open(ctx, d)
	}
	ob, applied := applyUnderWay(t, dbs, open, opening)
	short, cancel := context.WithCancel(ctx)
	cancel()
	closed := make(chan error, 1)
	go func() { closed <- ob.Close(short) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Close = %v, want its ctx's error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close waited for an OpenFunc that ignores its ctx, past its own ctx")
	}
	close(release)
	if err := <-applied; !errors.Is(err, core.ErrClosed) {
		t.Errorf("the apply Close gave up on = %v, want an error matching core.ErrClosed", err)
	}
	if err := (<-opened).Ping(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the database opened after Close: Ping = %v, want it closed", err)
	}
	if _, err := ob.For("s2"); !errors.Is(err, core.ErrClosed) {
		t.Errorf("For(s2) after Close = %v, want core.ErrClosed", err)
	}
}
