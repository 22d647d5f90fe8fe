package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Panic is the recovered value of a panic in user code, with the stack of
// the goroutine where it happened.
type Panic struct {
	Value any
	Stack []byte
}

// Err returns the failure to record for the panic: an error wrapping
// sentinel and, when the panic value is an error, that error too (so
// errors.Is and errors.As reach it), else its text.
func (p *Panic) Err(sentinel error) error {
	if err, ok := p.Value.(error); ok {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return fmt.Errorf("%w: %v", sentinel, p.Value)
}

// Guard runs fn, the user code of one attempt (a listener, a handler), and
// reports how it ended:
//
//   - it returned: its error, and a nil *Panic;
//   - it panicked: a nil error and the recovered *Panic;
//   - it called runtime.Goexit (as t.FailNow and require.* do): Guard
//     calls onGoexit while the goroutine unwinds, and never returns. The
//     caller records the failed attempt there and keeps its pool of
//     workers at full strength; the goroutine's own deferred calls run
//     after onGoexit.
func Guard(fn func() error, onGoexit func()) (p *Panic, err error) {
	returned := false // until fn returned or panicked
	defer func() {
		if !returned {
			onGoexit()
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			returned = true
			p, err = &Panic{Value: r, Stack: debug.Stack()}, nil
		}
	}()
	err = fn()
	returned = true
	if err != nil {
		err = inspectable(err)
	}
	return nil, err
}

// errProbe and probeTarget are what inspectable looks for: nothing any
// error holds, so errors.Is and errors.As walk the whole tree.
var errProbe = errors.New("engine: probe")

type probeTarget struct{ error }

// inspectable returns err when its Error, Unwrap, Is and As methods,
// which the caller runs to log the error and decide the outcome, do not
// panic (a typed nil pointer whose methods read a field does); else an
// error that says so, which fails the attempt as any error would.
func inspectable(err error) (out error) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Errorf("the returned error (%T) panics when inspected: %v", err, r)
		}
	}()
	_ = err.Error()
	_ = errors.Is(err, errProbe)
	var target *probeTarget
	_ = errors.As(err, &target)
	return err
}
