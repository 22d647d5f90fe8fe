package jdbcstore_test

import (
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/sqlitetest"
)

// The SQLite helpers shared with jdbcstore/sqlite's tests.
var (
	openTestStore = sqlitetest.OpenStore
	openRaw       = sqlitetest.OpenRaw
)

func mustEnv(t *testing.T, b *core.Builder) core.Envelope {
	t.Helper()
	env, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return env
}
