package engine

import (
	"runtime/debug"
)

// Panic is the recovered value of a panic in user code, with the stack of
// the goroutine where it happened.
type Panic struct {
	Value any
	Stack []byte
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
	return nil, err
}
