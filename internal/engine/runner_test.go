package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/engine"
)

const deadline = 10 * time.Second

func TestRunnerLifeCycle(t *testing.T) {
	r := engine.NewRunner("thing")
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("Close before Start = %v", err)
	}
	if err := r.Start(context.Background(), func(context.Context, <-chan struct{}) {}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Start after Close = %v, want core.ErrClosed", err)
	}

	r = engine.NewRunner("thing")
	cycles := make(chan bool, 10)
	loop := func(ctx context.Context, stop <-chan struct{}) {
		r.Pace(ctx, stop, 0, func(_ context.Context, woken bool) time.Duration {
			cycles <- woken
			return time.Hour
		})
	}
	if err := r.Start(context.Background(), loop); err != nil {
		t.Fatal(err)
	}
	var ce *core.ConfigError
	if err := r.Start(context.Background(), loop); !errors.As(err, &ce) || ce.Field != "thing" {
		t.Fatalf("second Start = %v, want a ConfigError naming the part", err)
	}
	if !r.Running() {
		t.Fatal("Running = false after Start")
	}
	if woken := recv(t, cycles, "the first cycle (first wait 0)"); woken {
		t.Fatal("the first cycle says it was woken")
	}
	r.Wake()
	if woken := recv(t, cycles, "a cycle after Wake cut the hour's wait short"); !woken {
		t.Fatal("the cycle after Wake does not say it was woken")
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	// A Close after the loop finished is nil even with a done context
	// (not a coin toss between the two).
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 50 {
		if err := r.Close(done); err != nil {
			t.Fatalf("Close %d with a cancelled context after the loop finished = %v, want nil", i+3, err)
		}
	}
	if r.Running() || !r.Closed() {
		t.Fatal("Running/Closed wrong after Close")
	}
}

func TestRunnerCloseWaitsForTheCycleThenGivesUp(t *testing.T) {
	r := engine.NewRunner("thing")
	entered, release := make(chan struct{}), make(chan struct{})
	interrupted := make(chan struct{})
	err := r.Start(context.Background(), func(ctx context.Context, stop <-chan struct{}) {
		r.Pace(ctx, stop, 0, func(ctx context.Context, _ bool) time.Duration {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				close(interrupted)
				<-release
			}
			return time.Hour
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, entered, "the cycle")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close while the cycle blocks = %v, want DeadlineExceeded", err)
	}
	recv(t, interrupted, "the cycle's ctx cancelled once Close gave up")
	close(release)
	ctx2, cancel2 := context.WithTimeout(context.Background(), deadline)
	defer cancel2()
	if err := r.Close(ctx2); err != nil {
		t.Fatalf("second Close = %v, want nil once the cycle returned", err)
	}
}

func TestRunnerStartCtxOnlyScopesTheCall(t *testing.T) {
	r := engine.NewRunner("thing")
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	got := make(chan any, 1)
	if err := r.Start(ctx, func(ctx context.Context, stop <-chan struct{}) {
		<-stop
		got <- [2]any{ctx.Err(), ctx.Value(key{})}
	}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != ([2]any{nil, "v"}) {
		t.Fatalf("loop ctx (err, value) = %v, want (nil, v)", v)
	}
}

type key struct{}

func TestUntilStop(t *testing.T) {
	stop := make(chan struct{})
	ctx, cancel := engine.UntilStop(context.Background(), stop)
	defer cancel()
	close(stop)
	select {
	case <-ctx.Done():
	case <-time.After(deadline):
		t.Fatal("ctx not cancelled by stop")
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// CloseErr returns ctx's error as is when it is the only one, however
// many parts returned it, and joins distinct errors, ctx's once.
func TestCloseErr(t *testing.T) {
	if err := engine.CloseErr(context.Background(), nil, nil); err != nil {
		t.Fatalf("CloseErr of nils = %v, want nil", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	if err := engine.CloseErr(ctx, nil, ctx.Err(), nil, ctx.Err()); err != context.DeadlineExceeded {
		t.Fatalf("CloseErr of ctx's error twice = %#v, want context.DeadlineExceeded itself", err)
	}
	other := errors.New("other")
	if err := engine.CloseErr(ctx, other); err != other {
		t.Fatalf("CloseErr of one error = %#v, want it as is", err)
	}
	err := engine.CloseErr(ctx, ctx.Err(), other, ctx.Err())
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, other) {
		t.Fatalf("CloseErr of two distinct errors = %v, want both", err)
	}
	if u, ok := err.(interface{ Unwrap() []error }); !ok || len(u.Unwrap()) != 2 {
		t.Fatalf("CloseErr of ctx's error twice and another = %v, want the two joined", err)
	}
	// A part's deadline error, ctx not done: not ctx's, kept as it is.
	if err := engine.CloseErr(context.Background(), context.DeadlineExceeded, context.DeadlineExceeded); err == context.DeadlineExceeded {
		t.Fatal("CloseErr merged errors of a ctx that did not end")
	}
}

// A nil context is refused by Start and Close before anything changes:
// the runner starts and closes afterwards as if they were never called.
func TestRunnerRefusesNilContext(t *testing.T) {
	r := engine.NewRunner("thing")
	var nilCtx context.Context
	loop := func(context.Context, <-chan struct{}) {}
	if err := r.Close(nilCtx); !errors.Is(err, core.ErrNilContext) {
		t.Fatalf("Close(nil) before Start = %v, want core.ErrNilContext", err)
	}
	if err := r.Start(nilCtx, loop); !errors.Is(err, core.ErrNilContext) {
		t.Fatalf("Start(nil) = %v, want core.ErrNilContext", err)
	}
	if err := r.Start(context.Background(), loop); err != nil {
		t.Fatalf("Start after the refusals = %v", err)
	}
	if err := r.Close(nilCtx); !errors.Is(err, core.ErrNilContext) || !r.Running() {
		t.Fatalf("Close(nil) while running = %v, running %v; want core.ErrNilContext, still running", err, r.Running())
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
