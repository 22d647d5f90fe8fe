package txctx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/txctx"
)

func Example() {
	dir, err := os.MkdirTemp("", "txctx-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "shop.db")+"?_journal_mode=WAL&_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"); err != nil {
		panic(err)
	}

	m := txctx.New(db)
	placeOrder := func(ctx context.Context, id string, fail bool) error {
		return m.Do(ctx, func(ctx context.Context) error {
			tx, _ := txctx.From(ctx)
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders(id) VALUES (?)", id); err != nil {
				return err
			}
			tx.AfterCommit(func() { fmt.Println("committed", id) })
			tx.AfterRollback(func() { fmt.Println("rolled back", id) })
			if fail {
				return errors.New("payment declined")
			}
			return nil
		})
	}

	ctx := context.Background()
	fmt.Println("error:", placeOrder(ctx, "A-1", false))
	fmt.Println("error:", placeOrder(ctx, "A-2", true))

	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("orders:", n)
	// Output:
	// committed A-1
	// error: <nil>
	// rolled back A-2
	// error: payment declined
	// orders: 1
}
