package ratelog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// newLog returns a logger writing text into the returned buffer.
func newLog() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, nil)), &buf
}

func TestHitLogsOncePerIntervalWithCount(t *testing.T) {
	log, buf := newLog()
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

// PerKey logs once per key for the first max keys, then rate-limits the
// lines of further keys together, saying so.
func TestPerKey(t *testing.T) {
	log, buf := newLog()
	p := NewPerKey(2, time.Hour)
	for range 3 {
		for _, k := range []string{"a", "b", "c", "d"} {
			p.Hit(log, slog.LevelWarn, k, "no listener", slog.String("key", k))
		}
	}
	out := buf.String()
	for k, want := range map[string]int{"key=a": 1, "key=b": 1, "key=c": 1, "key=d": 0, "rate-limited": 1} {
		if got := strings.Count(out, k); got != want {
			t.Errorf("%d lines with %s, want %d:\n%s", got, k, want, out)
		}
	}
}

// An incident is one WARN, DEBUG lines while it goes on, and one INFO
// when it ends; successes outside an incident say nothing.
func TestIncident(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var i Incident
	boom := errors.New("boom")
	for _, err := range []error{nil, boom, boom, boom, nil, nil, boom, nil} {
		i.Report(log, err, "failed", "again", "recovered")
	}
	got := buf.String()
	for msg, want := range map[string]int{"level=WARN msg=failed": 2, "level=DEBUG msg=again": 2, "level=INFO msg=recovered": 2} {
		if n := strings.Count(got, msg); n != want {
			t.Errorf("%d lines %q, want %d:\n%s", n, msg, want, got)
		}
	}
}

// Take counts without logging and says when a line is due, with the
// occurrences it covers; Flush starts a new interval as a forced line
// would, returning what it covers.
func TestTakeAndFlush(t *testing.T) {
	r := New(time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, due := r.Take(t0); !due || n != 1 {
		t.Fatalf("first Take = %d, %v; want 1, due", n, due)
	}
	for i := range 2 {
		if _, due := r.Take(t0.Add(time.Duration(i+1) * time.Second)); due {
			t.Fatal("a Take within the interval was due")
		}
	}
	if n := r.Flush(t0.Add(10 * time.Second)); n != 2 {
		t.Fatalf("Flush = %d, want the 2 occurrences since the last line", n)
	}
	if _, due := r.Take(t0.Add(65 * time.Second)); due {
		t.Fatal("a Take within the interval after a Flush was due")
	}
	if n, due := r.Take(t0.Add(71 * time.Second)); !due || n != 2 {
		t.Fatalf("Take past the interval after the Flush = %d, %v; want 2, due", n, due)
	}
}
