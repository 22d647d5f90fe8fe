package txctx_test

import (
	"context"
	"testing"

	"github.com/outbox-go/outbox/txctx"
)

// TxValue keeps one value per key for the Tx's life: init runs once, nil
// init looks only, other keys and other transactions are apart, and the
// value is still there after commit (where the after-commit hooks read it).
func TestTxValue(t *testing.T) {
	db := openDB(t)
	raw, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, tx := txctx.Adopt(context.Background(), raw)
	type key struct{ n int }
	if v := tx.TxValue(key{1}, nil); v != nil {
		t.Fatalf("TxValue with no value and nil init = %v, want nil", v)
	}
	inits := 0
	init := func() any { inits++; return &inits }
	first := tx.TxValue(key{1}, init)
	if again := tx.TxValue(key{1}, init); again != first || inits != 1 {
		t.Fatalf("second TxValue = %v (init ran %d times), want the first value, init once", again, inits)
	}
	if other := tx.TxValue(key{2}, func() any { return "two" }); other != "two" {
		t.Fatalf("TxValue of another key = %v", other)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if v := tx.TxValue(key{1}, nil); v != first {
		t.Fatalf("after commit TxValue = %v, want the value kept", v)
	}
	raw2, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, tx2 := txctx.Adopt(context.Background(), raw2)
	defer func() { _ = tx2.Rollback() }()
	if v := tx2.TxValue(key{1}, nil); v != nil {
		t.Fatalf("another transaction sees %v", v)
	}
}
