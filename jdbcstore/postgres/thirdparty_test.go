package postgres_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/postgres"
	"github.com/outbox-go/outbox/jdbcstore/storetest"
)

// A third-party dialect as README "Adding a database" describes one: a
// driver of its own (here pgx's, under a type and a name sqlx does not
// know) and a dialect registered for that name (here PostgreSQL's
// primitives).
const ownDriverName = "outbox_test_ownpg"

type ownDriver struct{ driver.Driver }

type ownDialect struct{ jdbcstore.Dialect }

func (ownDialect) Name() string          { return "ownpg" }
func (ownDialect) DriverNames() []string { return []string{ownDriverName} }

// brokenClassify, set from OUTBOX_TEST_BROKEN_CLASSIFY in a child process
// of TestConformanceCatchesABrokenClassify, breaks ownDialect's Classify:
// "never-busy" says other for lock contention, "always-busy" says busy
// for every driver error.
var brokenClassify = os.Getenv("OUTBOX_TEST_BROKEN_CLASSIFY")

// Classify is PostgreSQL's, or broken as brokenClassify says.
func (d ownDialect) Classify(err error) jdbcstore.ErrorClass {
	c := d.Dialect.Classify(err)
	var pe *pgconn.PgError
	switch {
	case brokenClassify == "never-busy" && c == jdbcstore.ClassBusy:
		return jdbcstore.ClassOther
	case brokenClassify == "always-busy" && errors.As(err, &pe):
		return jdbcstore.ClassBusy
	}
	return c
}

// LockSchema forwards PostgreSQL's optional jdbcstore.SchemaLocker, which
// the embedded interface does not carry.
func (d ownDialect) LockSchema(ctx context.Context, conn *sql.Conn, name string) (func(bool) error, error) {
	return d.Dialect.(jdbcstore.SchemaLocker).LockSchema(ctx, conn, name)
}

func init() {
	sql.Register(ownDriverName, ownDriver{stdlib.GetDefaultDriver()})
	jdbcstore.Register(ownDialect{postgres.Dialect})
}

// The conformance suite passes for a dialect whose driver name sqlx does
// not know (its portable statements are rebound to the dialect's
// placeholders, not the handle's), and the dialect is detected by the
// name the handle was opened with.
func TestThirdPartyDialectConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{Name: "ownpg", Dialect: ownDialect{postgres.Dialect},
		NewStore: func(t *testing.T, cfg jdbcstore.Config) *jdbcstore.Store {
			t.Helper()
			db, err := sqlx.Open(ownDriverName, testdb.PostgresSchemaDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			st, err := jdbcstore.New(db, cfg) // no Dialect: detected
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := st.Dialect().Name(); got != "ownpg" {
				t.Fatalf("detected dialect %s, want ownpg", got)
			}
			if err := st.ApplySchema(t.Context()); err != nil {
				t.Fatalf("ApplySchema: %v", err)
			}
			return st
		},
		Contend: func(t *testing.T, st *jdbcstore.Store) error {
			return storetest.RowLockContention(t, st, "SET lock_timeout = '100ms'")
		}})
}

// The suite fails a dialect that never classifies lock contention as busy
// (the store would fail at once where it should retry) and one that calls
// every driver error busy (it would retry a refused statement until its
// timeout): each runs in a child process, whose failure is the check.
func TestConformanceCatchesABrokenClassify(t *testing.T) {
	testdb.PostgresDSN(t)
	for broken, want := range map[string]string{
		"never-busy":  "want busy (lock contention the store retries)",
		"always-busy": "want other (the statement was refused",
	} {
		t.Run(broken, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestThirdPartyDialectConformance$/^ownpg$/^(Dialect|Contention)$", "-test.count=1")
			cmd.Env = append(os.Environ(), "OUTBOX_TEST_BROKEN_CLASSIFY="+broken)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("the suite with a %s Classify: %v, output:\n%s\nwant a failure saying %q", broken, err, out, want)
			}
		})
	}
}

// A *sql.DB does not keep the name it was opened with: the dialect is
// found from its driver, for outbox.New as for a *sqlx.DB whose name has
// no dialect (without one, New fails with ErrUnsupportedDriver).
func TestDialectDetectedFromTheDriver(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	for _, tc := range []struct {
		name, driver, table string
		wrap                func(*sql.DB) *sqlx.DB
	}{
		{"third-party *sql.DB", ownDriverName, "detect_own", nil},
		{"pgx *sql.DB", "pgx", "detect_pgx", nil},
		{"pgx *sqlx.DB named postgres", "pgx", "detect_named", func(db *sql.DB) *sqlx.DB { return sqlx.NewDb(db, "postgres") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sql.Open(tc.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			cfg := outbox.Config{Store: jdbcstore.Config{Table: tc.table}}
			var ob *outbox.Outbox
			if tc.wrap != nil {
				ob, err = outbox.New(context.Background(), tc.wrap(db), cfg)
			} else {
				ob, err = outbox.New(context.Background(), db, cfg)
			}
			if err != nil {
				t.Fatalf("outbox.New: %v", err)
			}
			t.Cleanup(func() { _ = ob.Close(context.Background()) })
			err = ob.InTx(context.Background(), func(ctx context.Context) error {
				env, err := outbox.JSONEvent("E", `{}`)
				if err != nil {
					return err
				}
				_, err = ob.Publish(ctx, env)
				return err
			})
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
		})
	}
}
