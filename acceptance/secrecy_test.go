package acceptance

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/handoff"
	"github.com/outbox-go/outbox/internal/parts"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// Payloads and header values never reach the logs: events carrying a
// unique secret in their payload and in a header value go through every
// path that logs about an event, with every component logging at Debug
// level, and the secret appears in no log line, in no form (plain, hex,
// base64). Listener errors and panic values are the application's own
// text and may be logged; here they hold no secret. Each case also checks
// that its path really logged, so the absence of the secret means
// something.
func TestSecretsNeverLoggedSQLite(t *testing.T) { testSecretsNeverLogged(t, sqliteHarness) }

// See TestSecretsNeverLoggedSQLite.
func TestSecretsNeverLoggedMySQL(t *testing.T) { testSecretsNeverLogged(t, mysqlHarness) }

// See TestSecretsNeverLoggedSQLite.
func TestSecretsNeverLoggedPostgres(t *testing.T) { testSecretsNeverLogged(t, postgresHarness) }

// secrecyCase is one logging path: run drives it, expect are messages (or
// parts of them) its logs must contain.
type secrecyCase struct {
	name   string
	expect []string
	run    func(t *testing.T, s *secrecyRun)
}

// secrecyRun is the state of one case.
type secrecyRun struct {
	h      Harness
	secret string
	logs   *testsupport.LogBuffer
}

func testSecretsNeverLogged(t *testing.T, h Harness) {
	secret := newSecret(t)
	checkSecretDetector(t, secret)
	cases := []secrecyCase{
		{"ListenerErrorRetryThenDead", []string{"delivery failed; will retry", "event is DEAD"}, secretRetryDead},
		{"ListenerPanic", []string{"listener panicked", "delivery failed; will retry", "event is DEAD"}, secretPanic},
		{"ListenerHung", []string{"listener ignored its context", "delivery failed; will retry"}, secretHung},
		{"HotQueueDrop", []string{"hot queue full"}, secretHotDrop},
		{"StatusWriteFailed_Done", []string{"status write failed"}, func(t *testing.T, s *secrecyRun) { secretStatusFailure(t, s, false) }},
		{"StatusWriteFailed_Retry", []string{"status write failed"}, func(t *testing.T, s *secrecyRun) { secretStatusFailure(t, s, true) }},
		{"FencedWrite_Done", []string{"status write fenced off"}, func(t *testing.T, s *secrecyRun) { secretFenced(t, s, false) }},
		{"FencedWrite_Retry", []string{"status write fenced off"}, func(t *testing.T, s *secrecyRun) { secretFenced(t, s, true) }},
		{"UndecodableRowMarkedDead", []string{"undecodable event marked DEAD"}, secretUndecodable},
		{"ShutdownInterruption", []string{"delivery interrupted by shutdown"}, secretShutdown},
		{"StaleLeaseAndNoListener", []string{"event waited too long for its lease", "no listener registered"}, secretStaleNoListener},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &secrecyRun{h: h, secret: secret, logs: &testsupport.LogBuffer{}}
			// Registered first, so it runs last: after the outbox is
			// closed, with the shutdown logs in.
			t.Cleanup(func() {
				if t.Skipped() { // no database for this run: nothing was logged
					return
				}
				out := s.logs.String()
				if form, ok := containsSecret(out, secret); ok {
					t.Errorf("the secret reached the logs (as %q):\n%s", form, out)
				}
				for _, want := range c.expect {
					if s.logs.Count(want) == 0 {
						t.Errorf("path not exercised: no log line %q in:\n%s", want, out)
					}
				}
			})
			c.run(t, s)
		})
	}
}

// fixture builds an outbox logging into s.logs at Debug level.
func (s *secrecyRun) fixture(t *testing.T, tweak func(*outbox.Config)) *fixture {
	t.Helper()
	return newFixture(t, s.h, true, func(c *outbox.Config) {
		c.Logger = s.logs.Logger()
		if tweak != nil {
			tweak(c)
		}
	})
}

// event returns an event whose JSON payload and "authorization" header
// value hold the secret; bytes gives it a bytes payload instead.
func (s *secrecyRun) event(t *testing.T, eventType string, bytes bool) core.Envelope {
	t.Helper()
	b := core.NewEvent(eventType).AggregateType("Card").AggregateID("card-1").
		Header("authorization", "Bearer "+s.secret).Header("trace-id", "trace-1")
	if bytes {
		b = b.PayloadBytes([]byte("\x00\x01pan=" + s.secret + "\xff"))
	} else {
		b = b.PayloadJSONString(`{"pan":"` + s.secret + `","note":"n"}`)
	}
	return mustEvent(t, b)
}

