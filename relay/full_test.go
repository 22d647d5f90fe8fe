package relay_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/relaytest"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/relay"
)

// A full destination's incident: every refusal returns a core.Unavailable
// error after RetryAfter, one ERROR when it begins, the destination named
// once per key, and one INFO, counting the events put off, once every
// key refused meanwhile was accepted; another destination has its own
// incident, and an accepted key never refused changes nothing.
func TestFull(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	clock := testsupport.NewClock(testsupport.Epoch)
	f := relaytest.Full(t, relay.FullConfig{Name: "b", What: "queue full", RetryAfter: 3 * time.Second, Logger: logger, Now: clock.Now})
	asked := map[string]int{}
	dest := func(name, key string) func() string {
		return func() string { asked[key]++; return name }
	}
	cause := errors.New("nacked")
	refuse := func(key, name string) {
		t.Helper()
		err := f.Refused(key, cause, dest(name, key))
		var ue *core.UnavailableError
		if !errors.As(err, &ue) || ue.After != 3*time.Second || !errors.Is(err, cause) {
			t.Fatalf("Refused(%s) = %v, want a core.Unavailable error after 3s wrapping the cause", key, err)
		}
	}

	refuse("q1/a", "q1")
	refuse("q1/a", "q1")
	refuse("q1/b", "q1")
	refuse("q2/a", "q2")
	if asked["q1/a"] != 1 || asked["q1/b"] != 1 || asked["q2/a"] != 1 {
		t.Errorf("destination asked %v, want once per key", asked)
	}
	if n, q1, q2 := logs.Count("level=ERROR"), logs.Count("level=ERROR", "queue full", "destination=q1", "key=q1/a"),
		logs.Count("level=ERROR", "destination=q2"); n != 2 || q1 != 1 || q2 != 1 {
		t.Fatalf("ERROR lines: want one per destination, naming it and its first key:\n%s", logs)
	}

	f.Accepted("never-refused")
	f.Accepted("q1/a")
	if n := logs.Count("level=INFO"); n != 0 {
		t.Fatalf("an INFO line while q1/b waits:\n%s", logs)
	}
	clock.Advance(90 * time.Second)
	f.Accepted("q1/b")
	f.Accepted("q1/b") // no incident any more: nothing
	if n := logs.Count("level=INFO", "full destination takes messages again", "destination=q1", "full=1m30s", "put_offs=3"); n != 1 ||
		logs.Count("level=INFO") != 1 {
		t.Fatalf("want one INFO line for q1 (full 1m30s, 3 put off):\n%s", logs)
	}
	refuse("q1/a", "q1") // a new incident
	if n := logs.Count("level=ERROR", "destination=q1"); n != 2 {
		t.Errorf("%d ERROR lines for q1, want 2 (two incidents):\n%s", n, logs)
	}
	f.Accepted("q2/a")
	if n := logs.Count("level=INFO", "destination=q2", "put_offs=1"); n != 1 {
		t.Errorf("want the INFO line of q2:\n%s", logs)
	}
}

// Beyond MaxFullKeys refused keys, events are still put off but their
// keys are not remembered: the incident ends with the remembered ones.
func TestFullBounded(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	f := relaytest.Full(t, relay.FullConfig{Logger: logger})
	named := 0
	for i := range relay.MaxFullKeys + 10 {
		if err := f.Refused(fmt.Sprint(i), errors.New("full"), func() string { named++; return "q" }); err == nil {
			t.Fatal("Refused returned nil")
		}
	}
	if named != relay.MaxFullKeys+10 {
		t.Errorf("destination named %d times, want once per key (%d)", named, relay.MaxFullKeys+10)
	}
	for i := range relay.MaxFullKeys {
		f.Accepted(fmt.Sprint(i))
	}
	if n := logs.Count("level=INFO", "destination=q", fmt.Sprintf("put_offs=%d", relay.MaxFullKeys+10)); n != 1 {
		t.Fatalf("want the incident ended once the remembered keys were accepted:\n%s", logs)
	}
	if n := logs.Count("level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
	}
}

