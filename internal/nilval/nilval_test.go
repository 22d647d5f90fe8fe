package nilval_test

import (
	"testing"

	"github.com/outbox-go/outbox/internal/nilval"
)

type listener interface{ On() }

type impl struct{}

func (*impl) On() {}

type fn func()

func (fn) On() {}

func TestIs(t *testing.T) {
	var nilPtr *impl
	var nilFn fn
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{nil, true},
		{listener(nilPtr), true},
		{listener(nilFn), true},
		{[]int(nil), true},
		{map[string]int(nil), true},
		{listener(&impl{}), false},
		{listener(fn(func() {})), false},
		{0, false},
		{"", false},
	} {
		if got := nilval.Is(tc.v); got != tc.want {
			t.Errorf("Is(%#v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