// waitLog waits until a log line holds every one of subs.
func (s *secrecyRun) waitLog(t *testing.T, subs ...string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a log line %q", subs), func() bool { return s.logs.Count(subs...) > 0 })
}

// errDownstream is a listener's own error text: free of the secret.
var errDownstream = errors.New("downstream refused the request")

func secretRetryDead(t *testing.T, s *secrecyRun) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.MaxAttempts = 2
		c.Dispatcher.Retry = fixedRetry(10 * time.Millisecond)
		c.DisablePoller = true
	})
	f.ob.RegisterFunc("Charge", func(context.Context, core.Envelope) error { return errDownstream })
	envs := []core.Envelope{s.event(t, "Charge", false), s.event(t, "Charge", true)}
	if err := f.publish(t, nil, envs...); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		f.waitStatus(t, e.ID(), core.StatusDead)
	}
	s.waitLog(t, "event is DEAD") // logged once the row is DEAD
}

func secretPanic(t *testing.T, s *secrecyRun) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.MaxAttempts = 2
		c.Dispatcher.Retry = fixedRetry(10 * time.Millisecond)
		c.DisablePoller = true
	})
	f.ob.RegisterFunc("Charge", func(context.Context, core.Envelope) error { panic(errors.New("card declined")) })
	env := s.event(t, "Charge", false)
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, env.ID(), core.StatusDead)
	s.waitLog(t, "event is DEAD") // logged once the row is DEAD
}

func secretHung(t *testing.T, s *secrecyRun) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.ListenerTimeout = 50 * time.Millisecond
		c.Dispatcher.ListenerGrace = 50 * time.Millisecond
		c.Dispatcher.Retry = fixedRetry(time.Hour)
		c.DisablePoller = true
	})
	release := make(chan struct{})
	// Runs before the outbox is closed: Close waits for the stuck
	// listener's goroutine.
	t.Cleanup(func() { close(release) })
	f.ob.RegisterFunc("Charge", func(context.Context, core.Envelope) error { <-release; return nil })
	env := s.event(t, "Charge", false)
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, env.ID(), core.StatusRetry)
}

// gatedListener registers a listener for eventType that reports each call
// on entered and waits for gate before returning result.
func gatedListener(f *fixture, eventType string, result error) (entered chan string, gate chan struct{}) {
	entered, gate = make(chan string, 16), make(chan struct{})
	f.ob.RegisterFunc(eventType, func(_ context.Context, e core.Envelope) error {
		entered <- e.ID()
		<-gate
		return result
	})
	return entered, gate
}

func secretHotDrop(t *testing.T, s *secrecyRun) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.Workers = 1
		c.Dispatcher.HotCapacity = 1
		c.Poller.SkipRecent = -1
	})
	entered, gate := gatedListener(f, "Charge", nil)
	first := s.event(t, "Charge", false)
	if err := f.publish(t, nil, first); err != nil {
		t.Fatal(err)
	}
	<-entered
	rest := []core.Envelope{s.event(t, "Charge", false), s.event(t, "Charge", true)}
	if err := f.publish(t, nil, rest...); err != nil {
		t.Fatal(err)
	}
	if f.metrics.Dropped.Load() == 0 {
		t.Fatal("no event dropped by the full hot queue")
	}
	close(gate)
	all := append([]core.Envelope{first}, rest...)
	waitFor(t, "the poller to deliver the dropped event", func() bool {
		if _, err := parts.Outbox(f.ob).Poller.PollOnce(context.Background()); err != nil {
			t.Fatalf("PollOnce: %v", err)
		}
		for _, e := range all {
			if f.status(t, e.ID()).Status != core.StatusDone {
				return false
			}
		}
		return true
	})
}

// renameTable renames the outbox table (ALTER TABLE … RENAME TO works on
// both databases); the store's statements then fail.
func renameTable(t *testing.T, f *fixture, from, to string) {
	t.Helper()
	if _, err := f.db.ExecContext(context.Background(), "ALTER TABLE "+from+" RENAME TO "+to); err != nil {
		t.Fatalf("rename %s to %s: %v", from, to, err)
	}
}

