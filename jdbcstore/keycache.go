package jdbcstore

import (
	"strings"
	"sync"

	"github.com/outbox-go/outbox/core"
)

// stalePosition is the message of the SQLite schema's trigger that refuses
// an ordered event at or below an existing position of its key.
const stalePosition = "outbox: stale order position"

// keyCacheMax bounds each map of a keyCache; when one is full both are
// cleared (the store then reads the keys' last events again).
const keyCacheMax = 1 << 16

// keyCache remembers the last position this store committed on each
// ordering key and whether that event was marked DONE here, so an ordered
// publish whose key's last event is known finished needs no check of it.
// With a keys table (MySQL/MariaDB, PostgreSQL) the position the upsert
// returns under the key's row lock proves whether the remembered event is
// still the one before (the purge leaves the keys table alone, so a key's
// positions never start again); then the insert takes the hot lease
// without its NOT EXISTS check. On a single-writer database whose schema
// refuses a stale position (SQLite's trigger) the publish skips the read
// of the key's last event and inserts at the next position, provided the
// remembered event is still there, finished (checked in the insert
// statement). A position another process took meanwhile makes the insert
// fail on the trigger; a remembered event the purge removed (after which
// the key starts again at 1, in any process) makes it insert nothing.
// Either way the store forgets the key and reads. Entries change only
// after commits and DONE writes, so a rollback leaves nothing behind. It
// is safe for concurrent use.
type keyCache struct {
	mu      sync.Mutex
	keys    map[string]keyState // ordering key → its last position committed here
	pending map[string]keyPos   // ordered event committed here → its key and position, until DONE
}

// keyState is what a keyCache knows of a key's last event.
type keyState struct {
	seq  int64
	done bool
}

// keyPos is an ordered event's key and position.
type keyPos struct {
	key string
	seq int64
}

func newKeyCache() *keyCache {
	return &keyCache{keys: make(map[string]keyState), pending: make(map[string]keyPos)}
}

// lookup returns what c knows of key's last event.
func (c *keyCache) lookup(key string) (keyState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.keys[key]
	return st, ok
}

// afterCommit records, once tx commits, that event id was committed at
// position seq of key.
func (c *keyCache) afterCommit(tx core.Tx, id, key string, seq int64) {
	tx.AfterCommit(func() { c.committed(id, key, seq) })
}

// committed records that event id was committed at position seq of key.
func (c *keyCache) committed(id, key string, seq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) >= keyCacheMax || len(c.pending) >= keyCacheMax {
		clear(c.keys)
		clear(c.pending)
	}
	if st, ok := c.keys[key]; ok && st.seq > seq {
		return // a later commit of this key was recorded first
	}
	c.keys[key] = keyState{seq: seq}
	c.pending[id] = keyPos{key: key, seq: seq}
}

// done records that the events ids are DONE.
func (c *keyCache) done(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		p, ok := c.pending[id]
		if !ok {
			continue
		}
		delete(c.pending, id)
		if st, ok := c.keys[p.key]; ok && st.seq == p.seq {
			c.keys[p.key] = keyState{seq: p.seq, done: true}
		}
	}
}

// forget drops key: its last position is not known any more.
func (c *keyCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.keys, key)
}

// isStalePosition reports whether err is the trigger's refusal of a stale
// position.
func isStalePosition(err error) bool {
	return err != nil && strings.Contains(err.Error(), stalePosition)
}
