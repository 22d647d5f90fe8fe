package ratelog

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// PerKey logs once per key for the first max keys, then rate-limits the
// lines of further keys together, saying so.
func TestPerKey(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, nil))
	p := NewPerKey(2, time.Hour)
	for range 3 {
		for _, k := range []string{"a", "b", "c", "d"} {
			p.Hit(log, slog.LevelWarn, k, "no listener", slog.String("key", k))
		}
	}
	out := b.String()
	for k, want := range map[string]int{"key=a": 1, "key=b": 1, "key=c": 1, "key=d": 0, "rate-limited": 1} {
		if got := strings.Count(out, k); got != want {
			t.Errorf("%d lines with %s, want %d:\n%s", got, k, want, out)
		}
	}
}