// secretStatusFailure makes the status write after the listener fail: the
// table is renamed away while the listener runs.
func secretStatusFailure(t *testing.T, s *secrecyRun, failListener bool) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.Workers = 1
		c.Dispatcher.Retry = fixedRetry(time.Hour)
		c.DisablePoller = true
	})
	var result error
	if failListener {
		result = errDownstream
	}
	entered, gate := gatedListener(f, "Charge", result)
	env := s.event(t, "Charge", false)
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	<-entered
	renameTable(t, f, "outbox_event", "outbox_event_away")
	close(gate)
	s.waitLog(t, "level=ERROR", "status write failed")
	renameTable(t, f, "outbox_event_away", "outbox_event")
	if st := f.status(t, env.ID()).Status; st != core.StatusNew {
		t.Errorf("status %v after the failed write, want NEW (left for the poller)", st)
	}
}

// secretFenced lets another node take the lease while the listener runs:
// the status write is fenced off.
func secretFenced(t *testing.T, s *secrecyRun, failListener bool) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.Workers = 1
		c.Dispatcher.Retry = fixedRetry(time.Hour)
		c.DisablePoller = true
	})
	var result error
	if failListener {
		result = errDownstream
	}
	entered, gate := gatedListener(f, "Charge", result)
	env := s.event(t, "Charge", false)
	if err := f.publish(t, nil, env); err != nil {
		t.Fatal(err)
	}
	<-entered
	if _, err := f.db.ExecContext(context.Background(), f.db.Rebind(`UPDATE outbox_event SET locked_by = 'other-node' WHERE event_id = ?`), env.ID()); err != nil {
		t.Fatal(err)
	}
	close(gate)
	s.waitLog(t, "level=WARN", "status write fenced off")
	if rec := f.status(t, env.ID()); rec.Status != core.StatusNew || rec.LockedBy != "other-node" {
		t.Errorf("fenced row: status %v, locked_by %q; want NEW, other-node", rec.Status, rec.LockedBy)
	}
}

// secretUndecodable stores rows whose headers or payload cannot be decoded,
// with the secret inside the corrupt columns, and lets the poller mark them
// DEAD. The reason it stores (last_error) holds no secret either.
func secretUndecodable(t *testing.T, s *secrecyRun) {
	f := s.fixture(t, func(c *outbox.Config) { c.Poller.SkipRecent = -1 })
	ctx := context.Background()
	type corruption struct {
		set  string
		args []any
	}
	// Valid JSON of the wrong shape: MariaDB's JSON and PostgreSQL's
	// jsonb columns accept it, as SQLite's text does.
	corruptions := []corruption{
		{"headers = ?", []any{`{"authorization":{"bearer":"` + s.secret + `"}}`}},
		{"headers = ?", []any{`{"authorization":["Bearer ` + s.secret + `"]}`}},
		{"headers = ?", []any{`"authorization: Bearer ` + s.secret + `"`}}, // a string, not an object
	}
	if s.h.Name == "sqlite" {
		corruptions = append(corruptions,
			corruption{"headers = ?", []any{`{"authorization":"Bearer ` + s.secret + `"`}}, // truncated
			corruption{"payload = ?", []any{[]byte(`{"pan":"` + s.secret + `"`)}},          // invalid JSON
		)
	} else {
		// The JSON column refuses invalid JSON; a bytes payload must be a
		// JSON string of base64, and these are valid JSON that is not.
		corruptions = append(corruptions,
			corruption{"payload_kind = 1, payload = ?", []any{`{"pan":"` + s.secret + `"}`}},
			corruption{"payload_kind = 1, payload = ?", []any{`"` + s.secret + `"`}},
			corruption{"payload_kind = 1, payload = ?", []any{`["` + s.secret + `"]`}},
		)
	}
	// Each row is inserted and corrupted in one transaction: the poller
	// never sees it intact (on a database that announces commits it may
	// run by itself, woken by a notification).
	var ids []string
	for _, c := range corruptions {
		env := s.event(t, "Charge", false)
		tx, err := f.db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := parts.Outbox(f.ob).Store.Insert(ctx, tx, env, core.Lease{}); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, tx.Rebind("UPDATE outbox_event SET "+c.set+" WHERE event_id = ?"), append(c.args, env.ID())...); err != nil {
			_ = tx.Rollback()
			t.Fatalf("corrupt %s: %v", c.set, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, env.ID())
	}
	// On a database that announces commits the poller may also run by
	// itself (woken by a notification) and mark some of them.
	waitFor(t, "the poller to mark every corrupt row DEAD", func() bool {
		if _, err := parts.Outbox(f.ob).Poller.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if f.status(t, id).Status != core.StatusDead {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		rec := f.status(t, id)
		if rec.LastError == "" {
			t.Errorf("row %s: DEAD without a reason", id)
		}
		if form, ok := containsSecret(rec.LastError, s.secret); ok {
			t.Errorf("row %s: the DEAD reason holds the secret (as %q): %q", id, form, rec.LastError)
		}
	}
}

// secretShutdown closes the outbox while a listener runs and another event
// waits in the queue: the listener's ctx ends, the delivery is recorded as
// interrupted.
func secretShutdown(t *testing.T, s *secrecyRun) {
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.Workers = 1
		c.DisablePoller = true
	})
	entered := make(chan struct{}, 4)
	f.ob.RegisterFunc("Charge", func(ctx context.Context, _ core.Envelope) error {
		entered <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("gave up: %w", ctx.Err())
	})
	first := s.event(t, "Charge", false)
	if err := f.publish(t, nil, first); err != nil {
		t.Fatal(err)
	}
	<-entered
	if err := f.publish(t, nil, s.event(t, "Charge", true)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.ob.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a listener running = %v, want its deadline", err)
	}
	s.waitLog(t, "delivery interrupted by shutdown")
	if st := f.status(t, first.ID()).Status; st != core.StatusNew {
		t.Errorf("interrupted event status %v, want NEW", st)
	}
}

