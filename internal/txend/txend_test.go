package txend_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/txend"
)

func TestMark(t *testing.T) {
	batch := &core.BatchError{Index: 2, Err: sql.ErrTxDone}
	store := fmt.Errorf("outbox: jdbcstore: insert events 0 to 3 of the batch: %w", batch)
	err := txend.Mark(store)
	var be *core.BatchError
	if !errors.Is(err, core.ErrNoTransaction) || !errors.Is(err, sql.ErrTxDone) || !errors.As(err, &be) || be.Index != 2 {
		t.Errorf("Mark = %v, want ErrNoTransaction, sql.ErrTxDone and the store's BatchError", err)
	}
	if want := "outbox: no active transaction: sql: transaction has already been committed or rolled back"; err.Error() != want {
		t.Errorf("Mark text %q, want %q", err, want)
	}
	other := errors.New("x")
	if txend.Mark(other) != other || txend.Mark(nil) != nil {
		t.Error("Mark changed an error that says nothing of an ended transaction")
	}
	if already := fmt.Errorf("%w: %w", core.ErrNoTransaction, sql.ErrTxDone); txend.Mark(already) != already {
		t.Error("Mark wrapped an error matching ErrNoTransaction already")
	}
}
