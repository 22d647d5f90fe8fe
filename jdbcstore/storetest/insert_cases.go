package storetest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func (s *suite) testInsert(t *testing.T) {
	t.Run("RoundTripsEveryField", func(t *testing.T) {
		t.Parallel()
		clk := newClock(t0)
		st := s.newStore(t, clk, jdbcstore.Config{})
		occurred := time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("IST", 5*3600+1800))
		env := build(t, core.NewEvent("OrderPlaced").
			ID("evt-roundtrip-0001").
			OccurredAt(occurred).
			AggregateType("Order").
			AggregateID("order-42").
			TenantID("tenant-a").
			Header("trace-id", "4bf92f3577b34da6").
			Header("content-type", "application/json").
			PayloadJSONString(`{"total": 12.5, "items": [1, 2, 3], "note": null}`))
		insert(t, st, env)

		rec := get(t, st, env.ID())
		if rec.ID != "evt-roundtrip-0001" || rec.Type != "OrderPlaced" {
			t.Errorf("ID, Type = %q, %q", rec.ID, rec.Type)
		}
		// 1999-12-31T23:59:59.999999999+05:30, truncated (not rounded).
		sameTime(t, "OccurredAt", rec.OccurredAt, time.Date(1999, 12, 31, 18, 29, 59, 999999000, time.UTC))
		if rec.AggregateType != "Order" || rec.AggregateID != "order-42" || rec.TenantID != "tenant-a" {
			t.Errorf("aggregate type/id, tenant = %q, %q, %q", rec.AggregateType, rec.AggregateID, rec.TenantID)
		}
		h, err := core.DecodeHeaders(rec.HeadersJSON)
		if err != nil || !maps.Equal(h, env.Headers()) {
			t.Errorf("HeadersJSON = %q (%v), want %q", rec.HeadersJSON, err, env.Headers())
		}
		samePayload(t, rec.ID, core.PayloadJSON, rec.Payload, []byte(`{"total": 12.5, "items": [1, 2, 3], "note": null}`))
		if rec.PayloadKind != core.PayloadJSON {
			t.Errorf("PayloadKind = %v, want json", rec.PayloadKind)
		}
		if rec.Status != core.StatusNew || rec.Attempts != 0 {
			t.Errorf("Status, Attempts = %v, %d, want NEW, 0", rec.Status, rec.Attempts)
		}
		sameTime(t, "CreatedAt", rec.CreatedAt, micro(t0))
		sameTime(t, "AvailableAt", rec.AvailableAt, micro(t0))
		if !rec.DoneAt.IsZero() {
			t.Errorf("DoneAt = %s, want zero", rec.DoneAt)
		}
		if rec.LastError != "" {
			t.Errorf("LastError = %q, want empty", rec.LastError)
		}
		sameEnvelope(t, rec, env)
	})

	t.Run("OptionalFieldsEmpty", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		env := build(t, core.NewEvent("Minimal").ID("evt-minimal").PayloadJSONString(`{}`))
		insert(t, st, env)
		rec := get(t, st, env.ID())
		if rec.AggregateType != "" || rec.AggregateID != "" || rec.TenantID != "" || rec.HeadersJSON != "" {
			t.Errorf("optional fields = %q, %q, %q, headers %q; want all empty",
				rec.AggregateType, rec.AggregateID, rec.TenantID, rec.HeadersJSON)
		}
		sameEnvelope(t, rec, env)
	})

	t.Run("OutsideTransaction", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		a := jsonEvent(t, "evt-autocommit-sqlx")
		b := jsonEvent(t, "evt-autocommit-sql")
		if err := st.Insert(ctx, st.DB(), a, testLease); err != nil {
			t.Fatalf("insert on *sqlx.DB: %v", err)
		}
		if err := st.Insert(ctx, st.DB().DB, b, testLease); err != nil {
			t.Fatalf("insert on *sql.DB: %v", err)
		}
		sameEnvelope(t, get(t, st, a.ID()), a)
		sameEnvelope(t, get(t, st, b.ID()), b)
	})

	t.Run("OnSQLTx", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		tx, err := st.DB().DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		env := jsonEvent(t, "evt-sql-tx")
		if err := st.Insert(ctx, tx, env, testLease); err != nil {
			_ = tx.Rollback()
			t.Fatalf("insert on *sql.Tx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		sameEnvelope(t, get(t, st, env.ID()), env)
	})

	t.Run("RolledBackTransactionLeavesNoRow", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		tx, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		env := jsonEvent(t, "evt-rolled-back")
		if err := st.Insert(ctx, tx, env, testLease); err != nil {
			_ = tx.Rollback()
			t.Fatalf("insert: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		if _, err := st.Get(ctx, env.ID()); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("Get after rollback: err = %v, want ErrNotFound", err)
		}
		if ids, _ := poll(t, st, time.Now().Add(time.Hour), 0, 10); len(ids) != 0 {
			t.Fatalf("poll after rollback = %q, want none", ids)
		}
		if c := countsOf(t, st); c[core.StatusNew] != 0 {
			t.Fatalf("NEW count after rollback = %d, want 0", c[core.StatusNew])
		}
		// The same id can then be inserted and committed.
		insert(t, st, env)
		sameEnvelope(t, get(t, st, env.ID()), env)
	})

	t.Run("DuplicateEventID", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		first := build(t, core.NewEvent("First").ID("evt-dup").PayloadJSONString(`{"n":1}`))
		second := build(t, core.NewEvent("Second").ID("evt-dup").PayloadJSONString(`{"n":2}`))
		insert(t, st, first)

		err := st.Insert(ctx, st.DB(), second, testLease)
		if !errors.Is(err, core.ErrDuplicateEvent) {
			t.Fatalf("autocommit duplicate: err = %v, want ErrDuplicateEvent", err)
		}
		tx, err := st.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = st.Insert(ctx, tx, second, testLease)
		_ = tx.Rollback()
		if !errors.Is(err, core.ErrDuplicateEvent) {
			t.Fatalf("duplicate in transaction: err = %v, want ErrDuplicateEvent", err)
		}
		sameEnvelope(t, get(t, st, "evt-dup"), first)
	})

	t.Run("RejectsInvalidInput", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := t.Context()
		if err := st.Insert(ctx, st.DB(), core.Envelope{}, testLease); !errors.Is(err, core.ErrEmptyEventType) {
			t.Errorf("zero envelope: err = %v, want ErrEmptyEventType", err)
		}
		if err := st.Insert(ctx, nil, jsonEvent(t, "evt-nil-execer"), testLease); !errors.Is(err, core.ErrNoTransaction) {
			t.Errorf("nil execer: err = %v, want ErrNoTransaction", err)
		}
		if c := countsOf(t, st); c[core.StatusNew] != 0 {
			t.Errorf("rows after rejected inserts = %d, want 0", c[core.StatusNew])
		}
	})

	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		ctx := canceled(t)
		if err := st.Insert(ctx, st.DB(), jsonEvent(t, "evt-canceled"), testLease); !errors.Is(err, context.Canceled) {
			t.Errorf("Insert: err = %v, want context.Canceled", err)
		}
		if _, err := markDone(ctx, st, "evt-canceled"); !errors.Is(err, context.Canceled) {
			t.Errorf("MarkDone: err = %v, want context.Canceled", err)
		}
		if _, err := st.PollPending(ctx, time.Now(), 0, 10); !errors.Is(err, context.Canceled) {
			t.Errorf("PollPending: err = %v, want context.Canceled", err)
		}
		// On a transaction: nothing is sent, so the transaction is
		// untouched (on PostgreSQL not aborted) and the error does not
		// say it was.
		tx, err := st.DB().BeginTxx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck
		for _, err := range []error{
			st.Insert(ctx, tx, jsonEvent(t, "evt-canceled-tx"), testLease),
			func() error {
				_, err := st.InsertBatch(ctx, tx, []core.Envelope{jsonEvent(t, "evt-canceled-b")}, []core.Lease{testLease})
				return err
			}(),
			func() error {
				_, err := st.InsertOrdered(ctx, tx, build(t, core.NewEvent("E").ID("evt-canceled-o").OrderKey("k").PayloadJSONString(`{}`)), testLease)
				return err
			}(),
		} {
			if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "abort") {
				t.Errorf("insert on a transaction with a canceled ctx: %v; want context.Canceled, no word of an abort", err)
			}
		}
		if err := st.Insert(t.Context(), tx, jsonEvent(t, "evt-after-cancel"), testLease); err != nil {
			t.Fatalf("insert after the canceled ones: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit: %v", err)
		}
		get(t, st, "evt-after-cancel")
	})

	t.Run("UnicodeInEveryTextField", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		// Each field at its limit in 4-byte characters, plus mixed scripts.
		env := build(t, core.NewEvent(strings.Repeat("🎉", core.MaxEventTypeLen-6)+"注文.作成✓").
			ID(strings.Repeat("🙂", core.MaxEventIDLen-4)+"-ид-").
			AggregateType(strings.Repeat("𝒜", core.MaxAggregateTypeLen-5)+"Ägg-ü").
			AggregateID(strings.Repeat("日", core.MaxAggregateIDLen-3)+"🧾ßx").
			TenantID(strings.Repeat("租", core.MaxTenantIDLen-2)+"α🏢").
			Header("ключ🔑", "値—✓ «quoted» \"double\" \\ back\nline").
			Header("emoji-only", "🚀🚀🚀").
			PayloadJSONString(`{"name":"Zoë 🦊","city":"東京"}`))
		insert(t, st, env)
		rec := get(t, st, env.ID())
		sameEnvelope(t, rec, env)

		const msg = "失败: 💥 ünïcödé — ошибка"
		ok, err := st.MarkRetry(t.Context(), testOwner, env.ID(), t0, testLease.Until, msg)
		mark(t, "MarkRetry", true, ok, err)
		if got := get(t, st, env.ID()).LastError; got != msg {
			t.Errorf("LastError = %q, want %q", got, msg)
		}
	})

	t.Run("Headers", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		h := map[string]string{
			"empty-value":  "",
			"json-ish":     `{"a":[1,2]}`,
			"quotes":       `"'` + "`",
			"control":      "tab\tnewline\nbell\a",
			"html":         "</script><b>&amp;",
			"long":         strings.Repeat("v", 2000),
			"Mixed-Case-K": "x",
		}
		env := build(t, core.NewEvent("WithHeaders").ID("evt-headers").Headers(h).PayloadJSONString(`[]`))
		insert(t, st, env)
		rec := get(t, st, env.ID())
		sameEnvelope(t, rec, env)
		got, err := rec.Envelope()
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Headers(), h) {
			t.Errorf("headers = %q, want %q", got.Headers(), h)
		}
	})

	t.Run("LargestHeaders", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		// A key of MaxHeaderKeyLen 4-byte characters and a value that
		// brings the JSON encoding to MaxHeadersBytes: what Build takes.
		key := strings.Repeat("🔑", core.MaxHeaderKeyLen)
		h := map[string]string{key: strings.Repeat("v", core.MaxHeadersBytes-len(key)-7)}
		if enc, _ := core.EncodeHeaders(h); len(enc) != core.MaxHeadersBytes {
			t.Fatalf("headers encode to %d bytes, want %d", len(enc), core.MaxHeadersBytes)
		}
		env := build(t, core.NewEvent("E").ID("evt-largest-headers").Headers(h).PayloadBytes(make([]byte, core.MaxPayloadBytes)))
		insert(t, st, env)
		sameEnvelope(t, get(t, st, env.ID()), env)
	})

	t.Run("TimesAtTheEdgesOfTheRange", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		first := time.Date(core.MinTimeYear, 1, 1, 0, 0, 0, 1000, time.UTC)
		last := time.Date(core.MaxTimeYear, 12, 31, 23, 59, 59, 999999000, time.UTC)
		for _, c := range []struct {
			id           string
			occurred, nb time.Time
		}{
			{"evt-first", first, first},
			{"evt-last", last, last},
		} {
			env := build(t, core.NewEvent("E").ID(c.id).OccurredAt(c.occurred).NotBefore(c.nb).PayloadJSONString(`{}`))
			// The lease of an event published with a due time ends Lease
			// after it: past the last storable time here.
			lease := core.Lease{Owner: testOwner, Until: env.NotBefore().Add(2 * time.Minute)}
			tx, err := st.DB().BeginTxx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Insert(t.Context(), tx, env, lease); err != nil {
				_ = tx.Rollback()
				t.Fatalf("insert %s: %v", c.id, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			rec := get(t, st, c.id)
			sameTime(t, c.id+" OccurredAt", rec.OccurredAt, c.occurred)
			if c.nb.After(rec.CreatedAt) {
				sameTime(t, c.id+" AvailableAt", rec.AvailableAt, c.nb)
			}
			if want := lease.Until; want.After(last) {
				sameTime(t, c.id+" LockedUntil", rec.LockedUntil, last)
			} else {
				sameTime(t, c.id+" LockedUntil", rec.LockedUntil, want)
			}
			sameEnvelope(t, rec, env)
		}
	})
}
