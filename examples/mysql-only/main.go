// Command mysql-only publishes one event through a MySQL/MariaDB outbox
// and waits until a listener received it.
//
// It imports the MySQL dialect only, so it builds without cgo:
//
//	CGO_ENABLED=0 go build ./examples/mysql-only
//
// Run it against a database of a MySQL 8 or MariaDB 10.6+ server:
//
//	go run ./examples/mysql-only -dsn 'root@tcp(127.0.0.1:3306)/test?parseTime=true'
//
// or set OUTBOX_TEST_MYSQL_DSN instead of -dsn.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	// Registers the MySQL/MariaDB dialect and the go-sql-driver/mysql
	// driver "mysql".
	_ "github.com/outbox-go/outbox/jdbcstore/mysql"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_TEST_MYSQL_DSN"), "go-sql-driver/mysql DSN naming a database (default $OUTBOX_TEST_MYSQL_DSN)")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "mysql-only: give -dsn or set OUTBOX_TEST_MYSQL_DSN")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, *dsn, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mysql-only:", err)
		os.Exit(1)
	}
}

// run publishes one event on the database dsn names and prints what the
// listener received.
func run(ctx context.Context, dsn string, out io.Writer) (err error) {
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()

	ob, err := outbox.New(ctx, db, outbox.Config{})
	if err != nil {
		return err
	}
	received := make(chan outbox.Envelope, 1)
	ob.RegisterFunc("OrderPlaced", func(_ context.Context, e outbox.Envelope) error {
		select {
		case received <- e:
		default:
		}
		return nil
	})
	if err := ob.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ob.Close(context.WithoutCancel(ctx))) }()

	env, err := outbox.JSONEvent("OrderPlaced", `{"order":42}`)
	if err != nil {
		return err
	}
	err = ob.InTx(ctx, func(ctx context.Context) error {
		// The business writes go here, on txctx.From(ctx).
		_, err := ob.Publish(ctx, env)
		return err
	})
	if err != nil {
		return err
	}
	select {
	case e := <-received:
		fmt.Fprintf(out, "delivered %s %s\n", e.Type(), e.PayloadString())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("event %s not delivered: %w", env.ID(), ctx.Err())
	}
}
