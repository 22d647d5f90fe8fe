package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A command interrupted by SIGINT or SIGTERM (run's ctx ends) says so:
// before, it printed only "outboxctl: context canceled".
func TestInterruptedCommandSaysSo(t *testing.T) {
	dsn, _ := sqliteDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came at once
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"--dsn", dsn, "stats"}, &out, &errOut)
	if code != exitFailed || !strings.Contains(errOut.String(), "interrupted before it finished") || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("interrupted stats: exit %d, stderr %q; want exit 1 and one line saying it was interrupted", code, errOut.String())
	}
}
