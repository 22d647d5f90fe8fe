package engine_test

import (
	"context"
	"testing"

	"github.com/outbox-go/outbox/internal/engine"
)

type observeKey struct{}

// Observe passes the observer's context and end through, and survives
// an observer that panics (in start or in its end) or returns a nil
// context or a nil end: the panics go to panicked, the work gets ctx.
func TestObserve(t *testing.T) {
	ctx := context.Background()
	var panics []any
	panicked := func(v any) { panics = append(panics, v) }
	var got int
	octx, end := engine.Observe(ctx, func(ctx context.Context) (context.Context, func(int)) {
		return context.WithValue(ctx, observeKey{}, "v"), func(r int) { got = r }
	}, panicked)
	end(7)
	if octx.Value(observeKey{}) != "v" || got != 7 || len(panics) != 0 {
		t.Fatalf("a sound observer: ctx value %v, end got %d, panics %v", octx.Value(observeKey{}), got, panics)
	}
	for name, start := range map[string]func(context.Context) (context.Context, func(int)){
		"panic":     func(context.Context) (context.Context, func(int)) { panic("start") },
		"nil ctx":   func(context.Context) (context.Context, func(int)) { return nil, func(int) {} },
		"nil end":   func(ctx context.Context) (context.Context, func(int)) { return ctx, nil },
		"end panic": func(ctx context.Context) (context.Context, func(int)) { return ctx, func(int) { panic("end") } },
	} {
		panics = nil
		octx, end := engine.Observe(ctx, start, panicked)
		if octx != ctx {
			t.Errorf("%s: the work got another context", name)
		}
		end(1)
		want := 0
		if name == "panic" || name == "end panic" {
			want = 1
		}
		if len(panics) != want {
			t.Errorf("%s: %d panics reported, want %d", name, len(panics), want)
		}
	}
}
