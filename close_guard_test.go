package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/dispatcher"
)

// Outbox.Close called from a listener with its context returns at once
// with dispatcher.ErrCloseInListener, and closes nothing: before, it
// waited for the worker running it, that is for ever. Called from another
// goroutine with a context of its own, it closes the outbox once the
// listener returned.
func TestOutboxCloseFromListener(t *testing.T) {
	db := sqliteDB(t, "close.db")
	ob, err := outbox.New(context.Background(), db, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	inListener := make(chan error, 1)
	closed := make(chan error, 1)
	ob.RegisterFunc("E", func(ctx context.Context, _ outbox.Envelope) error {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		inListener <- ob.Close(c)
		go func() { closed <- ob.Close(context.Background()) }()
		return nil
	})
	if err := ob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	env, err := outbox.JSONEvent("E", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.InTx(context.Background(), func(ctx context.Context) error {
		_, err := ob.Publish(ctx, env)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-inListener:
		if !errors.Is(err, dispatcher.ErrCloseInListener) {
			t.Fatalf("Close from the listener = %v, want dispatcher.ErrCloseInListener", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close from the listener did not return")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close from a goroutine of the listener = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close from a goroutine of the listener did not return")
	}
	if err := ob.Start(context.Background()); err == nil {
		t.Error("Start after Close succeeded")
	}
}
