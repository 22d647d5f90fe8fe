package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// On SQLite, a Close whose ctx ended while a DONE write waits for the
// write lock (an application transaction holds it) returns about one
// StatusTimeout after ctx: the DONE flush and the lease release share it.
// The release used to wait for the DONE write (10 s of SQLite's busy
// wait), then wait 10 s more itself, and a second release followed: Close
// returned up to four StatusTimeouts late.
func TestCloseBoundOnSQLiteWithTheWriteLockHeld(t *testing.T) {
	ctx := context.Background()
	db := sqliteDB(t, "bound.db")
	const statusTimeout = 2 * time.Second
	ob, err := outbox.New(ctx, db, outbox.Config{Logger: quietLogger(),
		Dispatcher: dispatcher.Config{StatusTimeout: statusTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	started, block := make(chan struct{}), make(chan struct{})
	ob.RegisterFunc("E", func(context.Context, outbox.Envelope) error { close(started); <-block; return nil })
	if err := ob.Start(ctx); err != nil {
		t.Fatal(err)
	}
	publish(t, ob, "E")
	testsupport.Recv(t, 20*time.Second, started, "the listener to start")
	if _, err := db.Exec("CREATE TABLE w (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()                                            //nolint:errcheck
	if _, err := tx.Exec("INSERT INTO w VALUES (1)"); err != nil { // holds SQLite's write lock
		t.Fatal(err)
	}
	close(block) // the listener succeeds: its DONE write waits for the lock
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = ob.Close(cctx)
	deadline, _ := cctx.Deadline()
	late := time.Since(deadline)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want its ctx's error", err)
	}
	// A bound, not a speed: the old code took 4 × StatusTimeout or more.
	if late > statusTimeout+1500*time.Millisecond {
		t.Errorf("Close returned %v after its ctx ended, want about StatusTimeout (%v)", late.Round(time.Millisecond), statusTimeout)
	}
}
