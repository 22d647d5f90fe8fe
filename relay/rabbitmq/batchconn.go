package rabbitmq

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// maxPending bounds the bytes a batchConn holds for its sender: a Write
// beyond it waits until the sender took the batch.
const maxPending = 1 << 20

// closeFlushTimeout bounds how long Close waits for the sender to write
// the rest. Only a peer that reads no more makes it wait that long; the
// client closes its connection after it got the broker's answer to
// connection.close, or because the connection failed (when what is left
// to send no longer matters).
const closeFlushTimeout = time.Second

// batchConn is the relay's connection to the broker with its writes
// gathered: amqp091-go writes and flushes every publish on its own, under
// its connection's send lock, so concurrent publishes each cost a write
// system call while the others wait for the lock. Write copies into a
// buffer and returns; one sender goroutine writes everything gathered
// meanwhile in one call. A write error is returned by every later Write
// and closes the connection, so the client's reader fails too; a publish
// whose bytes were lost gets no confirm, which the relay already treats as
// an outage. The kernel must take some of the bytes within every stall
// (the relay's ConfirmTimeout): a peer that reads nothing for that long (a
// blackholed network), unless it blocked the connection on purpose, fails
// the connection then, so a publish waiting for room, which amqp091-go
// gives no ctx, waits no longer than a confirm would, instead of until
// the client's heartbeat timeout. Reads, deadlines and addresses are the
// underlying connection's.
type batchConn struct {
	net.Conn
	stall time.Duration // how long a write may make no progress; 0: no bound
	held  func() bool   // the broker blocked the connection (connection.blocked); nil: never

	mu      sync.Mutex
	taken   *sync.Cond // the sender took a batch, or failed
	buf     []byte     // bytes written, not yet taken by the sender
	spare   []byte     // the sender's last batch, reused
	err     error      // the sender's write error, or net.ErrClosed after Close
	closing bool

	wake chan struct{} // capacity 1: there are bytes for the sender
	done chan struct{} // closed when the sender returns
}

// newBatchConn wraps c and starts its sender; a write that makes no
// progress for stall (0: no bound) fails the connection, unless held (nil:
// never) reports that the broker blocked it.
func newBatchConn(c net.Conn, stall time.Duration, held func() bool) *batchConn {
	b := &batchConn{Conn: c, stall: stall, held: held, wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.taken = sync.NewCond(&b.mu)
	go b.send()
	return b
}

// Write queues p for the sender and returns at once, unless maxPending
// bytes are already waiting. Once Close began it returns net.ErrClosed:
// the sender takes no more.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.buf) >= maxPending && b.err == nil && !b.closing {
		b.taken.Wait()
	}
	if b.err != nil || b.closing {
		err := b.err
		if err == nil {
			err = net.ErrClosed
		}
		b.mu.Unlock()
		return 0, err
	}
	b.buf = append(b.buf, p...)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default: // the sender is already due to look
	}
	return len(p), nil
}

// send writes the gathered bytes until Close or a write error.
func (b *batchConn) send() {
	defer close(b.done)
	for range b.wake {
		b.mu.Lock()
		batch, closing := b.buf, b.closing
		b.buf = b.spare[:0]
		b.taken.Broadcast()
		b.mu.Unlock()
		if len(batch) > 0 {
			if err := b.write(batch); err != nil {
				b.mu.Lock()
				if b.err == nil {
					b.err = err
				}
				b.taken.Broadcast()
				b.mu.Unlock()
				_ = b.Conn.Close()
				return
			}
		}
		b.mu.Lock()
		b.spare = batch[:0]
		b.mu.Unlock()
		if closing {
			return
		}
	}
}

// write writes batch to the connection. With b.stall set, the broker
// must take some of it within every b.stall: a write that makes no
// progress for that long fails the connection, unless b.held says the
// broker blocked the connection (a resource alarm, when it stops reading
// on purpose until the alarm clears). A slow reader that keeps taking
// bytes is not failed as long as the kernel lets the write go on within
// b.stall (it does once a share of its send buffer is free: over a link
// of tens of KB/s, a large buffer may take longer).
func (b *batchConn) write(batch []byte) error {
	for len(batch) > 0 {
		if b.stall > 0 {
			// Only the sender writes, so only it sets write deadlines (the
			// client's own SetDeadline, once the handshake is done, clears
			// this one at worst for one write).
			if err := b.Conn.SetWriteDeadline(time.Now().Add(b.stall)); err != nil {
				return err
			}
		}
		n, err := b.Conn.Write(batch)
		batch = batch[n:]
		switch {
		case err == nil:
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case n > 0 || b.held != nil && b.held():
			// The broker took bytes, or holds them back on purpose.
		default:
			return fmt.Errorf("%w: the broker took no bytes for %v", err, b.stall)
		}
	}
	return nil
}

// writeErr returns the error of the write that made the sender close the
// socket, nil when it did not (Close, or no failure yet).
func (b *batchConn) writeErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(b.err, net.ErrClosed) {
		return nil
	}
	return b.err
}

// Close sends what was written before it (the client's connection.close
// frames, for one), then closes the connection. A Write waiting for room
// returns net.ErrClosed at once. When the sender has not finished within
// closeFlushTimeout (the peer reads no more: its write is stuck in the
// kernel, which only closing the socket ends), Close closes the socket
// and the rest is dropped.
func (b *batchConn) Close() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return net.ErrClosed
	}
	b.closing = true
	b.taken.Broadcast() // the writers waiting for room: no more is taken
	b.mu.Unlock()
	// The sender looks once more, sends the rest and returns. A full wake
	// means it is due to look anyway, and will see closing.
	select {
	case b.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(closeFlushTimeout)
	select {
	case <-b.done:
		t.Stop()
	case <-t.C:
		_ = b.Conn.Close() // fails the stuck write; the sender returns
		<-b.done
	}
	b.mu.Lock()
	if b.err == nil {
		b.err = net.ErrClosed
	}
	b.taken.Broadcast()
	b.mu.Unlock()
	err := b.Conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil // the sender closed it after a write error
	}
	return err
}
