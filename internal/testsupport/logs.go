package testsupport

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// LogBuffer captures log output; it is safe for the concurrent writes of
// every component sharing one logger. The zero value is ready to use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; slog's handlers write one record per call.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a text logger at Debug level writing into b.
func (b *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Lines returns the non-empty lines (without their newline) that contain
// every one of subs.
func (b *LogBuffer) Lines(subs ...string) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		l = strings.TrimRight(l, "\n")
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// Count returns how many lines contain every one of subs.
func (b *LogBuffer) Count(subs ...string) int { return len(b.Lines(subs...)) }

// NewLogger returns a Debug-level text logger and the buffer it writes to.
func NewLogger() (*slog.Logger, *LogBuffer) {
	b := &LogBuffer{}
	return b.Logger(), b
}
