package rabbitmq

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/ratelog"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// The wait between two dials never passes ReconnectMaxDelay, jitter
// included (it reached 1.5 times it), and stays within half to one and a
// half times the delay below it.
func TestReconnectWaitCapped(t *testing.T) {
	for range 10_000 {
		if w := reconnectWait(time.Second, time.Second); w < 500*time.Millisecond || w > time.Second {
			t.Fatalf("wait %v for a delay of 1s capped at 1s, want 0.5s..1s", w)
		}
		if w := reconnectWait(100*time.Millisecond, 5*time.Second); w < 50*time.Millisecond || w > 150*time.Millisecond {
			t.Fatalf("wait %v for a delay of 100ms, want 50ms..150ms", w)
		}
	}
}

// A link cut every few seconds logs one WARN "connection lost" and one
// INFO "reconnected" a minute (it logged a pair per cut: an audit), the
// WARN counting the losses since the last one; a loss whose reconnection
// fails is logged at WARN whatever the rate, and so is its reconnection.
func TestConnLogRateLimitsFlaps(t *testing.T) {
	var logs *testsupport.LogBuffer
	r := &Relay{}
	r.cfg.Breaker.Name = "amqp"
	t0 := testsupport.Epoch
	l := connLog{limit: ratelog.New(connLogInterval)}
	step := func(at time.Duration, dialFails bool, wantLost, wantReconnected slog.Level, wantLosses int) {
		t.Helper()
		logs = &testsupport.LogBuffer{}
		r.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		l.lost(r, errors.New("connection reset"), t0.Add(at))
		if dialFails {
			l.dialFailed(r, t0.Add(at+time.Second))
		}
		lines := logs.Lines("connection lost")
		if dialFails {
			lines = lines[:1] // the second is the WARN after the failed dial
		}
		if len(lines) != 1 {
			t.Fatalf("at %v: %d loss lines, want 1:\n%s", at, len(lines), logs)
		}
		if want := "level=" + wantLost.String(); !strings.Contains(lines[0], want) || !strings.Contains(lines[0], fmt.Sprintf("losses=%d", wantLosses)) {
			t.Errorf("at %v: %s, want %s losses=%d", at, lines[0], want, wantLosses)
		}
		if got := l.reconnectedLevel(); got != wantReconnected {
			t.Errorf("at %v: reconnected at %v, want %v", at, got, wantReconnected)
		}
	}
	step(0, false, slog.LevelWarn, slog.LevelInfo, 1)
	step(5*time.Second, false, slog.LevelDebug, slog.LevelDebug, 1)
	step(10*time.Second, false, slog.LevelDebug, slog.LevelDebug, 1)
	// The next minute: a WARN counting itself and the two quiet ones.
	step(61*time.Second, false, slog.LevelWarn, slog.LevelInfo, 3)
	step(65*time.Second, true, slog.LevelDebug, slog.LevelInfo, 1) // its dial failed: WARN below
	if n := logs.Count("level=WARN", "connection lost", "losses=1"); n != 1 {
		t.Errorf("a loss whose reconnection failed: %d WARN lines, want 1:\n%s", n, logs)
	}
	step(70*time.Second, false, slog.LevelDebug, slog.LevelDebug, 1) // within a minute of that WARN
}
