package jdbcstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Every method of a Store that takes a context refuses a nil one with
// core.ErrNilContext before anything runs. A nil context that reached
// database/sql panicked while the pool's lock was held, and every later
// use of the pool, Close included, then waited for ever.
func TestNilContextIsRefused(t *testing.T) {
	st, _ := openTestStore(t, jdbcstore.Config{})
	if n := testsupport.RefusesNilContext(t, st, "WithoutHeldBack" /* a test hook */); n < 30 {
		t.Errorf("called %d methods with a nil context, want every one taking a context (30 or more)", n)
	}
	done := make(chan error, 1)
	go func() { _, err := st.CountByStatus(context.Background()); done <- err }()
	if err := testsupport.Recv(t, 10*time.Second, done, "the store after the nil-context calls (its pool is stuck)"); err != nil {
		t.Fatalf("CountByStatus after the refusals: %v", err)
	}
}
