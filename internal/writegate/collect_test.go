package writegate_test

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/internal/writegate"
)

// nopDriver opens no connection: the pools of the test are never used.
type nopDriver struct{}

func (nopDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no connection") }

func init() { sql.Register("writegate_test_nop", nopDriver{}) }

// The gate of a pool goes once the pool is collected: every SQLite pool a
// store was made on (a tenant database that left the set, say) stayed in
// memory for good, held by its gate's entry.
func TestGateOfACollectedPoolGoes(t *testing.T) {
	before := writegate.Pools()
	var last *sql.DB
	for range 50 {
		db, err := sql.Open("writegate_test_nop", "")
		if err != nil {
			t.Fatal(err)
		}
		if g := writegate.For(db); writegate.For(db) != g || writegate.Of(db) != g {
			t.Fatal("For and Of give a pool different gates")
		}
		_ = db.Close()
		last = db
	}
	if n := writegate.Pools(); n < before+1 {
		t.Fatalf("%d pools with a gate after 50 were made, want more than %d", n, before)
	}
	runtime.KeepAlive(last)
	testsupport.WaitFor(t, 20*time.Second, "the gates of the collected pools to go", func() bool {
		runtime.GC()
		return writegate.Pools() <= before
	})
}