// offsetClock is time.Now moved forward by a settable offset.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// secretStaleNoListener queues an event until its lease is nearly over
// (the clock jumps), so it is left for a new claim, then
// publishes an event no listener is registered for.
func secretStaleNoListener(t *testing.T, s *secrecyRun) {
	clock := &offsetClock{}
	f := s.fixture(t, func(c *outbox.Config) {
		c.Dispatcher.Workers = 1
		c.Now = clock.Now
		c.DisablePoller = true
	})
	entered, gate := gatedListener(f, "Gated", nil)
	first := s.event(t, "Gated", false)
	if err := f.publish(t, nil, first); err != nil {
		t.Fatal(err)
	}
	<-entered
	stale := s.event(t, "Charge", false)
	if err := f.publish(t, nil, stale); err != nil {
		t.Fatal(err)
	}
	clock.offset.Store(int64(time.Until(handoff.Of(parts.Outbox(f.ob).Dispatcher, "").HotLease(stale).Until)))
	close(gate)
	s.waitLog(t, "level=WARN", "event waited too long for its lease")
	unlistened := s.event(t, "Unlistened", true)
	if err := f.publish(t, nil, unlistened); err != nil {
		t.Fatal(err)
	}
	f.waitStatus(t, unlistened.ID(), core.StatusDone)
	if st := f.status(t, stale.ID()).Status; st != core.StatusNew {
		t.Errorf("stale event status %v, want NEW (left for a new claim)", st)
	}
}

// newSecret returns a marker unique to this run.
func newSecret(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "S3CR3T-" + hex.EncodeToString(b[:])
}

// containsSecret reports whether s holds secret as plain text, as hex, or
// inside a base64 encoding (at any alignment), and in which form.
func containsSecret(s, secret string) (string, bool) {
	for _, form := range secretForms(secret) {
		if strings.Contains(s, form) {
			return form, true
		}
	}
	return "", false
}

// secretForms are substrings that any plain, hex or standard/URL base64
// rendering of a byte stream holding secret must contain.
func secretForms(secret string) []string {
	forms := []string{secret, hex.EncodeToString([]byte(secret)), strings.ToUpper(hex.EncodeToString([]byte(secret)))}
	// In base64 the secret starts at one of three offsets within a 3-byte
	// group; the groups lying wholly inside it encode the same whatever
	// surrounds it.
	for skip := range 3 {
		inner := []byte(secret[skip:])
		inner = inner[:len(inner)/3*3]
		forms = append(forms, base64.StdEncoding.EncodeToString(inner), base64.URLEncoding.EncodeToString(inner))
	}
	return forms
}

// checkSecretDetector makes sure the detector finds the secret in the
// encodings a careless log line would use.
func checkSecretDetector(t *testing.T, secret string) {
	for prefix := range 3 {
		payload := []byte(strings.Repeat("x", prefix) + `{"pan":"` + secret + `"}`)
		for _, enc := range []string{string(payload), hex.EncodeToString(payload), base64.StdEncoding.EncodeToString(payload), fmt.Sprintf("%q", payload)} {
			if _, ok := containsSecret("msg=x payload="+enc, secret); !ok {
				t.Fatalf("secret detector misses %q", enc)
			}
		}
	}
}
