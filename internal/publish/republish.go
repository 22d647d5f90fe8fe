package publish

import (
	"sync"

	"github.com/outbox-go/outbox/core"
)

// An event id inserted, undone by a rollback to a savepoint and inserted
// again in the same transaction (an id derived from a business key, an
// ORM retrying a nested transaction) has two publishes, each with its own
// after-commit hand-off; only the last one's row can be stored. The row
// read after commit (see gone) finds that id stored, so the earlier
// publish would hand over its own event, payload and due time that never
// committed, and the dispatcher, holding that id, would then drop the
// committed one. Each publish made once a row may have been undone takes
// a token per id, kept in the transaction (core.TxValues); a hand-off
// whose id a later publish took is skipped.

// lastInserts is, in one transaction, the token of the publish that last
// inserted each event id once a row may have been undone.
type lastInserts struct {
	mu   sync.Mutex
	n    uint64
	last map[string]uint64
}

// lastInsertsKey is the key of a Client's lastInserts in a transaction.
type lastInsertsKey struct{ c *Client }

// mark records that this publish inserted ids on tx and returns its
// token, or 0 when no row of tx may have been undone yet (no earlier
// publish of these ids can have been undone then, and a later one that is
// marks its own) or tx keeps no values.
func (c *Client) mark(tx core.Tx, ids ...string) uint64 {
	w, ok := tx.(core.SavepointWatcher)
	if !ok || !w.RowsMayBeUndone() {
		return 0
	}
	tv, ok := tx.(core.TxValues)
	if !ok {
		return 0
	}
	l := tv.TxValue(lastInsertsKey{c}, func() any { return &lastInserts{last: make(map[string]uint64)} }).(*lastInserts)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	for _, id := range ids {
		l.last[id] = l.n
	}
	return l.n
}

// superseded returns, for a hand-off after tx's commit whose publish took
// token, whether a later publish of the transaction inserted id again,
// and whether that is known: a transaction that is not a core.TxValues
// cannot tell (the hand-off is then skipped: the poller delivers what is
// stored).
func (c *Client) superseded(tx core.Tx, id string, token uint64) (later, known bool) {
	tv, ok := tx.(core.TxValues)
	if !ok {
		return false, false
	}
	l, _ := tv.TxValue(lastInsertsKey{c}, nil).(*lastInserts)
	if l == nil {
		return false, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.last[id]
	return ok && last != token, true
}
