package memstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/memstore"
	"github.com/outbox-go/outbox/internal/testsupport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newStore() (*memstore.Store, *testsupport.Clock) {
	c := testsupport.NewClock(t0)
	return memstore.New(c.Now), c
}

func build(t *testing.T, id string, mods ...func(*core.Builder)) core.Envelope {
	t.Helper()
	b := core.NewEvent("E").ID(id).PayloadJSONString(`{}`)
	for _, m := range mods {
		m(b)
	}
	env, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return env
}

func insert(t *testing.T, st *memstore.Store, id string, lease core.Lease, mods ...func(*core.Builder)) core.Envelope {
	t.Helper()
	env := build(t, id, mods...)
	if err := st.Insert(context.Background(), nil, env, lease); err != nil {
		t.Fatalf("Insert(%s): %v", id, err)
	}
	return env
}

func get(t *testing.T, st *memstore.Store, id string) core.Record {
	t.Helper()
	r, ok := st.Get(id)
	if !ok {
		t.Fatalf("row %s not found", id)
	}
	return r
}

// put stores a decodable row with the given status and lease.
func put(st *memstore.Store, id string, status core.Status, availableAt, createdAt time.Time, owner string, until time.Time) {
	st.Put(core.Record{
		ID: id, Type: "E", OccurredAt: createdAt, Payload: []byte(`{}`), PayloadKind: core.PayloadJSON,
		Status: status, AvailableAt: availableAt, CreatedAt: createdAt, LockedBy: owner, LockedUntil: until,
	})
}

