package postgres_test

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/postgres"
)

// Open a PostgreSQL database through pgx's database/sql driver (the
// package registers it as "pgx") and create the outbox table. With pgx
// connections the store also announces commits with NOTIFY, so pollers on
// other nodes wake at once.
func Example() {
	ctx := context.Background()
	db, err := sqlx.Open("pgx", "postgres://app:secret@127.0.0.1:5432/shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	store, err := jdbcstore.New(db, jdbcstore.Config{Dialect: postgres.Dialect})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.ApplySchema(ctx); err != nil {
		fmt.Println(err) // the server cannot be reached, or the role may not CREATE
		return
	}
	fmt.Println("outbox table ready:", store.Table())
}
