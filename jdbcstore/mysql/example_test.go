package mysql_test

import (
	"context"
	"fmt"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/mysql"
)

// Open a MySQL or MariaDB database with go-sql-driver/mysql and create
// the outbox table. parseTime is not needed: the dialect reads times
// either way. Importing this package registers the dialect, so
// jdbcstore.New (and outbox.New) would also detect it from the "mysql"
// driver.
func Example() {
	ctx := context.Background()
	db, err := sqlx.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	store, err := jdbcstore.New(db, jdbcstore.Config{Dialect: mysql.Dialect})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err) // the server cannot be reached, or the user may not CREATE
		return
	}
	fmt.Println("outbox table ready:", store.Table())
}
