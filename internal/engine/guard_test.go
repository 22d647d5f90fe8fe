package engine_test

import (
	"errors"
	"fmt"
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

// badErr is an error type whose methods read its fields: a typed nil
// pointer of it panics in Error and Unwrap.
type badErr struct{ cause error }

func (e *badErr) Error() string { return "bad: " + e.cause.Error() }
func (e *badErr) Unwrap() error { return e.cause }

// onlyUnwrapPanics has a working Error and an Unwrap that panics.
type onlyUnwrapPanics struct{}

func (onlyUnwrapPanics) Error() string { return "fine" }
func (onlyUnwrapPanics) Unwrap() error { panic("unwrap") }

// An error whose methods panic when the caller inspects it (logs it,
// walks it with errors.Is or errors.As) comes back as an error that says
// so, instead of crashing the caller outside the guard.
func TestGuardInspectsTheReturnedError(t *testing.T) {
	noGoexit := func() { t.Error("onGoexit called") }
	for name, bad := range map[string]error{"typed nil": (*badErr)(nil), "panicking Unwrap": onlyUnwrapPanics{}} {
		p, err := engine.Guard(func() error { return bad }, noGoexit)
		if p != nil || err == nil {
			t.Fatalf("%s: Guard = %v, %v; want an error", name, p, err)
		}
		if !strings.Contains(err.Error(), "panics when inspected") {
			t.Errorf("%s: error %q does not say the returned error panics", name, err)
		}
		_ = errors.Is(err, errors.ErrUnsupported) // the caller's own walks are safe now
	}
	wrapped := fmt.Errorf("ctx: %w", &badErr{cause: errors.New("cause")})
	if _, err := engine.Guard(func() error { return wrapped }, noGoexit); err != wrapped {
		t.Errorf("a sound error came back as %v", err)
	}
}

// A panic whose value is an error is recorded as a failure wrapping both
// the sentinel and that error: ErrListenerPanic "wraps the value of a
// listener panic", and errors.Is did not reach a panicked error.
func TestPanicErr(t *testing.T) {
	sentinel, mine := errors.New("panicked"), errors.New("mine")
	p, _ := engine.Guard(func() error { panic(mine) }, func() {})
	if err := p.Err(sentinel); !errors.Is(err, sentinel) || !errors.Is(err, mine) {
		t.Errorf("Err of panic(error) = %v; want it to match the sentinel and the panicked error", err)
	}
	p, _ = engine.Guard(func() error { panic("text") }, func() {})
	if err := p.Err(sentinel); !errors.Is(err, sentinel) || err.Error() != "panicked: text" {
		t.Errorf("Err of panic(string) = %v", err)
	}
}