// Naming a destination (a call to the broker's API) holds up no other
// refusal: neither another key's nor the same key's, whose put-offs meanwhile
// still count.
func TestFullNamingDoesNotBlock(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	f := relaytest.Full(t, relay.FullConfig{Logger: logger})
	asking, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- f.Refused("a", errors.New("full"), func() string { close(asking); <-release; return "q" })
	}()
	<-asking
	for _, key := range []string{"a", "a", "b"} {
		returned := make(chan error, 1)
		go func() { returned <- f.Refused(key, errors.New("full"), func() string { return "q" }) }()
		select {
		case err := <-returned:
			if err == nil {
				t.Fatalf("Refused(%s) returned nil", key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Refused(%s) waited for another key's destination to be named", key)
		}
	}
	close(release)
	if err := <-done; err == nil {
		t.Fatal("Refused(a) returned nil")
	}
	f.Accepted("a")
	f.Accepted("b")
	if n := logs.Count("level=INFO", "destination=q", "put_offs=4"); n != 1 {
		t.Fatalf("want one INFO line counting the 4 events put off:\n%s", logs)
	}
}

// Once MaxFullKeys keys are remembered, another destination's refusals
// still make one incident (one ERROR however often its events are
// refused, counted among the full destinations), which ends once none of
// its events was refused for Forget.
func TestFullBoundedOtherDestination(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	f := relaytest.Full(t, relay.FullConfig{Logger: logger, Metrics: m, Forget: 100 * time.Millisecond})
	for i := range relay.MaxFullKeys {
		_ = f.Refused(fmt.Sprint(i), errors.New("full"), func() string { return "q1" })
	}
	for range 5 {
		_ = f.Refused("other", errors.New("full"), func() string { return "q2" })
	}
	if n := logs.Count("level=ERROR", "destination=q2"); n != 1 {
		t.Errorf("%d ERROR lines for q2 refused 5 times, want 1", n)
	}
	if all := m.All(); all[len(all)-1] != "full=2" {
		t.Errorf("metrics %q, want 2 destinations full", all)
	}
	testsupport.WaitFor(t, 10*time.Second, "both incidents forgotten", func() bool {
		return logs.Count("level=INFO", "incident is over") == 2
	})
	if all := m.All(); all[len(all)-1] != "full=0" {
		t.Errorf("metrics %q, want no destination full at the end", all)
	}
}

// A refused key neither refused nor accepted again for Forget (its event
// delivered by another node) ends its destination's incident: the metric
// and the alert on it do not stay on for ever. A key refused again meanwhile
// keeps it. (The clock the keys' ages are read on is the test's; the
// sweeps run on the real one, every Forget/2.)
func TestFullForget(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	m := &relaytest.Metrics{}
	const forget = 50 * time.Millisecond
	clock := testsupport.NewClock(testsupport.Epoch)
	at := func(d time.Duration) { clock.Set(testsupport.Epoch.Add(d)) }
	f := relaytest.Full(t, relay.FullConfig{Logger: logger, Metrics: m, Forget: forget, Now: clock.Now})
	q := func() string { return "q" }
	_ = f.Refused("gone", errors.New("full"), q)
	_ = f.Refused("again", errors.New("full"), q)
	at(forget - time.Millisecond)
	_ = f.Refused("again", errors.New("full"), q)
	// "gone" is past Forget, "again" is not: sweeps in that time end
	// nothing.
	at(forget + time.Millisecond)
	sweeps := time.Now()
	for time.Since(sweeps) < 4*forget {
		if logs.Count("incident is over") != 0 {
			t.Fatalf("the incident ended while a key was still refused:\n%s", logs)
		}
		time.Sleep(forget / 10)
	}
	at(2*forget + time.Millisecond)
	testsupport.WaitFor(t, 10*time.Second, "the incident forgotten", func() bool {
		return logs.Count("level=INFO", "incident is over", "destination=q") == 1
	})
	if got, want := m.All(), []string{"full=0", "full=1", "full=0"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q", got, want)
	}
	// A new incident begins at the next refusal.
	_ = f.Refused("gone", errors.New("full"), q)
	if n := logs.Count("level=ERROR"); n != 2 {
		t.Errorf("%d ERROR lines, want 2 (two incidents):\n%s", n, logs)
	}
	f.Accepted("gone")
	if n := logs.Count("level=INFO", "takes messages again"); n != 1 {
		t.Errorf("want the second incident ended by its acceptance:\n%s", logs)
	}
}

// Allow lets one event of a refused key through per ProbeInterval and puts
// the others off without a publish (the error wrapping the key's last
// refusal); a key never refused, or accepted since, is always let
// through. An event that comes by keeps its key remembered, also when
// something else (a broker outage) then puts it off, so Forget does not
// end an incident whose events are still waiting.
func TestFullAllow(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	clock := testsupport.NewClock(testsupport.Epoch)
	// The key's age between two of its events stays under Forget: the
	// sweeps, which run on the real clock, may come at any moment.
	const probe, forget = 40 * time.Millisecond, 50 * time.Millisecond
	f := relaytest.Full(t, relay.FullConfig{Logger: logger, ProbeInterval: probe, Forget: forget, Now: clock.Now})
	if err := f.Allow("k"); err != nil {
		t.Fatalf("Allow before any refusal: %v", err)
	}
	cause := errors.New("nacked")
	_ = f.Refused("k", cause, func() string { return "q" })
	for i := range 3 {
		err := f.Allow("k")
		var ue *core.UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, cause) {
			t.Fatalf("Allow %d within the probe interval: %v, want a core.Unavailable error wrapping the refusal", i, err)
		}
		clock.Advance(probe / 4)
	}
	if err := f.Allow("other"); err != nil {
		t.Fatalf("Allow of a key never refused: %v", err)
	}
	clock.Advance(probe / 4) // the probe interval since the refusal
	if err := f.Allow("k"); err != nil {
		t.Fatalf("the probe: %v", err)
	}
	if err := f.Allow("k"); err == nil {
		t.Fatal("a second event let through in the same probe interval")
	}
	// Events keep coming by, put off (by the gate, or after it by an
	// outage): the sweeps, on the real clock, forget nothing while the
	// test's clock moves less than Forget between them.
	sweeps := time.Now()
	for time.Since(sweeps) < 4*forget {
		clock.Advance(time.Millisecond)
		_ = f.Allow("k")
		time.Sleep(forget / 10)
	}
	if n := logs.Count("incident is over"); n != 0 {
		t.Fatalf("the incident was forgotten while its events kept coming:\n%s", logs)
	}
	f.Accepted("k")
	if err := f.Allow("k"); err != nil {
		t.Fatalf("Allow after the key was accepted: %v", err)
	}
	if n := logs.Count("level=INFO", "takes messages again"); n != 1 {
		t.Errorf("want one INFO line:\n%s", logs)
	}
}

