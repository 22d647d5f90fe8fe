package txctx

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/outbox-go/outbox/core"
)

var (
	// ErrManagedTx is returned by [Tx.Commit] and [Tx.Rollback] on a
	// transaction owned by [Manager.Do]: return nil or an error from the
	// function instead.
	ErrManagedTx = errors.New("outbox: transaction is managed by Manager.Do; return from fn to commit or roll back")
	// ErrForeignTx is returned by [Manager.Do] when the context already
	// carries an active transaction that does not belong to the Manager's
	// database (or whose database is unknown). It is [core.ErrForeignTx],
	// which the outbox store also returns for a Publish on a transaction of
	// another database.
	ErrForeignTx = core.ErrForeignTx
	// ErrTxDone is returned when a transaction is committed or rolled back a
	// second time, or after its *sql.Tx was ended directly (no hooks run
	// then, see [Tx.Commit]). It also matches [sql.ErrTxDone] with
	// errors.Is.
	ErrTxDone = fmt.Errorf("outbox: transaction already committed or rolled back: %w", sql.ErrTxDone)
)
