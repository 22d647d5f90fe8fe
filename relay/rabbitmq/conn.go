package rabbitmq

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outbox-go/outbox/internal/deadline"
	"github.com/outbox-go/outbox/internal/ratelog"
)

// dial opens a connection: Config.Dial, or URL with DialTimeout bounding
// the TCP connect and the AMQP handshake together.
func (r *Relay) dial(ctx context.Context) (*amqp.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.DialTimeout)
	defer cancel()
	if r.cfg.Dial != nil {
		conn, err := r.cfg.Dial(ctx)
		if err == nil && conn == nil {
			err = errNilConnection
		}
		return conn, err
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(r.cfg.ConnectionName)
	var stop func() bool
	conn, err := amqp.DialConfig(r.cfg.URL, amqp.Config{
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake runs under this deadline (the client clears it
			// once the connection is open); a cancelled ctx ends it early.
			deadline, _ := ctx.Deadline()
			if err := c.SetDeadline(deadline); err != nil {
				_ = c.Close()
				return nil, err
			}
			stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
			bc := newBatchConn(c, r.cfg.ConfirmTimeout, r.blocked.Load)
			r.socket.Store(bc)
			return bc, nil
		},
	})
	if err != nil {
		// The socket's deadline, ctx's own, may end the handshake a moment
		// before ctx's timer ends ctx: wait for it, so the caller tells
		// whose deadline it was.
		deadline.Settle(ctx, 0)
	}
	if stop != nil && !stop() && err == nil {
		// ctx ended during the handshake's last steps: the deadline we set
		// may have broken the connection.
		_ = conn.Close()
		return nil, ctx.Err()
	}
	return conn, err
}

// startOpen returns the open connection for a channel open, counted in
// r.opens (call r.opens.Done once it ended), or why there is none. Close
// waits for the opens after it took the connection: none can start then.
func (r *Relay) startOpen() (*amqp.Connection, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil || r.conn.IsClosed() {
		return nil, fmt.Errorf("%w: %w", ErrNotConnected, r.connErr)
	}
	r.opens.Add(1)
	return r.conn, nil
}

// supervise watches the connection; when it is lost, it dials again with
// backoff until it succeeds or the relay is closed. It also tracks the
// broker's connection.blocked notifications.
//
// A lost connection logs a WARN and its reconnection an INFO, at most once
// per connLogInterval (connLog): a link cut every few seconds logs one
// pair a minute, the WARN counting the losses since the last one
// ("losses"); the others log at DEBUG, unless their reconnection fails at
// least once (the broker is really away), which logs the pair all the
// same.
func (r *Relay) supervise(conn *amqp.Connection) {
	defer close(r.superDone)
	lost := connLog{limit: ratelog.New(connLogInterval)}
	for {
		closes := conn.NotifyClose(make(chan *amqp.Error, 1))
		blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
		var cause error
	watch:
		for {
			select {
			case <-r.stop:
				return
			case b, ok := <-blocks:
				if !ok {
					blocks = nil
					continue
				}
				r.blocked.Store(b.Active)
				if b.Active {
					r.log.Warn("rabbitmq relay: the broker blocked the connection; events are put off until it unblocks it",
						slog.String("broker", r.cfg.Breaker.Name), slog.String("reason", b.Reason))
				} else {
					r.log.Info("rabbitmq relay: the broker unblocked the connection", slog.String("broker", r.cfg.Breaker.Name))
				}
			case e, ok := <-closes:
				cause = amqp.ErrClosed
				if ok && e != nil {
					cause = e
				}
				break watch
			}
		}
		if s := r.socket.Load(); s != nil {
			if werr := s.writeErr(); werr != nil {
				// The relay closed the socket itself (a write that made no
				// progress): the client saw only the closed socket.
				cause = fmt.Errorf("a write to the broker failed: %w (the relay closed the socket; the client then saw: %w)", werr, cause)
			}
		}
		r.blocked.Store(false)
		r.mu.Lock()
		r.conn, r.connErr = nil, cause
		r.mu.Unlock()
		lost.lost(r, cause, time.Now())
		conn = r.reconnect(&lost)
		if conn == nil {
			return
		}
	}
}

// reconnectWait returns the wait before a dial: delay with jitter (0.5
// to 1.5 times it), never past max.
func reconnectWait(delay, max time.Duration) time.Duration {
	return min(time.Duration(float64(delay)*(0.5+rand.Float64())), max)
}

// connLogInterval is the least time between two WARN lines of a lost
// connection (see supervise).
const connLogInterval = time.Minute

// connLog logs the losses of the connection (see supervise). It is the
// supervising goroutine's own.
type connLog struct {
	limit *ratelog.Limiter // the WARN lines: one per connLogInterval
	loud  bool             // the current loss was logged at WARN
	cause error            // the current loss's cause
}

// lost logs a loss of the connection at now: at WARN, counting the losses
// since the last WARN, unless that was less than connLogInterval ago.
func (l *connLog) lost(r *Relay, cause error, now time.Time) {
	l.cause = cause
	n, due := l.limit.Take(now)
	if l.loud = due; !due {
		r.logLost(slog.LevelDebug, cause, 1)
		return
	}
	r.logLost(slog.LevelWarn, cause, n)
}

// dialFailed logs, at WARN, a loss logged at DEBUG whose reconnection
// failed once: not a blip, the broker is away.
func (l *connLog) dialFailed(r *Relay, now time.Time) {
	if l.loud {
		return
	}
	l.loud = true
	r.logLost(slog.LevelWarn, l.cause, l.limit.Flush(now))
}

// reconnectedLevel is the level of the line of the current loss's
// reconnection: INFO when the loss was logged at WARN.
func (l *connLog) reconnectedLevel() slog.Level {
	if l.loud {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// logLost logs the loss of the connection at level; losses counts it and
// those logged at DEBUG since the last WARN.
func (r *Relay) logLost(level slog.Level, cause error, losses int) {
	r.log.LogAttrs(context.Background(), level, "rabbitmq relay: connection lost; reconnecting in the background",
		slog.String("broker", r.cfg.Breaker.Name), slog.String("error", cause.Error()), slog.Int("losses", losses))
}

// reconnect dials until it succeeds, waiting ReconnectDelay (doubling up
// to ReconnectMaxDelay, with jitter) between two attempts. It returns nil
// when the relay is closed first. lost logs the loss at WARN after a
// failed dial if it did not already, and says the level of the
// "reconnected" line.
func (r *Relay) reconnect(lost *connLog) *amqp.Connection {
	delay := r.cfg.ReconnectDelay
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(reconnectWait(delay, r.cfg.ReconnectMaxDelay))
		select {
		case <-r.stop:
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := r.dial(r.stopCtx)
		if err == nil {
			r.mu.Lock()
			r.conn, r.connErr = conn, nil
			r.mu.Unlock()
			r.log.LogAttrs(context.Background(), lost.reconnectedLevel(), "rabbitmq relay: reconnected",
				slog.String("broker", r.cfg.Breaker.Name), slog.Int("attempts", attempt))
			return conn
		}
		r.mu.Lock()
		r.connErr = err
		r.mu.Unlock()
		lost.dialFailed(r, time.Now())
		delay = min(2*delay, r.cfg.ReconnectMaxDelay)
	}
}
