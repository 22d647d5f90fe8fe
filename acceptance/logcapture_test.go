package acceptance

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/outbox-go/outbox/retry"
)

// logCapture collects the text output of a logger at Debug level; it is
// safe for the concurrent writes of every component. slog's handlers write
// one record per Write call.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Logger returns a text logger at Debug level writing into c.
func (c *logCapture) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Lines returns the lines holding every one of subs.
func (c *logCapture) Lines(subs ...string) []string {
	var out []string
	for l := range strings.Lines(c.String()) {
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

// Count returns how many lines hold every one of subs.
func (c *logCapture) Count(subs ...string) int { return len(c.Lines(subs...)) }

// fixedRetry retries after d whatever the attempt.
func fixedRetry(d time.Duration) retry.Policy {
	return retry.PolicyFunc(func(int) time.Duration { return d })
}
