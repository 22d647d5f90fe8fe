package tenant_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/tenant"
)

// A database whose driver has no registered dialect is refused with an
// error naming the supported ones, before anything is opened.
func TestOpenUnsupportedDriver(t *testing.T) {
	t.Parallel()
	_, err := tenant.Open(t.Context(), tenant.Database{ID: "pg", Driver: "postgres", DSN: "postgres://u:secret@h/db"})
	if !errors.Is(err, jdbcstore.ErrUnsupportedDriver) {
		t.Fatalf("err = %v, want ErrUnsupportedDriver", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "jdbcstore/sqlite") || !strings.Contains(msg, "jdbcstore/mysql") || !strings.Contains(msg, "jdbcstore/postgres") || strings.Contains(msg, "secret") {
		t.Errorf("error %q does not name the supported dialects or leaks the DSN", msg)
	}
}