func ids(recs []core.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func TestInsertWithAndWithoutLease(t *testing.T) {
	st, _ := newStore()
	lease := core.Lease{Owner: "me", Until: t0.Add(time.Minute)}
	insert(t, st, "owned", lease)
	insert(t, st, "unowned", core.Lease{})

	r := get(t, st, "owned")
	if r.Status != core.StatusNew || r.LockedBy != "me" || !r.LockedUntil.Equal(lease.Until) {
		t.Errorf("owned row: %v locked by %q until %v; want NEW, me, %v", r.Status, r.LockedBy, r.LockedUntil, lease.Until)
	}
	if !r.AvailableAt.Equal(t0) || !r.CreatedAt.Equal(t0) {
		t.Errorf("owned row: available_at %v created_at %v; want both %v", r.AvailableAt, r.CreatedAt, t0)
	}
	if r := get(t, st, "unowned"); r.LockedBy != "" || !r.LockedUntil.IsZero() {
		t.Errorf("unowned row locked by %q until %v; want no lease", r.LockedBy, r.LockedUntil)
	}
	err := st.Insert(context.Background(), nil, build(t, "owned"), core.Lease{})
	if !errors.Is(err, core.ErrDuplicateEvent) {
		t.Errorf("duplicate Insert = %v, want core.ErrDuplicateEvent", err)
	}
	if r := get(t, st, "owned"); r.LockedBy != "me" {
		t.Errorf("a duplicate insert changed the row's lease to %q", r.LockedBy)
	}
}

func TestInsertDelayedSetsAvailableAtToNotBefore(t *testing.T) {
	st, c := newStore()
	nb := t0.Add(90 * time.Second)
	insert(t, st, "later", core.Lease{}, func(b *core.Builder) { b.NotBefore(nb) })
	insert(t, st, "past", core.Lease{}, func(b *core.Builder) { b.NotBefore(t0.Add(-time.Hour)) })

	if r := get(t, st, "later"); !r.AvailableAt.Equal(nb) || !r.CreatedAt.Equal(t0) {
		t.Errorf("delayed row: available_at %v created_at %v; want %v, %v", r.AvailableAt, r.CreatedAt, nb, t0)
	}
	if r := get(t, st, "past"); !r.AvailableAt.Equal(t0) {
		t.Errorf("NotBefore in the past: available_at %v, want now %v", r.AvailableAt, t0)
	}

	claim := func() []string {
		t.Helper()
		recs, err := st.ClaimDue(context.Background(), core.ClaimRequest{
			Owner: "me", Now: c.Now(), LeaseUntil: c.Now().Add(time.Minute), Limit: 10,
		})
		if err != nil {
			t.Fatalf("ClaimDue: %v", err)
		}
		return ids(recs)
	}
	if got := claim(); !slices.Equal(got, []string{"past"}) {
		t.Fatalf("claim before NotBefore = %v, want only [past]", got)
	}
	c.Advance(90*time.Second - time.Nanosecond)
	if got := claim(); slices.Contains(got, "later") {
		t.Fatalf("delayed row claimed 1ns before its NotBefore: %v", got)
	}
	c.Advance(time.Nanosecond)
	if got := claim(); !slices.Contains(got, "later") {
		t.Fatalf("delayed row not claimed at its NotBefore: %v", got)
	}
}

func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	until := t0.Add(time.Minute)
	setup := func(t *testing.T) *memstore.Store {
		st, _ := newStore()
		insert(t, st, "a", core.Lease{Owner: "me", Until: until})
		insert(t, st, "b", core.Lease{Owner: "other", Until: until})
		insert(t, st, "free", core.Lease{})
		return st
	}

	t.Run("MarkDone", func(t *testing.T) {
		st := setup(t)
		n, err := st.MarkDone(ctx, "me", []string{"a", "b", "free", "missing"})
		if err != nil || n != 1 {
			t.Fatalf("MarkDone(me, a b free missing) = %d, %v; want 1 (only a is held by me)", n, err)
		}
		r := get(t, st, "a")
		if r.Status != core.StatusDone || r.DoneAt.IsZero() || r.LockedBy != "" || !r.LockedUntil.IsZero() {
			t.Errorf("a: %v done_at %v locked by %q until %v; want DONE, set, lease released", r.Status, r.DoneAt, r.LockedBy, r.LockedUntil)
		}
		for _, id := range []string{"b", "free"} {
			if r := get(t, st, id); r.Status != core.StatusNew {
				t.Errorf("%s: %v, want NEW (not held by me)", id, r.Status)
			}
		}
		if r := get(t, st, "b"); r.LockedBy != "other" || !r.LockedUntil.Equal(until) {
			t.Errorf("b: lease %q until %v changed by a fenced write", r.LockedBy, r.LockedUntil)
		}
		// DONE is final: not even its former owner changes it again.
		if n, err := st.MarkDone(ctx, "me", []string{"a"}); n != 0 || err != nil {
			t.Errorf("second MarkDone = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("MarkRetry", func(t *testing.T) {
		st := setup(t)
		next, leaseUntil := t0.Add(10*time.Second), t0.Add(70*time.Second)
		ok, err := st.MarkRetry(ctx, "me", "a", next, leaseUntil, "boom")
		if !ok || err != nil {
			t.Fatalf("MarkRetry by the owner = %v, %v; want true, nil", ok, err)
		}
		r := get(t, st, "a")
		if r.Status != core.StatusRetry || r.Attempts != 1 || !r.AvailableAt.Equal(next) || r.LastError != "boom" {
			t.Errorf("a: %v attempts %d available_at %v last_error %q; want RETRY 1 %v boom", r.Status, r.Attempts, r.AvailableAt, r.LastError, next)
		}
		if r.LockedBy != "me" || !r.LockedUntil.Equal(leaseUntil) {
			t.Errorf("a: locked by %q until %v; want the lease kept by me until %v", r.LockedBy, r.LockedUntil, leaseUntil)
		}
		for _, id := range []string{"b", "free", "missing"} {
			if ok, err := st.MarkRetry(ctx, "me", id, next, leaseUntil, "boom"); ok || err != nil {
				t.Errorf("MarkRetry(me, %s) = %v, %v; want false, nil", id, ok, err)
			}
		}
		if r := get(t, st, "b"); r.Status != core.StatusNew || r.Attempts != 0 || r.LockedBy != "other" {
			t.Errorf("b changed by a fenced MarkRetry: %+v", r)
		}
		if _, err := st.MarkDone(ctx, "me", []string{"a"}); err != nil {
			t.Fatal(err)
		}
		if ok, _ := st.MarkRetry(ctx, "me", "a", next, leaseUntil, "late"); ok {
			t.Error("MarkRetry changed a DONE row")
		}
	})

	t.Run("MarkDead", func(t *testing.T) {
		st := setup(t)
		ok, err := st.MarkDead(ctx, "me", "a", "gone")
		if !ok || err != nil {
			t.Fatalf("MarkDead by the owner = %v, %v; want true, nil", ok, err)
		}
		r := get(t, st, "a")
		if r.Status != core.StatusDead || r.Attempts != 1 || r.LastError != "gone" || r.LockedBy != "" || !r.LockedUntil.IsZero() {
			t.Errorf("a: %+v; want DEAD, attempts 1, last_error gone, lease released", r)
		}
		for _, id := range []string{"b", "free", "missing"} {
			if ok, err := st.MarkDead(ctx, "me", id, "gone"); ok || err != nil {
				t.Errorf("MarkDead(me, %s) = %v, %v; want false, nil", id, ok, err)
			}
		}
		if r := get(t, st, "b"); r.Status != core.StatusNew || r.LockedBy != "other" {
			t.Errorf("b changed by a fenced MarkDead: %+v", r)
		}
	})

	// The empty owner holds no lease: it cannot write unowned rows either.
	t.Run("EmptyOwner", func(t *testing.T) {
		st := setup(t)
		if n, err := st.MarkDone(ctx, "", []string{"free"}); n != 0 || err != nil {
			t.Errorf(`MarkDone("", free) = %d, %v; want 0, nil`, n, err)
		}
		if ok, err := st.MarkRetry(ctx, "", "free", t0, t0, "x"); ok || err != nil {
			t.Errorf(`MarkRetry("", free) = %v, %v; want false, nil`, ok, err)
		}
		if ok, err := st.MarkDead(ctx, "", "free", "x"); ok || err != nil {
			t.Errorf(`MarkDead("", free) = %v, %v; want false, nil`, ok, err)
		}
		if r := get(t, st, "free"); r.Status != core.StatusNew || r.Attempts != 0 {
			t.Errorf("free: %v attempts %d, want NEW 0", r.Status, r.Attempts)
		}
	})

	// A lease that expired but was not taken over still fences on the
	// owner only: the former owner's write goes through.
	t.Run("ExpiredButNotTakenOver", func(t *testing.T) {
		st := setup(t)
		insert(t, st, "stale", core.Lease{Owner: "me", Until: t0.Add(-time.Second)})
		if n, err := st.MarkDone(ctx, "me", []string{"stale"}); n != 1 || err != nil {
			t.Errorf("MarkDone after expiry by the still-recorded owner = %d, %v; want 1", n, err)
		}
	})
}

func TestClaimDueSelection(t *testing.T) {
	st, c := newStore()
	c.Advance(time.Hour)
	now := c.Now()
	old := t0
	s := time.Second
	put(st, "new-free", core.StatusNew, old, old, "", time.Time{})
	put(st, "retry-free", core.StatusRetry, old.Add(s), old, "", time.Time{})
	put(st, "mine-live", core.StatusNew, old.Add(2*s), old, "me", now.Add(time.Hour))
	put(st, "other-expired", core.StatusRetry, old.Add(3*s), old, "other", now.Add(-time.Nanosecond))
	put(st, "other-live", core.StatusNew, old, old, "other", now.Add(time.Nanosecond))
	put(st, "other-until-now", core.StatusNew, old, old, "other", now) // ends at now: still live
	put(st, "done", core.StatusDone, old, old, "", time.Time{})
	put(st, "dead", core.StatusDead, old, old, "", time.Time{})
	put(st, "not-due", core.StatusRetry, now.Add(time.Nanosecond), old, "", time.Time{})
	put(st, "too-recent", core.StatusNew, now, now.Add(-s+time.Nanosecond), "", time.Time{})
	put(st, "just-old-enough", core.StatusNew, now, now.Add(-s), "", time.Time{})

	leaseUntil := now.Add(time.Minute)
	recs, err := st.ClaimDue(context.Background(), core.ClaimRequest{
		Owner: "me", Now: now, LeaseUntil: leaseUntil, SkipRecent: s, Limit: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"new-free", "retry-free", "mine-live", "other-expired", "just-old-enough"}
	if got := ids(recs); !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v (oldest due first)", got, want)
	}
	for _, r := range recs {
		if r.LockedBy != "me" || !r.LockedUntil.Equal(leaseUntil) {
			t.Errorf("returned %s: locked by %q until %v; want me until %v", r.ID, r.LockedBy, r.LockedUntil, leaseUntil)
		}
		if stored := get(t, st, r.ID); stored.LockedBy != "me" || !stored.LockedUntil.Equal(leaseUntil) {
			t.Errorf("stored %s: locked by %q until %v; want me until %v", r.ID, stored.LockedBy, stored.LockedUntil, leaseUntil)
		}
	}
	if r := get(t, st, "retry-free"); r.Status != core.StatusRetry {
		t.Errorf("a claim changed the status to %v", r.Status)
	}
	for _, id := range []string{"other-live", "other-until-now"} {
		if r := get(t, st, id); r.LockedBy != "other" {
			t.Errorf("%s: a live lease of another node was taken by %q", id, r.LockedBy)
		}
	}
	for _, id := range []string{"done", "dead", "not-due", "too-recent"} {
		if r := get(t, st, id); r.LockedBy != "" {
			t.Errorf("%s: claimed (locked by %q)", id, r.LockedBy)
		}
	}

	// The other node cannot claim them now; the rows it still holds it can.
	recs, err = st.ClaimDue(context.Background(), core.ClaimRequest{
		Owner: "other", Now: now, LeaseUntil: now.Add(time.Minute), SkipRecent: s, Limit: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(recs), []string{"other-live", "other-until-now"}; !slices.Equal(got, want) {
		t.Fatalf("other's claim = %v, want %v", got, want)
	}
}

func TestClaimDueLimitAndOrder(t *testing.T) {
	st, c := newStore()
	s := time.Second
	put(st, "c", core.StatusNew, t0.Add(s), t0.Add(s), "", time.Time{})
	put(st, "a", core.StatusNew, t0.Add(s), t0.Add(s), "", time.Time{})
	put(st, "late", core.StatusNew, t0.Add(3*s), t0, "", time.Time{})
	put(st, "created-later", core.StatusRetry, t0.Add(s), t0.Add(2*s), "", time.Time{})
	put(st, "first", core.StatusRetry, t0, t0.Add(2*s), "", time.Time{})
	c.Advance(time.Hour)
	now := c.Now()

	recs, err := st.ClaimDue(context.Background(), core.ClaimRequest{Owner: "me", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(recs), []string{"first", "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v (available_at, created_at, id)", got, want)
	}
	for _, id := range []string{"created-later", "late"} {
		if r := get(t, st, id); r.LockedBy != "" {
			t.Errorf("%s beyond the limit was leased to %q", id, r.LockedBy)
		}
	}
	// Another node gets the rest, not the rows leased to me.
	recs, err = st.ClaimDue(context.Background(), core.ClaimRequest{Owner: "other", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(recs), []string{"created-later", "late"}; !slices.Equal(got, want) {
		t.Fatalf("other's claim = %v, want %v", got, want)
	}
}

func TestReapExpired(t *testing.T) {
	st, c := newStore()
	c.Advance(time.Hour)
	now := c.Now()
	past, future := now.Add(-time.Nanosecond), now.Add(time.Minute)
	put(st, "new-expired", core.StatusNew, t0, t0, "gone", past)
	put(st, "retry-expired", core.StatusRetry, t0, t0, "gone", past)
	put(st, "live", core.StatusNew, t0, t0, "alive", future)
	put(st, "until-now", core.StatusNew, t0, t0, "alive", now)
	put(st, "done-expired", core.StatusDone, t0, t0, "gone", past)
	put(st, "dead-expired", core.StatusDead, t0, t0, "gone", past)
	put(st, "free", core.StatusNew, t0, t0, "", time.Time{})

	n, err := st.ReapExpired(context.Background(), now, 100)
	if err != nil || n != 2 {
		t.Fatalf("ReapExpired = %d, %v; want 2", n, err)
	}
	for _, id := range []string{"new-expired", "retry-expired"} {
		if r := get(t, st, id); r.LockedBy != "" || !r.LockedUntil.IsZero() {
			t.Errorf("%s: lease %q until %v not released", id, r.LockedBy, r.LockedUntil)
		}
	}
	for id, owner := range map[string]string{"live": "alive", "until-now": "alive", "done-expired": "gone", "dead-expired": "gone"} {
		if r := get(t, st, id); r.LockedBy != owner {
			t.Errorf("%s: locked by %q, want %q (not reaped)", id, r.LockedBy, owner)
		}
	}
	if n, err := st.ReapExpired(context.Background(), now, 100); n != 0 || err != nil {
		t.Errorf("second ReapExpired = %d, %v; want 0", n, err)
	}
}

func TestReapExpiredLimit(t *testing.T) {
	st, c := newStore()
	c.Advance(time.Hour)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		put(st, id, core.StatusNew, t0, t0, "gone", t0)
	}
	var got []int64
	for {
		n, err := st.ReapExpired(context.Background(), c.Now(), 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if n < 2 {
			break
		}
	}
	if !slices.Equal(got, []int64{2, 2, 1}) {
		t.Fatalf("ReapExpired with limit 2 released %v, want [2 2 1]", got)
	}
}

func TestFailHooks(t *testing.T) {
	ctx := context.Background()
	st, c := newStore()
	insert(t, st, "a", core.Lease{Owner: "me", Until: t0.Add(-time.Second)})
	c.Advance(time.Hour)
	errDown := errors.New("down")
	var seen []string
	st.Fail = func(op, id string) error {
		seen = append(seen, op+":"+id)
		return errDown
	}
	if err := st.Insert(ctx, nil, build(t, "b"), core.Lease{}); !errors.Is(err, errDown) {
		t.Errorf("Insert = %v", err)
	}
	if _, err := st.MarkDone(ctx, "me", []string{"a"}); !errors.Is(err, errDown) {
		t.Errorf("MarkDone = %v", err)
	}
	if _, err := st.MarkRetry(ctx, "me", "a", t0, t0, "x"); !errors.Is(err, errDown) {
		t.Errorf("MarkRetry = %v", err)
	}
	if _, err := st.MarkDead(ctx, "me", "a", "x"); !errors.Is(err, errDown) {
		t.Errorf("MarkDead = %v", err)
	}
	if _, err := st.ClaimDue(ctx, core.ClaimRequest{Owner: "x", Now: c.Now(), LeaseUntil: c.Now().Add(time.Minute), Limit: 10}); !errors.Is(err, errDown) {
		t.Errorf("ClaimDue = %v", err)
	}
	if _, err := st.ReapExpired(ctx, c.Now(), 10); !errors.Is(err, errDown) {
		t.Errorf("ReapExpired = %v", err)
	}
	if _, err := st.PollPending(ctx, c.Now(), 0, 10); !errors.Is(err, errDown) {
		t.Errorf("PollPending = %v", err)
	}
	want := []string{"insert:b", "done:a", "retry:a", "dead:a", "claim:", "reap:", "poll:"}
	if !slices.Equal(seen, want) {
		t.Errorf("Fail consulted with %v, want %v", seen, want)
	}
	r := get(t, st, "a")
	if r.Status != core.StatusNew || r.Attempts != 0 || r.LockedBy != "me" {
		t.Errorf("a failed operation changed the row: %+v", r)
	}
	if _, ok := st.Get("b"); ok {
		t.Error("a failed Insert stored the row")
	}
}

func TestChangedSignalsStatusWrites(t *testing.T) {
	st, _ := newStore()
	st.Changed = make(chan struct{}, 1)
	insert(t, st, "a", core.Lease{Owner: "me", Until: t0.Add(time.Minute)})
	select {
	case <-st.Changed:
		t.Fatal("Insert signalled Changed")
	default:
	}
	if n, _ := st.MarkDone(context.Background(), "other", []string{"a"}); n != 0 {
		t.Fatal("fenced write changed the row")
	}
	select {
	case <-st.Changed:
		t.Fatal("a fenced write signalled Changed")
	default:
	}
	if n, _ := st.MarkDone(context.Background(), "me", []string{"a"}); n != 1 {
		t.Fatal("MarkDone by the owner changed nothing")
	}
	select {
	case <-st.Changed:
	default:
		t.Fatal("MarkDone did not signal Changed")
	}
}
