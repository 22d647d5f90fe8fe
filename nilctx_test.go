package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/dispatcher"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/poller"
	"github.com/outbox-go/outbox/registry"
)

// A nil context is refused with core.ErrNilContext by every method of an
// Outbox that takes one and returns an error, before anything runs: no
// panic, nothing written, and the Outbox stays usable (a nil context
// reaching database/sql panicked while it held its pool's lock, so the
// next Close hung).
func TestNilContextIsRefused(t *testing.T) {
	db := sqliteDB(t, "nilctx.db")
	var nilCtx context.Context // what a caller's unset field holds
	if _, err := outbox.New(nilCtx, db, outbox.Config{Logger: quietLogger()}); !errors.Is(err, core.ErrNilContext) {
		t.Errorf("New(nil ctx) = %v, want ErrNilContext", err)
	}
	ob, err := outbox.New(t.Context(), db, outbox.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	env, err := outbox.NewEvent("E").PayloadJSONString(`{}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Beginx() // for PublishTx: an active transaction, so only the ctx is wrong
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	for name, call := range map[string]func() error{
		"Start": func() error { return ob.Start(nilCtx) },
		"InTx": func() error {
			return ob.InTx(nilCtx, func(context.Context) error { ran = true; return nil })
		},
		"InTx without a function": func() error { return ob.InTx(nilCtx, nil) },
		"Publish":                 func() error { _, err := ob.Publish(nilCtx, env); return err },
		"PublishAll":              func() error { _, err := ob.PublishAll(nilCtx, env); return err },
		"PublishTx":               func() error { _, err := ob.PublishTx(nilCtx, tx, env); return err },
		"PublishAllTx":            func() error { _, err := ob.PublishAllTx(nilCtx, tx, env); return err },
		"Get":                     func() error { _, err := ob.Get(nilCtx, env.ID()); return err },
		"CountByStatus":           func() error { _, err := ob.CountByStatus(nilCtx); return err },
		"ReplayDead": func() error {
			_, err := ob.ReplayDead(nilCtx, jdbcstore.DeadFilter{}, jdbcstore.ReplayOptions{All: true})
			return err
		},
		"DiscardDead": func() error {
			_, err := ob.DiscardDead(nilCtx, jdbcstore.DeadFilter{}, jdbcstore.DiscardOptions{All: true})
			return err
		},
		"Close": func() error { return ob.Close(nilCtx) },
	} {
		if err := call(); !errors.Is(err, core.ErrNilContext) {
			t.Errorf("%s(nil ctx) = %v, want ErrNilContext", name, err)
		}
	}
	if ran {
		t.Error("InTx(nil ctx) ran its function")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := ob.Start(t.Context()); err != nil {
		t.Fatalf("Start after the refusals: %v", err)
	}
	if err := ob.InTx(t.Context(), func(ctx context.Context) error { _, err := ob.Publish(ctx, env); return err }); err != nil {
		t.Fatalf("publish after the refusals: %v", err)
	}
	waitStatusCount(t, ob, core.StatusDone, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ob.Close(ctx); err != nil {
		t.Errorf("Close after the refusals: %v", err)
	}
	counts, err := db.QueryxContext(ctx, "SELECT COUNT(*) FROM outbox_event")
	if err != nil {
		t.Fatal(err)
	}
	defer counts.Close()
	var n int
	for counts.Next() {
		if err := counts.Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Errorf("rows = %d, want 1 (only the publish with a context)", n)
	}
}

// The dispatcher's and the poller's Start and Close, and PollOnce, refuse
// a nil context too (Close panicked, Start made a context from it).
func TestNilContextIsRefusedByTheParts(t *testing.T) {
	db := sqliteDB(t, "nilctx-parts.db")
	st, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(st, registry.New(), dispatcher.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := poller.New(st, d, poller.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"Dispatcher.Start":       func() error { return d.Start(nilCtx) },
		"Dispatcher.Close":       func() error { return d.Close(nilCtx) },
		"Poller.Start":           func() error { return p.Start(nilCtx) },
		"Poller.PollOnce":        func() error { _, err := p.PollOnce(nilCtx); return err },
		"Poller.ReapOnce":        func() error { _, err := p.ReapOnce(nilCtx); return err },
		"Dispatcher.RemoveStore": func() error { return d.RemoveStore(nilCtx, "x") },
		"Poller.Close":           func() error { return p.Close(nilCtx) },
	} {
		if err := call(); !errors.Is(err, core.ErrNilContext) {
			t.Errorf("%s(nil ctx) = %v, want ErrNilContext", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := errors.Join(p.Close(ctx), d.Close(ctx)); err != nil {
		t.Errorf("Close after the refusals: %v", err)
	}
}
