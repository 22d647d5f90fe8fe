package periodic_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/internal/periodic"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJobRunsUntilStopped(t *testing.T) {
	var j periodic.Job
	calls := make(chan struct{}, 10)
	if !j.Start(context.Background(), time.Millisecond, func(context.Context) { calls <- struct{}{} }) {
		t.Fatal("Start = false on a new job")
	}
	if j.Start(context.Background(), time.Millisecond, func(context.Context) {}) {
		t.Fatal("Start twice = true")
	}
	for range 2 {
		select {
		case <-calls:
		case <-time.After(5 * time.Second):
			t.Fatal("fn not called")
		}
	}
	if err := j.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
	// Restartable.
	if !j.Start(context.Background(), time.Hour, func(context.Context) {}) {
		t.Fatal("Start after Stop = false")
	}
	if err := j.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStopCancelsACallAndIsBoundedByCtx(t *testing.T) {
	var j periodic.Job
	entered, release := make(chan struct{}), make(chan struct{})
	j.Start(context.Background(), time.Millisecond, func(ctx context.Context) {
		select {
		case entered <- struct{}{}:
		default:
			return
		}
		<-ctx.Done() // cancelled by Stop
		<-release    // but slow to return
	})
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := j.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended ctx while fn runs = %v", err)
	}
	close(release)
	if err := j.Stop(context.Background()); err != nil {
		t.Fatalf("Stop again = %v", err)
	}
}
