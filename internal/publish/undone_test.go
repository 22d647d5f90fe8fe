package publish_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/publish"
)

// undoneTx is a transaction that says whether rows written in it may
// have been undone by a rollback to a savepoint, and keeps values.
type undoneTx struct {
	*fakeTx
	undone bool
	values map[any]any
}

func (tx undoneTx) RowsMayBeUndone() bool { return tx.undone }

func (tx undoneTx) TxValue(key any, init func() any) any {
	if v, ok := tx.values[key]; ok || init == nil {
		return v
	}
	tx.values[key] = init()
	return tx.values[key]
}

// watcherTx says that rows written in it may have been undone, and keeps
// no values.
type watcherTx struct{ *fakeTx }

func (watcherTx) RowsMayBeUndone() bool { return true }

// statusStore is a fakeInserter that reads statuses: the events of
// stored, or err.
type statusStore struct {
	fakeInserter
	stored map[string]bool
	err    error
	reads  int
}

func (s *statusStore) Statuses(ctx context.Context, ids []string) (map[string]core.Status, error) {
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]core.Status{}
	for _, id := range ids {
		if s.stored[id] {
			out[id] = core.StatusNew
		}
	}
	return out, nil
}

// After commit, a transaction that may have rows undone gets one read per
// hand-off and the events without a row are not handed over; one that
// cannot have them gets no read; a failed read hands no event over (the
// poller delivers those that exist: handing them over delivered an event
// a savepoint rollback had removed; the intake is told, so that this
// node's next claim takes its own rows), and the next hand-offs read
// nothing for a while (each read waited its timeout after COMMIT). The
// publishing call's ctx ending before the commit (a ctx of a repository
// function's own) does not stop the read.
func TestHandOffReadsBackWhatASavepointMayHaveUndone(t *testing.T) {
	kept, gone := mustBuild(t, ev()), mustBuild(t, ev())
	for _, tc := range []struct {
		name      string
		undone    bool
		err       error
		wantReads int
		want      []string
		wantSkips int
		ctxEnded  bool
	}{
		{"no rollback", false, nil, 0, []string{kept.ID(), gone.ID()}, 0, false},
		{"rolled back", true, nil, 2, []string{kept.ID()}, 0, false},
		{"read failed", true, errors.New("connection lost"), 1, nil, 2, false},
		{"publishing ctx ended", true, nil, 2, []string{kept.ID()}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &statusStore{stored: map[string]bool{kept.ID(): true}, err: tc.err}
			hot := &fakeHotQueue{}
			c, err := publish.New(st, hot)
			if err != nil {
				t.Fatal(err)
			}
			tx := undoneTx{newFakeTx(), tc.undone, map[any]any{}}
			base, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx := core.ContextWithTx(base, tx)
			if _, err := c.Publish(ctx, kept); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PublishAll(ctx, gone); err != nil {
				t.Fatal(err)
			}
			if tc.ctxEnded {
				cancel()
			}
			tx.Commit()
			var got []string
			for _, env := range hot.received() {
				got = append(got, env.ID())
			}
			if !slices.Equal(got, tc.want) || st.reads != tc.wantReads {
				t.Errorf("handed over %v after %d reads, want %v after %d", got, st.reads, tc.want, tc.wantReads)
			}
			// Each hand-off not made is told to the intake, so this
			// node's next claim takes its own rows at once.
			if hot.skips != tc.wantSkips {
				t.Errorf("%d hand-offs skipped were told, want %d", hot.skips, tc.wantSkips)
			}
		})
	}
}

// An id inserted twice in one transaction (a rollback to a savepoint
// undid the first row) is handed over once after commit, as the last
// publish inserted it: the first publish's hand-off found the id stored
// and handed over its own event, which never committed. Through Publish
// and PublishAll. A transaction that cannot keep values cannot tell
// which publish is the last: nothing is handed over (the intake is told)
// and the poller delivers what is stored.
func TestHandOffLeavesAnIDInsertedAgain(t *testing.T) {
	build := func(v string) core.Envelope {
		return mustBuild(t, core.NewEvent("UserCreated").ID("user-1").PayloadJSONString(`{"v":"`+v+`"}`))
	}
	for _, all := range []bool{false, true} {
		st := &statusStore{stored: map[string]bool{"user-1": true}}
		hot := &fakeHotQueue{}
		c, err := publish.New(st, hot)
		if err != nil {
			t.Fatal(err)
		}
		tx := undoneTx{newFakeTx(), true, map[any]any{}}
		ctx := core.ContextWithTx(context.Background(), tx)
		for _, v := range []string{"undone", "committed"} {
			if all {
				_, err = c.PublishAll(ctx, build(v))
			} else {
				_, err = c.Publish(ctx, build(v))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		tx.Commit()
		got := hot.received()
		if len(got) != 1 || string(got[0].Payload()) != `{"v":"committed"}` {
			t.Errorf("PublishAll %v: handed over %d events (%v), want the committed one only", all, len(got), got)
		}
	}

	st := &statusStore{stored: map[string]bool{"user-1": true}}
	hot := &fakeHotQueue{}
	c, err := publish.New(st, hot)
	if err != nil {
		t.Fatal(err)
	}
	tx := watcherTx{newFakeTx()}
	if _, err := c.Publish(core.ContextWithTx(context.Background(), tx), build("committed")); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	if got := hot.received(); len(got) != 0 || hot.skips != 1 {
		t.Errorf("a transaction keeping no values: handed over %d events, told %d skips; want none, and 1", len(got), hot.skips)
	}
}
