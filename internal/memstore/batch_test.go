package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/memstore"
)

func batchEvents(t *testing.T, ids ...string) []core.Envelope {
	t.Helper()
	envs := make([]core.Envelope, len(ids))
	for i, id := range ids {
		env, err := core.NewEvent("E").ID(id).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		envs[i] = env
	}
	return envs
}

func TestInsertBatch(t *testing.T) {
	ctx := context.Background()
	lease := core.Lease{Owner: "node", Until: t0.Add(60e9)}
	st := memstore.New(func() time.Time { return t0 })
	leased, err := st.InsertBatch(ctx, nil, batchEvents(t, "a", "b"), []core.Lease{lease, {}})
	if err != nil || len(leased) != 2 || !leased[0] || leased[1] {
		t.Fatalf("InsertBatch = %v, %v; want [true false]", leased, err)
	}
	if r, ok := st.Get("a"); !ok || r.LockedBy != "node" || r.Status != core.StatusNew || !r.CreatedAt.Equal(t0) {
		t.Errorf("a = %v, %+v", ok, r)
	}
	if r, ok := st.Get("b"); !ok || r.LockedBy != "" {
		t.Errorf("b = %v, %+v; want unowned", ok, r)
	}

	// All or nothing.
	for name, tc := range map[string]struct {
		envs  []core.Envelope
		index int
		want  error
	}{
		"stored id":   {batchEvents(t, "c", "a", "d"), 1, core.ErrDuplicateEvent},
		"twice":       {batchEvents(t, "c", "d", "c"), 2, core.ErrDuplicateEvent},
		"invalid":     {append(batchEvents(t, "c"), core.Envelope{}), 1, core.ErrEmptyEventType},
		"failed hook": {batchEvents(t, "c", "fail", "d"), 1, errBoom},
	} {
		t.Run(name, func(t *testing.T) {
			st.Fail = func(op, id string) error {
				if op == "insert" && id == "fail" {
					return errBoom
				}
				return nil
			}
			defer func() { st.Fail = nil }()
			_, err := st.InsertBatch(ctx, nil, tc.envs, make([]core.Lease, len(tc.envs)))
			var be *core.BatchError
			if !errors.As(err, &be) || be.Index != tc.index || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want a *core.BatchError at %d wrapping %v", err, tc.index, tc.want)
			}
			for _, id := range []string{"c", "d"} {
				if _, ok := st.Get(id); ok {
					t.Errorf("%s stored by a failed batch", id)
				}
			}
		})
	}
	if _, err := st.InsertBatch(ctx, nil, batchEvents(t, "x"), nil); err == nil {
		t.Error("no leases for one event: no error")
	}
}

var errBoom = errors.New("boom")
