package natsjs_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/relay"
	"github.com/outbox-go/outbox/relay/natsjs"
)

// natsServerBin is the nats-server binary the outage test runs privately.
func natsServerBin(t *testing.T) string {
	bin := os.Getenv("OUTBOX_TEST_NATS_SERVER")
	if bin == "" {
		bin = "/usr/sbin/nats-server"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nats-server binary %s: %v", bin, err)
		}
		t.Skipf("no nats-server binary at %s (set OUTBOX_TEST_NATS_SERVER): %v", bin, err)
	}
	return bin
}

// privateServer is a nats-server with JetStream of this test alone, on
// its own port and store directory, so it can be killed and restarted.
type privateServer struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	// conf, when set, is a configuration file the server also reads
	// (the command line's port and store directory take precedence).
	conf string
}

func startPrivateServer(t *testing.T) *privateServer { return startPrivateServerWith(t, "") }

// startPrivateServerWith is startPrivateServer with a configuration
// file's text (authorization, limits), "" for none.
func startPrivateServerWith(t *testing.T, conf string) *privateServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &privateServer{t: t, bin: natsServerBin(t), port: port, dir: t.TempDir()}
	if conf != "" {
		s.conf = filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *privateServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// connect connects to the server at url (the server's, or one with a
// user) with opts and returns its JetStream; the connection is closed in
// Cleanup.
func (s *privateServer) connect(url string, opts ...nats.Option) jetstream.JetStream {
	s.t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	return js
}

// start runs the server and returns once it accepts connections.
func (s *privateServer) start() {
	s.t.Helper()
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir}
	if s.conf != "" {
		args = append([]string{"-c", s.conf}, args...)
	}
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	testsupport.WaitFor(s.t, 30*time.Second, "the private nats-server to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), 100*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// signal sends sig to the server.
func (s *privateServer) signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// freeze stops the server with SIGSTOP and returns once it is stopped
// (its TCP connections stay up, nothing answers); signal SIGCONT resumes it.
func (s *privateServer) freeze() {
	s.t.Helper()
	if err := testsupport.Freeze(s.cmd.Process, 10*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// kill stops the server with SIGKILL, as a crash would.
func (s *privateServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// The key proof: a broker that dies and comes back loses nothing and
// charges no attempt. Events committed before, during and after the
// outage all end up in the stream once, every row DONE with 0 attempts,
// and the log has one ERROR for the outage and one "recovered" line.
func TestRelayOutage(t *testing.T) { testOutage(t, false) }

// A frozen broker (SIGSTOP: the TCP connection stays up, nothing answers)
// is an outage too, found by AckTimeout: nothing lost, no attempt charged.
func TestRelayOutageFrozenBroker(t *testing.T) { testOutage(t, true) }

func testOutage(t *testing.T, freeze bool) {
	srv := startPrivateServer(t)
	js := srv.connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectJitter(10*time.Millisecond, 10*time.Millisecond))
	// The server is private: the stream goes with its directory.
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUTAGE", Subjects: []string{"outage.>"},
		Storage: jetstream.FileStorage, Duplicates: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}

	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	r, err := natsjs.New(js, natsjs.Config{Subject: "outage.{type}", AckTimeout: time.Second, Logger: logger, Metrics: m,
		Breaker: relay.BreakerConfig{ProbeInterval: 100 * time.Millisecond, RetryAfter: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ob := relaytest.Outbox(t, outbox.Config{Logger: logger, Dispatcher: dispatcher.Config{Workers: 8},
		Poller: poller.Config{Interval: 50 * time.Millisecond, SkipRecent: 100 * time.Millisecond}}, r)

	// The publisher commits an event every few milliseconds until stopped.
	pub := relaytest.StartPublisher(t, ob, 3*time.Millisecond)

	inStream := func() int { n, _ := streamInfoCount(st); return n }
	testsupport.WaitFor(t, 30*time.Second, "events in the stream before the outage", func() bool { return inStream() >= 50 })

	if freeze {
		srv.freeze()
	} else {
		srv.kill()
	}
	atKill := pub.Count()
	outage := time.After(3 * time.Second) // how long the broker stays down, not a synchronization
	testsupport.WaitFor(t, 30*time.Second, "the outage reported", func() bool { return logs.Count("level=ERROR", "broker unreachable") > 0 })
	<-outage
	testsupport.WaitFor(t, 30*time.Second, "events committed during the outage", func() bool { return pub.Count() >= atKill+100 })

	atRestart := pub.Count()
	if freeze {
		srv.signal(syscall.SIGCONT)
	} else {
		srv.start()
	}
	testsupport.WaitFor(t, 60*time.Second, "the recovery reported", func() bool { return logs.Count("level=INFO", "broker recovered") > 0 })
	after := pub.Count() + 50
	testsupport.WaitFor(t, 30*time.Second, "events committed after the outage", func() bool { return pub.Count() >= after })
	ids := pub.Stop()
	testsupport.WaitFor(t, 90*time.Second, "every committed event in the stream and DONE", func() bool {
		return inStream() >= len(ids) && relaytest.Counts(t, ob)[core.StatusDone] == len(ids)
	})

	stored := map[string]int{}
	for _, m := range streamMsgs(t, st) {
		stored[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	for _, id := range ids {
		if stored[id] != 1 {
			t.Errorf("event %s is %d times in the stream, want once", id, stored[id])
		}
		rec, err := ob.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusDone || rec.Attempts != 0 {
			t.Errorf("event %s: %v with %d attempts, want DONE with 0", id, rec.Status, rec.Attempts)
		}
	}
	if len(stored) != len(ids) {
		t.Errorf("%d distinct ids in the stream, %d committed", len(stored), len(ids))
	}
	if c := relaytest.Counts(t, ob); c[core.StatusDead] != 0 || c[core.StatusRetry] != 0 {
		t.Errorf("statuses after the outage: %v", c)
	}
	// One incident, one ERROR and one "recovered" line: a publish sent
	// while frozen that times out just after another's ack ended the
	// outage begins no second one.
	if down, up := logs.Count("level=ERROR", "broker unreachable"), logs.Count("level=INFO", "broker recovered"); down != 1 || up != 1 {
		t.Errorf("%d ERROR lines and %d recovered lines, want 1 and 1", down, up)
	}
	if got, want := m.All(), []string{"up=true", "full=0", "up=false", "up=true"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q (one outage)", got, want)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
	t.Logf("%d events committed, %d while the broker was down\n%s\n%s", len(ids), atRestart-atKill,
		logs.Lines("broker unreachable")[0], logs.Lines("broker recovered")[0])
}

// streamInfoCount is the stream's message count, or an error while the
// server is down.
func streamInfoCount(st jetstream.Stream) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.State.Msgs), nil
}
