package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestHitLogsOncePerIntervalWithCount(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	r := New(time.Hour)
	for range 5 {
		r.Hit(log, slog.LevelWarn, "full")
	}
	if n := strings.Count(buf.String(), "msg=full"); n != 1 {
		t.Fatalf("%d lines for 5 hits within the interval, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "occurrences=1") {
		t.Fatalf("first line lacks its count: %s", buf.String())
	}
	r.last = time.Now().Add(-2 * time.Hour) // the interval has passed
	r.Hit(log, slog.LevelWarn, "full")
	if !strings.Contains(buf.String(), "occurrences=5") {
		t.Fatalf("second line must count the 4 suppressed hits and itself:\n%s", buf.String())
	}
}
