// Package nilval tells a nil held in an interface: a nil pointer, func,
// map, channel, slice or interface value is not == nil once it is in an
// interface, yet calling through it fails.
package nilval

import "reflect"

// Is reports whether v is nil or holds a nil pointer, func, map,
// channel, slice or interface value.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