// A negative duration is refused, naming the fields.
func TestNewFullInvalid(t *testing.T) {
	for _, cfg := range []relay.FullConfig{{RetryAfter: -1}, {ProbeInterval: -1}, {Forget: -1}} {
		if _, err := relay.NewFull(cfg); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Forget") {
			t.Errorf("NewFull(%+v) = %v, want ErrInvalidConfig naming the durations", cfg, err)
		}
	}
	// A logger without a handler (the zero slog.Logger) panicked at its
	// first line.
	if _, err := relay.NewFull(relay.FullConfig{Logger: new(slog.Logger)}); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Logger") {
		t.Errorf("NewFull with a zero Logger = %v, want ErrInvalidConfig naming Logger", err)
	}
}

// The answer to a publish that started before the key's last refusal ends
// nothing: the publish was under way when the queue filled (confirmed on
// another channel), so it says nothing about room now. Taken as proof,
// it ended the incident at once, and the next refusal began another: one
// queue that stayed full logged ERROR, INFO, ERROR.
func TestFullAcceptedSince(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	f := relaytest.Full(t, relay.FullConfig{Name: "b", What: "queue full", Logger: logger})
	before := f.Mark() // a publish starts
	_ = f.Refused("q/a", errors.New("nacked"), func() string { return "q" })
	f.AcceptedSince("q/a", before) // its ack comes after the nack
	if n := logs.Count("level=INFO"); n != 0 {
		t.Fatalf("the ack of a publish older than the refusal ended the incident:\n%s", logs)
	}
	after := f.Mark() // a publish (the probe) starts after the refusal
	f.AcceptedSince("q/a", after)
	if n := logs.Count("level=INFO", "full destination takes messages again", "destination=q"); n != 1 {
		t.Fatalf("the ack of a publish started after the refusal did not end the incident:\n%s", logs)
	}
}

// Retire stops the timer that forgets incidents: a closed relay logs no
// incident's end afterwards (one did, Forget after Close, keeping the
// relay reachable until then), and refusals after Retire arm no timer.
func TestFullRetireStopsForgetting(t *testing.T) {
	logger, logs := testsupport.NewLogger()
	f := relaytest.Full(t, relay.FullConfig{Logger: logger, Forget: time.Hour})
	_ = f.Refused("k", errors.New("full"), func() string { return "q" })
	if !relay.SweepArmed(f) {
		t.Fatal("no sweep armed for an incident")
	}
	f.Retire()
	if relay.SweepArmed(f) {
		t.Error("the sweep is still armed after Retire")
	}
	_ = f.Refused("k2", errors.New("full"), func() string { return "q2" })
	if relay.SweepArmed(f) {
		t.Error("a refusal after Retire armed the sweep")
	}
	if n := logs.Count("its incident is over"); n != 0 {
		t.Errorf("%d incidents ended after Retire, want none:\n%s", n, logs)
	}
}
