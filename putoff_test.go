package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/poller"
)

// An event put off with core.Unavailable comes back once its delay passed,
// not at the poller's next Interval (5 s by default; an hour here): it
// waited for the next poll, and an ordered key with it.
func TestPutOffEventComesBackWhenDue(t *testing.T) {
	db := sqliteDB(t, "putoff.db")
	ob, err := outbox.New(context.Background(), db, outbox.Config{Logger: quietLogger(),
		Poller: poller.Config{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	done := make(chan struct{})
	ob.RegisterFunc("E", func(context.Context, outbox.Envelope) error {
		if calls.Add(1) == 1 {
			return core.Unavailable(errors.New("broker down"), 100*time.Millisecond)
		}
		close(done)
		return nil
	})
	startUntilCleanup(t, ob)
	publish(t, ob, "E")
	testsupport.Recv(t, 20*time.Second, done, "the put-off event delivered again")
}
