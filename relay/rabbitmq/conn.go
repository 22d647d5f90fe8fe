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
func (r *Relay) supervise(conn *amqp.Connection) {
	defer close(r.superDone)
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
		r.log.Warn("rabbitmq relay: connection lost; reconnecting in the background",
			slog.String("broker", r.cfg.Breaker.Name), slog.String("error", cause.Error()))
		conn = r.reconnect()
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

// reconnect dials until it succeeds, waiting ReconnectDelay (doubling up
// to ReconnectMaxDelay, with jitter) between two attempts. It returns nil
// when the relay is closed first.
func (r *Relay) reconnect() *amqp.Connection {
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
			r.log.Info("rabbitmq relay: reconnected", slog.String("broker", r.cfg.Breaker.Name), slog.Int("attempts", attempt))
			return conn
		}
		r.mu.Lock()
		r.connErr = err
		r.mu.Unlock()
		delay = min(2*delay, r.cfg.ReconnectMaxDelay)
	}
}
