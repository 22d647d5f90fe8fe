package jdbcstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/jdbcstore"
)

// A failing purge says once which purge failed, without an empty event id.
func TestPurgeErrorNamesThePurgeOnce(t *testing.T) {
	s, _ := openTestStore(t, jdbcstore.Config{})
	if err := s.DB().Close(); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{false, true} {
		_, err := s.Purge(context.Background(), jdbcstore.PurgeOptions{DoneOlderThan: time.Hour, DryRun: dry})
		if err == nil {
			t.Fatalf("Purge (dry run %v) on a closed database succeeded", dry)
		}
		msg := err.Error()
		if strings.Count(msg, "outbox: jdbcstore:") != 1 || !strings.Contains(msg, "purge DONE") || strings.Contains(msg, `""`) {
			t.Errorf("Purge (dry run %v) error = %q; want one prefix, the purge named, no empty id", dry, msg)
		}
	}
}
