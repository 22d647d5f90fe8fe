package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// An inbox whose database answers, but slowly (here: a claim waiting for
// a table lock, well within StatusTimeout), holds up no other inbox of
// the dispatcher: the loop goes on with the others while that claim
// runs. Its claims held the loop, so a healthy inbox's messages waited
// for each slow claim in turn (here, all of them until the lock ended).
func TestASlowInboxHoldsUpNoOtherInbox(t *testing.T) {
	ctx := context.Background()
	healthy, err := inbox.New(ctx, openSQLite(t), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	slowDB := openMySQL(t)
	slow, err := inbox.New(ctx, slowDB, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := inbox.NewMultiDispatcher(inbox.DispatcherConfig{Workers: 4, StatusTimeout: time.Minute, Lease: time.Hour,
		PollInterval: 20 * time.Millisecond, Logger: (&testsupport.LogBuffer{}).Logger()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		handled = map[string]int{}
	)
	count := func(store string) int {
		mu.Lock()
		defer mu.Unlock()
		return handled[store]
	}
	if err := d.HandleFunc("t", func(ctx context.Context, _ inbox.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[inbox.StoreID(ctx)]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for id, in := range map[string]*inbox.Inbox{"healthy": healthy, "slow": slow} {
		if err := d.AddInbox(id, in); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(in *inbox.Inbox, id string) {
		t.Helper()
		if err := in.Enqueue(ctx, inbox.Message{Source: "s", MessageID: id, Topic: "t", Payload: []byte{}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = d.Close(cctx)
	})
	// The slow inbox's database answers at first.
	enqueue(slow, "before")
	testsupport.WaitFor(t, 20*time.Second, "the slow inbox's first message", func() bool { return count("slow") == 1 })

	// Then its table is locked: its claims wait (up to StatusTimeout).
	lock, err := slowDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "LOCK TABLES "+inbox.DefaultTable+" WRITE"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()
	var dbName string
	if err := slowDB.GetContext(ctx, &dbName, "SELECT DATABASE()"); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "a claim of the slow inbox waiting for the table lock", func() bool {
		var n int
		err := slowDB.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = ? AND STATE LIKE 'Waiting for table%' AND INFO LIKE '%FOR UPDATE%'`, dbName)
		return err == nil && n > 0
	})
	const n = 20
	for i := range n {
		enqueue(healthy, fmt.Sprintf("m-%d", i))
	}
	testsupport.WaitFor(t, 30*time.Second, "the healthy inbox's messages while the slow inbox's claim waits", func() bool {
		return count("healthy") == n
	})
	if got := count("slow"); got != 1 {
		t.Errorf("the slow inbox handled %d messages under the lock, want its first one only", got)
	}
	// Its claims go on once the lock ends.
	unlock()
	enqueue(slow, "after")
	testsupport.WaitFor(t, 30*time.Second, "the slow inbox's message after the lock", func() bool { return count("slow") == 2 })
}
