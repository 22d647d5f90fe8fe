package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/internal/testsupport"
)

// After a network fault the pool may lend a dead connection whose reset
// ping hangs (until the kernel gives up on it, minutes later): reading
// the settings for a new listening connection then hangs. The listener
// gives that read listenPingTimeout, then connects with the settings it
// read last, and listens again: it hung, and no notification woke a
// poller until the fault cleared.
func TestListenerReconnectsWhenReadingTheSettingsHangs(t *testing.T) {
	base := os.Getenv("OUTBOX_TEST_POSTGRES_DSN")
	if base == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("CI=true but OUTBOX_TEST_POSTGRES_DSN is not set")
		}
		t.Skip("set OUTBOX_TEST_POSTGRES_DSN to run (this test cannot use internal/testdb, which imports this package)")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	app := "outbox-listen-" + hex.EncodeToString(rnd[:])
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	db, err := sqlx.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin, err := sqlx.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var reads atomic.Int32
	settings := &listenSettings{read: func(ctx context.Context) (*pgx.ConnConfig, error) {
		if reads.Add(1) == 1 {
			return connConfig(ctx, db)
		}
		<-ctx.Done() // a dead pooled connection's reset ping
		return nil, ctx.Err()
	}}
	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	logger, logs := testsupport.NewLogger()
	go func() {
		defer close(done)
		listen(ctx, settings, "outbox_listen_"+hex.EncodeToString(rnd[:]), logger, func() { wakes <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()
	testsupport.Recv(t, 30*time.Second, wakes, "the first listening")

	var killed int
	if err := admin.GetContext(t.Context(), &killed, `SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN %') k`, app); err != nil || killed != 1 {
		t.Fatalf("terminated %d listener backends, %v; want 1", killed, err)
	}
	testsupport.Recv(t, 30*time.Second, wakes, "listening again on the settings read last")
	if reads.Load() < 2 {
		t.Errorf("%d reads of the settings, want a second one (that hung)", reads.Load())
	}
	testsupport.WaitFor(t, 10*time.Second, "the recovery line", func() bool { return logs.Count("notification listener recovered") == 1 })
}
