package rabbitmq

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// deafPeer returns the two ends of a loopback TCP connection whose
// server end the test does not read, with small fixed buffers (no
// autotuning): the kernel takes little before a write blocks for good.
func deafPeer(t *testing.T) (client, server net.Conn) {
	t.Helper()
	client, server = tcpPair(t)
	if err := server.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetWriteBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	return client, server
}

// writeUntilError writes 64 KiB chunks to b until a Write fails, and
// sends that error.
func writeUntilError(b *batchConn) <-chan error {
	written := make(chan error, 1)
	go func() {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := b.Write(chunk); err != nil {
				written <- err
				return
			}
		}
	}()
	return written
}

// Writes from many goroutines, serialized by a lock as the client
// serializes its frames, arrive whole and in the order of the writes, and
// Close sends what was written before it.
func TestBatchConnKeepsOrderAndFlushesOnClose(t *testing.T) {
	client, server := tcpPair(t)
	b := newBatchConn(client, 0, nil)
	received := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(server)
		received <- all
	}()
	var (
		mu   sync.Mutex // the client's send lock
		want bytes.Buffer
		wg   sync.WaitGroup
	)
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				frame := fmt.Appendf(nil, "<%d:%d:%s>", g, i, bytes.Repeat([]byte{'x'}, i%300))
				mu.Lock()
				want.Write(frame)
				n, err := b.Write(frame)
				mu.Unlock()
				if err != nil || n != len(frame) {
					t.Errorf("Write: %d, %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case got := <-received:
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("received %d bytes, not the %d written in order", len(got), want.Len())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the peer did not see the connection close")
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
	if err := b.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
	if err := b.writeErr(); err != nil {
		t.Errorf("writeErr() = %v after a plain Close, want nil (no write failed)", err)
	}
}

// failConn fails every write once told to, and blocks writes until
// released.
type failConn struct {
	net.Conn
	fail    chan struct{} // closed: writes fail
	release chan struct{} // closed: writes proceed
	closed  chan struct{}
	once    sync.Once
}

func (f *failConn) Write(p []byte) (int, error) {
	<-f.release
	select {
	case <-f.fail:
		return 0, errors.New("broken pipe")
	default:
		return len(p), nil
	}
}

func (f *failConn) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

// A write error of the sender closes the connection and is returned by
// every later Write; a Write waiting for room (maxPending bytes queued)
// gets it too instead of waiting forever.
func TestBatchConnWriteErrorReachesWriters(t *testing.T) {
	f := &failConn{fail: make(chan struct{}), release: make(chan struct{}), closed: make(chan struct{})}
	b := newBatchConn(f, 0, nil)
	// The sender takes the first write and blocks in it; the next ones
	// fill the buffer up to maxPending, then one waits for room.
	if _, err := b.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	blocked := make(chan error, 1)
	go func() {
		for {
			if _, err := b.Write(chunk); err != nil {
				blocked <- err
				return
			}
		}
	}()
	close(f.fail)
	close(f.release)
	select {
	case err := <-blocked:
		if err == nil || err.Error() != "broken pipe" {
			t.Errorf("writer got %v, want the sender's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a writer kept waiting after the sender failed")
	}
	select {
	case <-f.closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the connection was not closed after the write error")
	}
	if _, err := b.Write([]byte("again")); err == nil {
		t.Error("Write after the error succeeded")
	}
	_ = b.Close()
	<-b.done
}

// A peer that stops reading (a blackholed network, a broker that reads no
// more): the sender blocks in its write once the kernel's buffers are
// full, and a Write waits for room once maxPending bytes are queued. Close
// still returns, closing the socket after a bounded wait for the sender
// instead of waiting for it for ever, and the waiting Write gets an error.
func TestBatchConnCloseWithStuckSender(t *testing.T) {
	client, _ := deafPeer(t)
	b := newBatchConn(client, 0, nil)
	written := writeUntilError(b)
	// maxPending bytes queued: the sender did not take them, it is stuck in
	// its write; the writer waits for room.
	testsupport.WaitFor(t, 30*time.Second, "maxPending bytes queued behind a stuck sender", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.buf) >= maxPending
	})
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	const bound = closeFlushTimeout + 2*time.Second
	select {
	case <-closed:
	case <-time.After(bound):
		t.Errorf("Close still waiting after %v for a sender stuck in its write", bound)
		_ = client.Close() // unblocks the sender, and so Close
		<-closed
	}
	select {
	case err := <-written:
		if err == nil {
			t.Error("the waiting Write returned no error")
		}
	case <-time.After(bound):
		t.Error("a Write waiting for room still blocked after Close")
		<-written
	}
	<-b.done
}

