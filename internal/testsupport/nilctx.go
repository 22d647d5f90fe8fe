package testsupport

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/outbox-go/outbox/core"
)

// RefusesNilContext calls every exported method of v whose first
// parameter is a context.Context and whose last result is an error with a
// nil context and zero values for the other arguments, and fails t for
// each one that panics or returns anything but core.ErrNilContext. Methods
// named in skip are left out. It returns how many methods it called, so a
// test can tell that it checked something.
func RefusesNilContext(t testing.TB, v any, skip ...string) int {
	t.Helper()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	rv := reflect.ValueOf(v)
	skipped := make(map[string]bool, len(skip))
	for _, s := range skip {
		skipped[s] = true
	}
	called := 0
	for i := range rv.NumMethod() {
		name := rv.Type().Method(i).Name
		m := rv.Method(i)
		mt := m.Type()
		if skipped[name] || mt.NumIn() == 0 || mt.In(0) != ctxType || mt.NumOut() == 0 || mt.Out(mt.NumOut()-1) != errType {
			continue
		}
		args := make([]reflect.Value, mt.NumIn())
		for j := range args {
			args[j] = reflect.Zero(mt.In(j))
		}
		if mt.IsVariadic() {
			args = args[:len(args)-1] // no variadic arguments
		}
		called++
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s(nil ctx) panicked: %v", name, p)
				}
			}()
			out := m.Call(args)
			err, _ := out[len(out)-1].Interface().(error)
			if !errors.Is(err, core.ErrNilContext) {
				t.Errorf("%s(nil ctx) = %v, want core.ErrNilContext", name, err)
			}
		}()
	}
	return called
}
