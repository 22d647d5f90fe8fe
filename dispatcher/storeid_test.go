package dispatcher_test

import (
	"context"
	"testing"

	"github.com/outbox-go/outbox/dispatcher"
)

// A context that is no listener's names no store.
func TestStoreIDOutsideAListener(t *testing.T) {
	//lint:ignore SA1012 a nil ctx is part of the contract
	if got := dispatcher.StoreID(nil); got != "" { //nolint:staticcheck
		t.Errorf("StoreID(nil) = %q", got)
	}
	if got := dispatcher.StoreID(context.Background()); got != "" {
		t.Errorf("StoreID(Background) = %q", got)
	}
}