// A peer that reads nothing for longer than the stall bound: the sender's
// write fails then (a write deadline), which closes the connection, and a
// Write waiting for room gets that error instead of waiting until the
// client's heartbeat timeout (amqp091-go gives a publish's write no ctx).
func TestBatchConnStallFailsTheConnection(t *testing.T) {
	client, server := deafPeer(t)
	const stall = 200 * time.Millisecond
	b := newBatchConn(client, stall, nil)
	written := writeUntilError(b)
	select {
	case err := <-written:
		if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "the broker took no bytes for 200ms") {
			t.Errorf("the waiting Write got %v, want the stalled write's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a Write kept waiting for room behind a write stalled far longer than the bound")
	}
	// The sender closed the connection: its peer reads EOF (or a reset)
	// once it drains what the kernel took.
	if err := server.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, server); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("the connection stayed open after its write stalled")
	}
	if _, err := b.Write([]byte("again")); err == nil {
		t.Error("Write after the stall succeeded")
	}
	_ = b.Close()
	<-b.done
	// What the relay logs as the cause of the lost connection: the client
	// itself sees only the closed socket.
	if err := b.writeErr(); !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "the broker took no bytes") {
		t.Errorf("writeErr() = %v after the stall, want the stalled write's error", err)
	}
}

// A peer that reads slowly but steadily is never failed, however long a
// batch takes as a whole: the stall bound is on progress (it used to be on
// each batch, so a peer taking 1 MiB in more than the bound, a slow link
// or the broker's flow control, had its connection failed).
func TestBatchConnSlowReaderIsNotStalled(t *testing.T) {
	// A pipe has no buffer: a write ends when the reader took its bytes,
	// and a deadline in the middle returns what it took so far.
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	const stall = 500 * time.Millisecond
	b := newBatchConn(client, stall, nil)
	total := maxPending + 512<<10 // batches of up to 1 MiB: 0.65 s each at the reader's pace
	received := make(chan int, 1)
	go func() {
		buf := make([]byte, 16<<10)
		n := 0
		for n < total {
			time.Sleep(10 * time.Millisecond) // about 1.6 MB/s
			m, err := server.Read(buf)
			n += m
			if err != nil {
				t.Errorf("read after %d bytes: %v", n, err)
				break
			}
		}
		received <- n
	}()
	chunk := make([]byte, 64<<10)
	for written := 0; written < total; written += len(chunk) {
		if _, err := b.Write(chunk); err != nil {
			t.Fatalf("Write after %d bytes to a reader that keeps reading: %v", written, err)
		}
	}
	select {
	case n := <-received:
		if n != total {
			t.Errorf("the reader got %d bytes, want %d", n, total)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the reader did not get every byte")
	}
	_ = b.Close()
	<-b.done
}

// While the broker holds the connection blocked (connection.blocked: it
// reads nothing until a resource alarm clears) a write that makes no
// progress is not failed; once it no longer is, the stall fails it.
func TestBatchConnHeldIsNotStalled(t *testing.T) {
	client, _ := deafPeer(t)
	const stall = 100 * time.Millisecond
	var held atomic.Bool
	held.Store(true)
	var checks atomic.Int32
	b := newBatchConn(client, stall, func() bool {
		checks.Add(1)
		return held.Load()
	})
	written := writeUntilError(b)
	// Several stalls pass while held: nothing fails.
	testsupport.WaitFor(t, 30*time.Second, "three stalls of a held connection", func() bool { return checks.Load() >= 3 })
	select {
	case err := <-written:
		t.Fatalf("a held connection failed: %v", err)
	default:
	}
	held.Store(false)
	select {
	case err := <-written:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Write = %v, want the stall's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no failure once the connection was no longer held")
	}
	_ = b.Close()
	<-b.done
}
