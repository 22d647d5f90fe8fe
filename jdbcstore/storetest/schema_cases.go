package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/jdbcstore"
)

func (s *suite) testSchema(t *testing.T) {
	t.Run("ApplyTwiceKeepsData", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		env := jsonEvent(t, "schema-keep")
		insert(t, st, env)
		for i := range 2 {
			if err := st.ApplySchema(t.Context()); err != nil {
				t.Fatalf("ApplySchema again (%d): %v", i+1, err)
			}
		}
		sameEnvelope(t, get(t, st, env.ID()), env)
		if sql := st.SchemaSQL(); !strings.Contains(sql, jdbcstore.DefaultTable) {
			t.Errorf("SchemaSQL does not mention %s:\n%s", jdbcstore.DefaultTable, sql)
		}
	})

	t.Run("CustomTableName", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{Table: "custom_outbox_1"})
		if st.Table() != "custom_outbox_1" {
			t.Errorf("Table() = %q", st.Table())
		}
		if !strings.Contains(st.SchemaSQL(), "custom_outbox_1") {
			t.Errorf("SchemaSQL does not use the table name:\n%s", st.SchemaSQL())
		}
		env := jsonEvent(t, "custom-1")
		insert(t, st, env)
		sameEnvelope(t, get(t, st, env.ID()), env)
	})

	t.Run("ReservedWordTableName", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{Table: "order"})
		env := jsonEvent(t, "reserved-1")
		insert(t, st, env)
		ok, err := markDone(t.Context(), st, env.ID())
		mark(t, "MarkDone", true, ok, err)
		if c := countsOf(t, st); c[core.StatusDone] != 1 {
			t.Errorf("DONE count = %d, want 1", c[core.StatusDone])
		}
	})

	t.Run("TwoTablesInOneDatabase", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		other, err := jdbcstore.New(st.DB(), jdbcstore.Config{Dialect: st.Dialect(), Table: "outbox_event_two"})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if err := other.ApplySchema(t.Context()); err != nil {
			t.Fatalf("ApplySchema of a second table: %v", err)
		}
		insert(t, st, jsonEvent(t, "two-a"))
		insert(t, other, jsonEvent(t, "two-b"))
		insert(t, other, jsonEvent(t, "two-c"))
		if n := countsOf(t, st)[core.StatusNew]; n != 1 {
			t.Errorf("first table holds %d rows, want 1", n)
		}
		if n := countsOf(t, other)[core.StatusNew]; n != 2 {
			t.Errorf("second table holds %d rows, want 2", n)
		}
		if _, err := other.Get(t.Context(), "two-a"); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("row leaked across tables: err = %v", err)
		}
	})
}

func (s *suite) testConfig(t *testing.T) {
	t.Run("InvalidTableNames", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		bad := []string{
			"", "a-b", "x;drop", "1abc", strings.Repeat("t", 49), "a b",
			`a"b`, "a`b", "a.b", "tåble", "x\x00",
		}
		for _, name := range bad {
			if err := jdbcstore.ValidateTableName(name); !errors.Is(err, core.ErrInvalidIdentifier) {
				t.Errorf("ValidateTableName(%q): err = %v, want ErrInvalidIdentifier", name, err)
			}
			if name == "" {
				continue // an empty Config.Table means DefaultTable
			}
			if _, err := jdbcstore.New(st.DB(), jdbcstore.Config{Dialect: st.Dialect(), Table: name}); !errors.Is(err, core.ErrInvalidIdentifier) {
				t.Errorf("New(Table: %q): err = %v, want ErrInvalidIdentifier", name, err)
			}
		}
		good := []string{"_", "a", "Outbox_Event_2", strings.Repeat("t", 48)}
		for _, name := range good {
			got, err := jdbcstore.New(st.DB(), jdbcstore.Config{Dialect: st.Dialect(), Table: name})
			if err != nil {
				t.Errorf("New(Table: %q): %v", name, err)
				continue
			}
			if got.Table() != name {
				t.Errorf("Table() = %q, want %q", got.Table(), name)
			}
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		got, err := jdbcstore.New(st.DB(), jdbcstore.Config{Dialect: st.Dialect()})
		if err != nil {
			t.Fatal(err)
		}
		if got.Table() != jdbcstore.DefaultTable || got.Dialect() != st.Dialect() || got.DB() != st.DB() {
			t.Errorf("Table, Dialect, DB = %q, %v, %p", got.Table(), got.Dialect(), got.DB())
		}
	})

	t.Run("InvalidValues", func(t *testing.T) {
		t.Parallel()
		st := s.newStore(t, nil, jdbcstore.Config{})
		if _, err := jdbcstore.New(nil, jdbcstore.Config{Dialect: st.Dialect()}); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("nil db: err = %v, want ErrInvalidConfig", err)
		}
		for _, n := range []int{-1, jdbcstore.MaxMaxErrorLen + 1} {
			if _, err := jdbcstore.New(st.DB(), jdbcstore.Config{Dialect: st.Dialect(), MaxErrorLen: n}); !errors.Is(err, core.ErrInvalidConfig) {
				t.Errorf("MaxErrorLen %d: err = %v, want ErrInvalidConfig", n, err)
			}
		}
	})
}

