package inbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
)

// ptrHandler is a handler type whose nil pointer panics when called.
type ptrHandler struct{ calls int }

func (h *ptrHandler) Handle(context.Context, inbox.Record) error { h.calls++; return nil }

// Handle refuses a nil value of a handler type (a nil HandlerFunc, a nil
// pointer) as it refuses nil itself: its topic's messages would all panic
// in the handler and end Dead. The topic stays free for a real handler.
func TestHandleRefusesANilValueOfAHandlerType(t *testing.T) {
	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var nilFunc inbox.HandlerFunc
	for name, h := range map[string]inbox.Handler{
		"nil":                    nil,
		"inbox.HandlerFunc(nil)": nilFunc,
		"(*ptrHandler)(nil)":     (*ptrHandler)(nil),
	} {
		if err := d.Handle("t", h); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("Handle(%s) = %v, want core.ErrInvalidConfig", name, err)
		}
	}
	if err := d.HandleFunc("t", nil); !errors.Is(err, core.ErrInvalidConfig) {
		t.Errorf("HandleFunc(nil) = %v, want core.ErrInvalidConfig", err)
	}
	if err := d.Handle("t", &ptrHandler{}); err != nil {
		t.Errorf("Handle of a real handler after the refusals = %v", err)
	}
}
