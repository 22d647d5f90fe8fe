package tenant_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (dispatcher,
// poller, refresh loop, database pools).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
