package rabbitmq_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/rabbitmq"
)

// rabbitBin is where Debian's rabbitmq-server package keeps the scripts
// that run a node as the calling user (/usr/sbin's wrappers switch to
// the rabbitmq user, who cannot write a test's directories).
const rabbitBin = "/usr/lib/rabbitmq/bin"

// privateBroker is a RabbitMQ node of the test's own: its own node name,
// ports, data and Erlang cookie. Tests that change the broker's state
// (a resource alarm) run on it, never on the shared broker.
type privateBroker struct {
	url  string
	node string
	env  []string
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// startPrivateBroker starts a node and stops it in Cleanup. Without the
// RabbitMQ package the test skips, or fails when CI=true.
func startPrivateBroker(t *testing.T) *privateBroker {
	t.Helper()
	if _, err := os.Stat(filepath.Join(rabbitBin, "rabbitmq-server")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a private RabbitMQ node needs Debian's rabbitmq-server package: %v", err)
		}
		t.Skipf("no RabbitMQ server package: %v", err)
	}
	dir, err := os.MkdirTemp("", "outbox-rabbitmq-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port, dist := freePort(t), freePort(t)
	b := &privateBroker{
		url:  fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port),
		node: fmt.Sprintf("outboxtest%d@localhost", port),
	}
	b.env = append(os.Environ(),
		"HOME="+dir, // the node's Erlang cookie, shared with rabbitmqctl
		"RABBITMQ_NODENAME="+b.node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_PLUGINS_EXPAND_DIR="+filepath.Join(dir, "plugins-expand"),
		"RABBITMQ_FEATURE_FLAGS_FILE="+filepath.Join(dir, "feature_flags"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"),
	)
	cmd := exec.Command(filepath.Join(rabbitBin, "rabbitmq-server"))
	cmd.Env = b.env
	out, err := os.Create(filepath.Join(dir, "server.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a private RabbitMQ node: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = out.Close(); close(exited) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stop := exec.CommandContext(ctx, filepath.Join(rabbitBin, "rabbitmqctl"), "-n", b.node, "stop")
		stop.Env = b.env
		_ = stop.Run()
		select {
		case <-exited:
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		conn, err := amqp.DialConfig(b.url, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err == nil {
			_ = conn.Close()
			return b
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "server.out"))
			t.Fatalf("the private RabbitMQ node exited:\n%s", log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.out"))
			t.Fatalf("the private RabbitMQ node did not accept connections within 90 s: %v\n%s", err, log)
		}
	}
}

// ctl runs rabbitmqctl against the node.
func (b *privateBroker) ctl(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(rabbitBin, "rabbitmqctl"), append([]string{"-n", b.node}, args...)...)
	cmd.Env = b.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// A broker that blocks its publishers (a memory alarm: connection.blocked)
// is an outage, not a failure of the events: while the connection is
// blocked the relay puts events off without charging attempts, nothing
// goes DEAD, and once the alarm clears (connection.unblocked) every
// committed event reaches the queue and ends DONE with 0 attempts. The
// log names the block and the unblock, with one ERROR for the outage and
// one "recovered" line.
func TestRelayBlockedConnection(t *testing.T) {
	b := startPrivateBroker(t)
	conn, err := amqp.Dial(b.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ex, q := "blocked-"+uniq(), "blocked-"+uniq()
	if err := ch.ExchangeDeclare(ex, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q, "#", ex, false, nil); err != nil {
		t.Fatal(err)
	}
	got := consumeAt(t, b.url, q)

	logger, logs := testsupport.NewLogger()
	r := newRelay(t, rabbitmq.Config{URL: b.url, Exchange: ex, ConfirmTimeout: 500 * time.Millisecond, Logger: logger,
		ReconnectDelay: 50 * time.Millisecond, ReconnectMaxDelay: 200 * time.Millisecond,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond, RetryAfter: 200 * time.Millisecond}})
	ob := relaytest.Outbox(t, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: outageWorkers},
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: 100 * time.Millisecond}}, r)

	pub := relaytest.StartPublisher(t, ob, 3*time.Millisecond)
	testsupport.WaitFor(t, 30*time.Second, "events in the queue before the alarm", func() bool { return got.count() >= 50 }, got.wake)

	b.ctl(t, "set_vm_memory_high_watermark", "absolute", "1")
	testsupport.WaitFor(t, 30*time.Second, "the block reported", func() bool { return logs.Count("level=WARN", "blocked the connection") > 0 })
	atBlock := pub.Count()
	testsupport.WaitFor(t, 30*time.Second, "events committed while blocked", func() bool { return pub.Count() >= atBlock+200 })
	inBlock := relaytest.Counts(t, ob)
	if inBlock[core.StatusDead] != 0 {
		t.Errorf("DEAD events while the broker blocked the connection: %v", inBlock)
	}

	b.ctl(t, "set_vm_memory_high_watermark", "0.4")
	testsupport.WaitFor(t, 30*time.Second, "the unblock reported", func() bool { return logs.Count("level=INFO", "unblocked the connection") > 0 })
	atUnblock := pub.Count()
	ids, _, dups := afterOutage(t, ob, got, pub, logs)
	if t.Failed() {
		t.Logf("log:\n%s", logs)
		return
	}
	t.Logf("%d events committed, %d while blocked (statuses then: %v), %d redelivered duplicates\n%s\n%s",
		len(ids), atUnblock-atBlock, inBlock, dups, logs.Lines("blocked the connection")[0], logs.Lines("unblocked the connection")[0])
}