func (s *suite) testConcurrency(t *testing.T) {
	t.Parallel()
	st := s.newStore(t, nil, jdbcstore.Config{})
	ctx := t.Context()
	const workers, perWorker = 4, 25
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				env, err := core.NewEvent("Concurrent").PayloadValue(map[string]int{"w": w, "i": i}).Build()
				if err != nil {
					fail(err)
					return
				}
				tx, err := st.DB().BeginTxx(ctx, nil)
				if err != nil {
					fail(err)
					return
				}
				if err := st.Insert(ctx, tx, env, testLease); err != nil {
					_ = tx.Rollback()
					fail(err)
					return
				}
				if err := tx.Commit(); err != nil {
					fail(err)
					return
				}
				var ok bool
				if i%2 == 0 {
					ok, err = markDone(ctx, st, env.ID())
				} else {
					ok, err = st.MarkRetry(ctx, testOwner, env.ID(), t0, testLease.Until, "retry")
				}
				if err != nil || !ok {
					fail(errors.Join(errors.New("mark "+env.ID()), err))
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	doneWant, retryWant := workers*((perWorker+1)/2), workers*(perWorker/2)
	c := countsOf(t, st)
	if c[core.StatusDone] != doneWant || c[core.StatusRetry] != retryWant || c[core.StatusNew] != 0 {
		t.Errorf("counts = %v, want %d DONE and %d RETRY", c, doneWant, retryWant)
	}
}

// testForeignTable: an existing table that is not an outbox table (one of
// the application's, named by mistake, or the inbox's) is refused by
// ApplySchema with a ConfigError of field Table, and left as it was; an
// inbox on an outbox table is refused the same way.
func (s *suite) testForeignTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := s.newStore(t, nil, jdbcstore.Config{})
	db := st.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE storetest_orders (ref VARCHAR(64) NOT NULL PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(ctx, db, inbox.Config{Dialect: s.h.Dialect, Table: "storetest_inbox_ft"})
	if err != nil {
		t.Fatalf("inbox.New: %v", err)
	}
	for _, table := range []string{"storetest_orders", in.Table()} {
		other, err := jdbcstore.New(db, jdbcstore.Config{Dialect: s.h.Dialect, Table: table})
		if err != nil {
			t.Fatalf("New(%s): %v", table, err)
		}
		err = other.ApplySchema(ctx)
		var ce *core.ConfigError
		if !errors.As(err, &ce) || ce.Field != "Table" || !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("ApplySchema on the existing table %s = %v; want a ConfigError of field Table", table, err)
		}
		// Nothing altered it: it has no ordering column.
		if rows, err := db.QueryContext(ctx, "SELECT order_key FROM "+s.h.Dialect.QuoteIdent(table)+" WHERE 1 = 0"); err == nil {
			_ = rows.Close()
			t.Errorf("ApplySchema added the ordering columns to %s", table)
		}
	}
	_, err = inbox.New(ctx, db, inbox.Config{Dialect: s.h.Dialect, Table: st.Table()})
	var ce *core.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Table" {
		t.Errorf("inbox.New on the outbox table = %v; want a ConfigError of field Table", err)
	}
	// The store's own table passes.
	if err := st.ApplySchema(ctx); err != nil {
		t.Errorf("ApplySchema on the outbox table again: %v", err)
	}
}
