package engine_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/engine"
	"github.com/outbox-go/outbox/retry"
)

func TestGuard(t *testing.T) {
	boom := errors.New("boom")
	noGoexit := func() { t.Error("onGoexit called") }
	if p, err := engine.Guard(func() error { return boom }, noGoexit); err != boom || p != nil {
		t.Fatalf("returned error: %v, %v", err, p)
	}
	if p, err := engine.Guard(func() error { panic("oops") }, noGoexit); err != nil || p == nil || p.Value != "oops" ||
		!strings.Contains(string(p.Stack), "guard_test.go") {
		t.Fatalf("panic: %v, %+v", err, p)
	}
	// A panic with a nil error value still counts as a panic.
	if p, _ := engine.Guard(func() error { panic(error(nil)) }, noGoexit); p == nil {
		t.Fatal("panic(nil error) not reported")
	}
	exited, first := make(chan struct{}), make(chan string, 2)
	go func() {
		defer func() { first <- "deferred calls ran" }()
		engine.Guard(func() error { runtime.Goexit(); return nil }, func() { close(exited) })
		first <- "Guard returned" // never reached
	}()
	recv(t, exited, "onGoexit")
	if got := <-first; got != "deferred calls ran" {
		t.Fatalf("after a Goexit: %s", got)
	}
}

func TestDecide(t *testing.T) {
	pol := retry.PolicyFunc(func(int) time.Duration { return time.Second })
	for _, c := range []struct {
		err      error
		attempts int
		want     engine.Outcome
		delay    time.Duration
	}{
		{nil, 1, engine.Done, 0},
		{errors.New("x"), 1, engine.Retry, time.Second},
		{errors.New("x"), 2, engine.Retry, time.Second},
		{errors.New("x"), 3, engine.Dead, 0},
		{errors.New("x"), 4, engine.Dead, 0},
	} {
		got, delay := engine.Decide(c.err, c.attempts, 3, pol)
		if got != c.want || delay != c.delay {
			t.Errorf("Decide(%v, %d) = %v, %v; want %v, %v", c.err, c.attempts, got, delay, c.want, c.delay)
		}
	}
	if _, delay := engine.Decide(errors.New("x"), 1, 3, negative{}); delay != 0 {
		t.Errorf("negative delay = %v, want 0", delay)
	}
}

type negative struct{}

func (negative) Delay(int) time.Duration { return -time.Second }
